"""EventBridge rule delivery to Lambda and Step Functions targets, and scheduled rules on a clock.

moto matches event patterns and delivers to SQS, Logs, archives and buses, but raises NotImplementedError for
Lambda and Step Functions targets (`moto.events.models.Rule.send_to_targets`), ignores Input and InputPath for SQS
targets and inserts InputTransformer strings unquoted. The patched method delivers Lambda, Step Functions and SQS
targets itself, after applying the target's Input / InputPath / InputTransformer, and leaves the rest to moto.
A target that cannot be delivered to is retried per its RetryPolicy and then sent to its DeadLetterConfig queue,
as EventBridge does (a Lambda target counts as delivered once the asynchronous invoke is accepted).
"""

from __future__ import annotations

import contextvars
import copy
import functools
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter
from jsonpath_ng.ext import parse as jsonpath_parse  # type: ignore[attr-defined]
from moto.events.models import EventsBackend, Rule, events_backends

from localcloud.clock import Clock
from localcloud.fixes import atomic
from localcloud.fixes.pollers import Periodic

LOG = logging.getLogger("localcloud.fixes.events")
# A JSONPath is parsed once (jsonpath_ng builds a new parser for every parse); moto's interpreter uses it too.
jsonpath = functools.lru_cache(maxsize=4096)(jsonpath_parse)

Deliver = Callable[[str, Any], None]  # (target ARN, input) -> None; raises when the target cannot take it


def _as_delivered(event: dict[str, Any]) -> dict[str, Any]:
    """The event as EventBridge sends it: moto keeps `time` as epoch seconds and adds its own `ingestion-time`."""
    event = {k: v for k, v in event.items() if k != "ingestion-time"}
    if isinstance(event.get("time"), (int, float)):
        event["time"] = _iso(event["time"])
    return event


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def target_text(target: dict[str, Any], event: dict[str, Any], rule: Rule | None = None) -> str:
    """The text EventBridge sends to a target: Input, InputPath, InputTransformer, or the whole event."""
    delivered = _as_delivered(event)
    if "Input" in target:
        return str(target["Input"])
    if "InputPath" in target:
        matches = jsonpath(target["InputPath"]).find(delivered)
        return json.dumps(matches[0].value if matches else None)
    transformer = target.get("InputTransformer")
    if transformer:
        values: dict[str, Any] = {}
        for name, path in transformer.get("InputPathsMap", {}).items():
            matches = jsonpath(path).find(delivered)
            values[name] = matches[0].value if matches else None
        values["aws.events.event.json"] = delivered
        values["aws.events.event"] = {k: v for k, v in delivered.items() if k != "detail"}
        values["aws.events.event.ingestion-time"] = _iso(float(event.get("ingestion-time", time.time())))
        if rule is not None:
            values["aws.events.rule-arn"] = rule.arn
            values["aws.events.rule-name"] = rule.name
        return render_input_template(transformer["InputTemplate"], values)
    return json.dumps(delivered)


def target_input(target: dict[str, Any], event: dict[str, Any], rule: Rule | None = None) -> Any:
    """What a Lambda or Step Functions target receives: the target text, parsed when it is JSON."""
    text = target_text(target, event, rule)
    try:
        return json.loads(text)
    except ValueError:
        return text


_PLACEHOLDER = re.compile(r"<([A-Za-z0-9_.\-]+)>")


def render_input_template(template: str, values: dict[str, Any]) -> str:
    """Fill an InputTemplate as EventBridge does: in a JSON template a placeholder outside a string literal becomes
    the value as JSON (a string gets its quotes); inside a string literal, or in a text template, the bare value."""
    is_json = template.lstrip().startswith(("{", "["))
    out: list[str] = []
    in_string, escaped, position = False, False, 0
    for match in _PLACEHOLDER.finditer(template):
        segment = template[position : match.start()]
        for char in segment:
            if escaped:
                escaped = False
            elif char == "\\" and in_string:
                escaped = True
            elif char == '"':
                in_string = not in_string
        out.append(segment)
        position = match.end()
        name = match.group(1)
        if name not in values:
            out.append(match.group(0))
            continue
        value = values[name]
        if is_json and not in_string:
            out.append(json.dumps(value))
            continue
        bare = "" if value is None else value if isinstance(value, str) else json.dumps(value)
        out.append(json.dumps(bare)[1:-1] if in_string else bare)
    out.append(template[position:])
    return "".join(out)


_moto_send_to_targets = Rule.send_to_targets  # moto's own, for the targets it delivers itself


# Sends a dead-lettered event to the DeadLetterConfig ARN with the message attributes EventBridge sets
# (RULE_ARN, TARGET_ARN, ERROR_CODE, ERROR_MESSAGE, ...: what a redrive reads to replay the event to its target).
SendToDlq = Callable[[str, Any, dict[str, str]], None]


def rule_delivery(deliver: Deliver, send_to_dlq: SendToDlq) -> Callable[..., None]:
    """The replacement of `Rule.send_to_targets` (installed by localcloud/fixes/patches.py): Lambda and Step Functions
    targets through `deliver`, SQS targets with their Input applied; the other targets are left to moto."""

    def send_to_targets(self: Rule, event: dict[str, Any], transform_input: bool = True) -> None:
        if self.scheduled_expression and not self.event_pattern.get_pattern():
            return  # a schedule-only rule matches no put event (moto's empty pattern would match every one)
        if self.event_pattern.matches_event(event):
            send_to_all_targets(self, event, transform_input)

    def send_to_all_targets(self: Rule, event: dict[str, Any], transform_input: bool = True) -> None:
        for target in self.targets:
            service = target["Arn"].split(":")[2]
            if service in ("lambda", "states"):
                _deliver_with_retries(
                    lambda arn, t=target: deliver(arn, target_input(t, event, self)),
                    send_to_dlq,
                    self.arn,
                    target,
                    event,
                )
            elif service == "sqs":  # moto ignores Input and InputPath, and misquotes InputTransformer values
                _deliver_with_retries(
                    lambda arn, t=target: _send_to_queue(t, target_text(t, event, self)),
                    send_to_dlq,
                    self.arn,
                    target,
                    event,
                )
            else:
                only_this = copy.copy(self)
                only_this.targets = [target]
                _moto_send_to_targets(only_this, event, transform_input)

    send_to_targets.all_targets = send_to_all_targets  # type: ignore[attr-defined]
    return send_to_targets


# --- reserved sources -------------------------------------------------------------------------------------------
_as_service: contextvars.ContextVar[bool] = contextvars.ContextVar("as_service", default=False)
_original_put_events = EventsBackend.put_events
REFUSED_SOURCE = {"ErrorCode": "NotAuthorizedForSourceException", "ErrorMessage": "Not authorized for the source."}


@contextmanager
def as_service() -> Iterator[None]:
    """Put events as an AWS service does (the offline services: simulators, Step Functions status events). Only
    AWS services may use the reserved `aws.*` sources; a client's PutEvents with one is refused entry by entry."""
    token = _as_service.set(True)
    try:
        yield
    finally:
        _as_service.reset(token)


def put_events(self: EventsBackend, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """moto accepts any source; EventBridge refuses a client's `aws.*` one, so a forged service event cannot be
    put offline either (gap 12). Under the backend's lock (gap 21, localcloud/fixes/atomic.py): moto iterates the bus's
    rules and their targets, which a PutRule or PutTargets on another thread would change underneath."""
    with atomic.lock(self):
        if _as_service.get():
            return _original_put_events(self, events)  # type: ignore[no-any-return]
        results: list[dict[str, Any]] = [dict(REFUSED_SOURCE) for _ in events]
        allowed = [i for i, event in enumerate(events) if not str(event.get("Source", "")).startswith("aws.")]
        if allowed:
            for i, result in zip(allowed, _original_put_events(self, [events[i] for i in allowed]), strict=True):
                results[i] = result
        return results


def fire(rule: Rule, event: dict[str, Any]) -> None:
    """Send a rule's own (scheduled) event to all its targets, without matching it against an event pattern."""
    send_all = getattr(Rule.send_to_targets, "all_targets", None)
    if send_all is None:
        raise RuntimeError("the offline cloud's EventBridge delivery is not installed (localcloud/fixes/patches.py)")
    send_all(rule, event)


def _send_to_queue(target: dict[str, Any], body: str) -> None:
    from moto.sqs.models import sqs_backends

    arn = target["Arn"].split(":")
    sqs_backends[arn[4]][arn[3]].send_message(
        queue_name=arn[5], message_body=body, group_id=target.get("SqsParameters", {}).get("MessageGroupId")
    )


def _deliver_with_retries(
    send: Callable[[str], None], send_to_dlq: SendToDlq, rule_arn: str, target: dict[str, Any], event: dict[str, Any]
) -> None:
    attempts = 1 + int(target.get("RetryPolicy", {}).get("MaximumRetryAttempts", 185))
    error: Exception | None = None
    for attempt in range(min(attempts, 3)):  # offline, a target that failed 3 times will not recover
        try:
            send(target["Arn"])
            return
        except Exception as exc:  # noqa: BLE001 - any delivery failure is retried, then dead-lettered
            error = exc
            time.sleep(0.05 * (attempt + 1))
    dlq = target.get("DeadLetterConfig", {}).get("Arn")
    LOG.warning("rule target %s failed (%s); dead-letter queue: %s", target["Arn"], error, dlq)
    if dlq:
        attributes = {
            "RULE_ARN": rule_arn,
            "TARGET_ARN": target["Arn"],
            "ERROR_CODE": "SDK_CLIENT_ERROR",
            "ERROR_MESSAGE": str(error)[:256],
            "EXHAUSTED_RETRY_CONDITION": "MaximumRetryAttemptsExhausted",
            "RETRY_ATTEMPTS": str(min(attempts, 3) - 1),
        }
        send_to_dlq(dlq, _as_delivered(event), attributes)


# --- schedules ----------------------------------------------------------------------------------------------------
_RATE = re.compile(r"rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


def next_fire(expression: str, after: datetime) -> datetime:
    """The first time strictly after `after` at which an EventBridge schedule expression fires."""
    rate = _RATE.fullmatch(expression.strip())
    if rate:
        return after + timedelta(seconds=int(rate.group(1)) * _UNIT_SECONDS[rate.group(2).rstrip("s")])
    cron = re.fullmatch(r"cron\((.+)\)", expression.strip())
    if not cron:
        raise ValueError(f"unsupported schedule expression {expression!r}")
    minute, hour, dom, month, dow, _year = cron.group(1).split()
    fields = " ".join(f.replace("?", "*") for f in (minute, hour, dom, month, _croniter_weekdays(dow)))
    return croniter(fields, after).get_next(datetime)  # type: ignore[no-any-return]


def _croniter_weekdays(field: str) -> str:
    """EventBridge numbers weekdays 1-7 from Sunday (`2#1`: the first Monday, `6L`: the last Friday); croniter
    numbers them 0-6 and writes the last Friday `L5`. The `#` ordinal is not a weekday and stays as it is."""

    def convert(part: str) -> str:
        last = re.fullmatch(r"(\d)L", part)
        if last:
            return f"L{int(last.group(1)) - 1}"
        days, hash_, nth = part.partition("#")
        return re.sub(r"\d", lambda m: str(int(m.group()) - 1), days) + hash_ + nth

    return ",".join(convert(part) for part in field.split(","))


class Scheduler(Periodic):
    """Fires ENABLED scheduled rules when they fall due on the offline cloud's clock."""

    def __init__(self, region: str, account_id: str, clock: Clock, tick: float = 0.05) -> None:
        super().__init__("localcloud-scheduler", tick, self.fire_due)
        self.region = region
        self.account_id = account_id
        self.clock = clock
        self._next: dict[str, datetime] = {}

    def fire_due(self) -> None:
        now = self.clock.now()
        backend = events_backends[self.account_id][self.region]
        with atomic.lock(backend):  # the rules and their targets, unchanged while they are read (gap 21)
            for bus in list(backend.event_buses.values()):
                for rule in list(bus.rules.values()):
                    if not rule.scheduled_expression or rule.state != "ENABLED":
                        continue
                    due = self._next.setdefault(rule.arn, next_fire(rule.scheduled_expression, now))
                    if due <= now:
                        self._next[rule.arn] = next_fire(rule.scheduled_expression, due)
                        LOG.info("schedule %s fired (%s)", rule.name, rule.scheduled_expression)
                        fire(rule, scheduled_event(rule, due))


def scheduled_event(rule: Rule, at: datetime) -> dict[str, Any]:
    """The event EventBridge sends for a scheduled rule."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": rule.account_id,
        "time": at.timestamp(),  # epoch seconds, as moto keeps events; targets get ISO 8601 (see target_input)
        "region": rule.region_name,
        "resources": [rule.arn],
        "detail": {},
        "ingestion-time": time.time(),  # moto's bookkeeping, which its SQS/Logs delivery reads
    }
