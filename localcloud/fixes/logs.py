"""CloudWatch Logs subscription filters with a Lambda destination.

moto sends every log event of a group to a subscribed Lambda, ignoring the filter pattern, through the Docker
invoke path. Here the pattern is applied (term patterns by moto's own matcher; JSON patterns such as
`{ $.eventType = "JOB_COMPLETED" || $.eventType = "BUCKET_ACCESS_DENIED" }` by a small matcher) and the
gzip+base64 `awslogs` payload is delivered as an asynchronous invocation, as CloudWatch Logs does.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from collections.abc import Callable
from fnmatch import fnmatchcase
from typing import Any

from moto.awslambda.models import LambdaBackend
from moto.logs.models import logs_backends
from moto.logs.utils import EventMessageFilter

_CONDITION = re.compile(r'\s*\$\.([\w.\[\]]+)\s*(=|!=)\s*("(?:[^"\\]|\\.)*"|[-\w.*]+)\s*')


def matches(pattern: str, message: str) -> bool:
    """Whether a log event's message matches a subscription filter pattern."""
    pattern = pattern.strip()
    if not pattern:
        return True
    if not pattern.startswith("{"):
        return bool(EventMessageFilter(pattern).matches(message))
    try:
        document = json.loads(message)
    except ValueError:
        return False
    body = pattern[1:-1]
    if "(" in body:
        raise ValueError(f"parenthesised JSON filter patterns are not supported offline: {pattern}")
    return any(all(_condition(term, document) for term in alternative.split("&&")) for alternative in body.split("||"))


def _condition(term: str, document: Any) -> bool:
    match = _CONDITION.fullmatch(term)
    if not match:
        raise ValueError(f"unsupported JSON filter condition: {term.strip()}")
    path, operator, expected = match.groups()
    value: Any = document
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    wanted = json.loads(expected) if expected.startswith('"') else expected
    equal = value is not None and fnmatchcase(str(value), str(wanted))
    return equal if operator == "=" else not equal


def subscription_payload(
    owner: str, group: str, stream: str, filter_name: str, events: list[dict[str, Any]]
) -> dict[str, Any]:
    """The event a subscribed Lambda receives: `{"awslogs": {"data": base64(gzip(json))}}`."""
    data = {
        "messageType": "DATA_MESSAGE",
        "owner": owner,
        "logGroup": group,
        "logStream": stream,
        "subscriptionFilters": [filter_name],
        "logEvents": events,
    }
    compressed = gzip.compress(json.dumps(data, separators=(",", ":")).encode())
    return {"awslogs": {"data": base64.b64encode(compressed).decode()}}


def subscription_delivery(invoke_async: Callable[[str, Any], None]) -> Callable[..., None]:
    """The replacement of `LambdaBackend.send_log_event` (installed by localcloud/fixes/patches.py): filtered
    subscription batches to Lambda destinations through `invoke_async`."""

    def send_log_event(
        self: LambdaBackend,
        function_arn: str,
        filter_name: str,
        log_group_name: str,
        log_stream_name: str,
        log_events: list[dict[str, Any]],
    ) -> None:
        group = logs_backends[self.account_id][self.region_name].groups[log_group_name]
        pattern = group.subscription_filters[filter_name].filter_pattern
        selected = [e for e in log_events if matches(pattern, e["message"])]
        if selected:
            payload = subscription_payload(self.account_id, log_group_name, log_stream_name, filter_name, selected)
            invoke_async(function_arn, payload)

    return send_log_event
