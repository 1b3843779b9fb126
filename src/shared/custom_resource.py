"""CloudFormation custom resources: the answer a resource's function owes CloudFormation, whatever happened.

CloudFormation waits for a custom resource's answer, an HTTP PUT of a JSON document to the pre-signed S3 URL of
its request (`ResponseURL`), for up to an hour; a function that fails without answering holds the stack that long.
So a handler works inside `answering(event)`, which answers SUCCESS with what the block set, or FAILED with the
exception's name and message (one line, as the stack's events show it), and never raises.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from shared.observability import logger

RESPONSE_TIMEOUT_SECONDS = 10


@dataclass
class Answer:
    """What the block answers with: the resource's physical id and the attributes `!GetAtt` reads."""

    physical_id: str
    data: dict[str, str] = field(default_factory=dict)


@contextmanager
def answering(event: dict[str, Any]) -> Iterator[Answer]:
    """`with answering(event) as answer:` do the request's work and set `answer.physical_id` / `answer.data`; the
    answer is sent when the block ends: SUCCESS, or FAILED with the reason if it raised."""
    answer = Answer(physical_id=str(event.get("PhysicalResourceId") or event.get("LogicalResourceId", "resource")))
    try:
        yield answer
    except Exception as exc:  # noqa: BLE001 - every failure must reach CloudFormation, or the stack waits an hour
        logger.exception("custom resource failed", extra={"requestType": event.get("RequestType")})
        _send(event, "FAILED", answer, reason=f"{type(exc).__name__}: {exc}")
    else:
        _send(event, "SUCCESS", answer)


def _send(event: dict[str, Any], status: str, answer: Answer, reason: str = "") -> None:
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason or f"See the function's log stream for request {event.get('RequestId')}",
            "PhysicalResourceId": answer.physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": answer.data,
        }
    ).encode()
    url = str(event["ResponseURL"])
    if not url.startswith(("https://", "http://")):  # an S3 pre-signed URL (http: only on the offline cloud)
        raise ValueError(f"ResponseURL is not an HTTP URL: {url[:40]}")
    # The pre-signed URL's signature covers no Content-Type: send none
    request = urllib.request.Request(url, data=body, method="PUT", headers={"Content-Type": ""})  # noqa: S310
    with urllib.request.urlopen(request, timeout=RESPONSE_TIMEOUT_SECONDS) as response:  # noqa: S310 - checked above
        logger.info("custom resource answered", extra={"status": status, "httpStatus": response.status})
