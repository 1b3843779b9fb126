"""EventBridge rule delivery to Lambda and Step Functions targets, and scheduled rules on a clock.

moto matches event patterns and delivers to SQS, Logs, archives and buses, but raises NotImplementedError for
Lambda and Step Functions targets (`moto.events.models.Rule.send_to_targets`). The patched method delivers those
itself, after applying the target's Input / InputPath / InputTransformer, and leaves every other target to moto.
A target that cannot be delivered to is retried per its RetryPolicy and then sent to its DeadLetterConfig queue,
as EventBridge does (a Lambda target counts as delivered once the asynchronous invoke is accepted).
"""

from __future__ import annotations

import copy
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter
from jsonpath_ng.ext import parse as jsonpath
from moto.events.models import Rule, events_backends
from moto.events.utils import EventTemplateParser

LOG = logging.getLogger("localcloud.events")

Deliver = Callable[[str, Any], None]  # (target ARN, input) -> None; raises when the target cannot take it


def target_input(target: dict[str, Any], event: dict[str, Any]) -> Any:
    """What EventBridge passes to a target: Input, InputPath, InputTransformer, or the whole event."""
    event = dict(event)
    if isinstance(event.get("time"), (int, float)):  # moto keeps epoch seconds; EventBridge sends ISO 8601
        event["time"] = datetime.fromtimestamp(event["time"], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    event.setdefault("ingestion-time", time.time())
    if "Input" in target:
        return json.loads(target["Input"])
    if "InputPath" in target:
        event.pop("ingestion-time")
        matches = jsonpath(target["InputPath"]).find(event)
        return matches[0].value if matches else None
    transformer = target.get("InputTransformer")
    if transformer:
        rendered = EventTemplateParser.parse(
            input_template=transformer["InputTemplate"],
            input_paths_map=transformer.get("InputPathsMap", {}),
            event=event,
        )
        return rendered
    event.pop("ingestion-time")  # moto's bookkeeping, not part of the event
    return event


def install(deliver: Deliver, send_to_dlq: Callable[[str, Any], None]) -> None:
    """Route Lambda and Step Functions targets of every rule through `deliver`."""
    original = Rule.send_to_targets
    if getattr(original, "__localcloud__", False):
        original = original.__wrapped__  # type: ignore[attr-defined]

    def send_to_targets(self: Rule, event: dict[str, Any], transform_input: bool = True) -> None:
        if not self.event_pattern.matches_event(event):
            return
        for target in self.targets:
            service = target["Arn"].split(":")[2]
            if service not in ("lambda", "states"):
                only_this = copy.copy(self)
                only_this.targets = [target]
                original(only_this, event, transform_input)
                continue
            _deliver_with_retries(deliver, send_to_dlq, target, event)

    send_to_targets.__localcloud__ = True  # type: ignore[attr-defined]
    send_to_targets.__wrapped__ = original  # type: ignore[attr-defined]
    Rule.send_to_targets = send_to_targets  # type: ignore[method-assign]


def _deliver_with_retries(deliver: Deliver, send_to_dlq: Callable[[str, Any], None], target: dict[str, Any],
                          event: dict[str, Any]) -> None:
    attempts = 1 + int(target.get("RetryPolicy", {}).get("MaximumRetryAttempts", 185))
    error: Exception | None = None
    for attempt in range(min(attempts, 3)):  # offline, a target that failed 3 times will not recover
        try:
            deliver(target["Arn"], target_input(target, event))
            return
        except Exception as exc:  # noqa: BLE001 - any delivery failure is retried, then dead-lettered
            error = exc
            time.sleep(0.05 * (attempt + 1))
    dlq = target.get("DeadLetterConfig", {}).get("Arn")
    LOG.warning("rule target %s failed (%s); dead-letter queue: %s", target["Arn"], error, dlq)
    if dlq:
        send_to_dlq(dlq, event)


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
    # EventBridge numbers weekdays 1-7 from Sunday and uses `?` for "any"; croniter numbers them 0-6.
    dow = re.sub(r"\d", lambda m: str(int(m.group()) - 1), dow)
    fields = " ".join(f.replace("?", "*") for f in (minute, hour, dom, month, dow))
    return croniter(fields, after).get_next(datetime)  # type: ignore[no-any-return]


class Scheduler:
    """Fires ENABLED scheduled rules on a virtual clock that runs `speedup` times faster than real time."""

    def __init__(self, region: str, account_id: str, speedup: float = 1.0, tick: float = 0.05) -> None:
        self.region = region
        self.account_id = account_id
        self.speedup = speedup
        self.tick = tick
        self._start_real = time.monotonic()
        self._start_virtual = datetime.now(UTC)
        self._next: dict[str, datetime] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="localcloud-scheduler", daemon=True)

    def now(self) -> datetime:
        return self._start_virtual + timedelta(seconds=(time.monotonic() - self._start_real) * self.speedup)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.tick):
            try:
                self.fire_due()
            except Exception:  # noqa: BLE001 - a bad tick must not stop the clock
                LOG.exception("scheduler tick failed")

    def fire_due(self) -> None:
        now = self.now()
        for bus in list(events_backends[self.account_id][self.region].event_buses.values()):
            for rule in list(bus.rules.values()):
                if not rule.scheduled_expression or rule.state != "ENABLED":
                    continue
                due = self._next.setdefault(rule.arn, next_fire(rule.scheduled_expression, now))
                if due <= now:
                    self._next[rule.arn] = next_fire(rule.scheduled_expression, due)
                    LOG.info("schedule %s fired (%s)", rule.name, rule.scheduled_expression)
                    rule.send_to_targets(scheduled_event(rule, due))


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
