"""Data access for the token table: one item per job, keyed `<service>#<job id>` so ids never collide.

An item holds either the waiter's token (registered first) or the job's outcome (completion arrived first). The
waiter is a Step Functions task (its task token) or a Lambda durable execution (its callback id): `waiterKind` says
which, and so which calls close its wait (shared.waits); an item without it is a task's. A token item also names what
registered it (execution ARN, state or callback name, time it was entered), so that a retried registration of that
same state can replace its own, dead, token; and, where the workflow passes it, the wait's heartbeat timeout, which
with the time of the last heartbeat the reconciler sent (`heartbeatAt`) says when the wait's heartbeat runs out. Every
write is conditional; reads are consistent and ignore items whose TTL has passed (DynamoDB deletes them late).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from shared.aws import conditionally, table
from shared.callback.adapters import adapter
from shared.exceptions import JobIdTooLongError
from shared.outcome import Outcome
from shared.waits import Kind


@dataclass(frozen=True)
class Waiter:
    """The Task state waiting for a job: $$.Execution.Id, $$.State.Name and $$.State.EnteredTime, and which attempt
    of it ($$.State.RetryCount). A retry of the state keeps the first three (and may bring a new task token); another
    execution or another entry of the state does not. A durable execution's wait is named by its ARN, the callback's
    name and when its submitter ran; its submitter's retries keep the callback id, so a repeat is a duplicate."""

    execution_arn: str
    state_name: str
    entered_time: str
    attempt: int = 0
    heartbeat_seconds: int | None = None  # the state's HeartbeatSeconds, where the workflow passes it
    kind: Kind = Kind.TASK_TOKEN

    def item(self) -> dict[str, str | int]:
        heartbeat = {} if self.heartbeat_seconds is None else {"heartbeatSeconds": self.heartbeat_seconds}
        return {
            "waiterKind": self.kind.value,
            "executionArn": self.execution_arn,
            "stateName": self.state_name,
            "stateEnteredTime": self.entered_time,
            "attempt": self.attempt,
            **heartbeat,
        }

    def retries(self, other: Waiter) -> bool:
        """Whether this is a later attempt of the same Task state entry as `other`."""
        same = (self.execution_arn, self.state_name, self.entered_time)
        return same == (other.execution_arn, other.state_name, other.entered_time) and self.attempt > other.attempt


@dataclass(frozen=True)
class Entry:
    token: str | None
    outcome: Outcome | None
    expires_at: int
    waiter: Waiter | None
    kind: Kind = Kind.TASK_TOKEN  # what the token is


@dataclass(frozen=True)
class Waiting:
    """A registered task token whose job has not reported back yet.

    `deadline` (epoch seconds) is when the waiting task's heartbeat runs out, as far as the table knows: its last
    heartbeat (or its registration) plus its HeartbeatSeconds. An entry without HeartbeatSeconds (registered by a
    version before registrations carried it, or a task without one) counts from that time alone: it is taken early
    rather than late."""

    service: str
    job_id: str
    token: str
    registered_at: int
    deadline: int
    kind: Kind = Kind.TASK_TOKEN


MAX_KEY_BYTES = 2048  # DynamoDB's limit on a partition key value


def job_key(service: str, job_id: str) -> str:
    """The job's item key; a job id too long for one is refused before any call (DynamoDB would refuse the key)."""
    key = f"{service}#{job_id}"
    if len(key.encode()) > MAX_KEY_BYTES:
        raise JobIdTooLongError(
            f"a {service} job id of {len(job_id.encode())} bytes: its key would exceed DynamoDB's {MAX_KEY_BYTES}-byte"
            " partition key limit"
        )
    return key


class TokenStore:
    """The token table. Its methods may run on several threads at once (the reconciler's workers): each call uses
    its own thread's Table resource."""

    def __init__(self, table_name: str) -> None:
        self._table_name = table_name

    @property
    def _table(self) -> Any:
        return table(self._table_name)

    def get(self, key: str) -> Entry | None:
        item = self._table.get_item(Key={"jobKey": key}, ConsistentRead=True).get("Item")
        if not item or int(item["expiresAt"]) <= time.time():
            return None
        outcome = _outcome(json.loads(item["outcome"])) if "outcome" in item else None
        waiter = (
            Waiter(
                str(item["executionArn"]),
                str(item["stateName"]),
                str(item["stateEnteredTime"]),
                int(item["attempt"]),
                kind=_kind(item),
            )
            if "executionArn" in item
            else None  # registered by a version before registrations named their waiter: never replaced
        )
        return Entry(item.get("token"), outcome, int(item["expiresAt"]), waiter, _kind(item))

    def waiting(self, registered_before: int) -> Iterator[Waiting]:
        """Every live token registered before the given time (a scan: the table only holds jobs in flight)."""
        now = int(time.time())
        kwargs: dict[str, Any] = {
            "FilterExpression": "attribute_exists(#t) AND registeredAt <= :before AND expiresAt > :now",
            "ExpressionAttributeNames": {"#t": "token"},
            "ExpressionAttributeValues": {":before": registered_before, ":now": now},
            "ConsistentRead": True,
        }
        while True:
            page = self._table.scan(**kwargs)
            for item in page.get("Items", []):
                service, _, job_id = str(item["jobKey"]).partition("#")
                registered_at = int(item["registeredAt"])
                last_heartbeat = int(item.get("heartbeatAt", registered_at))
                deadline = last_heartbeat + int(item.get("heartbeatSeconds", 0))
                yield Waiting(service, job_id, str(item["token"]), registered_at, deadline, _kind(item))
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def put_token(self, key: str, token: str, waiter: Waiter, ttl_seconds: int) -> bool:
        """Store the token unless a live entry exists; return whether it was stored."""
        now = int(time.time())
        return self._put(_token_item(key, token, waiter, now, ttl_seconds), now)

    def replace_token(self, key: str, token: str, waiter: Waiter, ttl_seconds: int) -> bool:
        """Replace the token of a live entry registered by an earlier attempt of this same waiter (a retried
        registration that brought a new token); return whether it was replaced. Another waiter's entry, or a later
        attempt's (a slow earlier attempt arriving last), is never touched."""
        now = int(time.time())
        written = conditionally(
            lambda: self._table.put_item(
                Item=_token_item(key, token, waiter, now, ttl_seconds),
                ConditionExpression=(
                    "attribute_exists(#t) AND expiresAt > :now AND executionArn = :e AND stateName = :s"
                    " AND stateEnteredTime = :t AND attempt < :a"
                ),
                ExpressionAttributeNames={"#t": "token"},
                ExpressionAttributeValues={
                    ":now": now,
                    ":e": waiter.execution_arn,
                    ":s": waiter.state_name,
                    ":t": waiter.entered_time,
                    ":a": waiter.attempt,
                },
            )
        )
        return written is not None

    def record_heartbeat(self, key: str, token: str, sent_at: int) -> None:
        """Note that the entry's task got a heartbeat at `sent_at` (epoch seconds, taken before it was sent), so its
        deadline moves; only while the entry still holds this token."""
        conditionally(
            lambda: self._table.update_item(
                Key={"jobKey": key},
                UpdateExpression="SET heartbeatAt = :at",
                ConditionExpression="#t = :t",
                ExpressionAttributeNames={"#t": "token"},
                ExpressionAttributeValues={":at": sent_at, ":t": token},
            )
        )

    def put_outcome(self, key: str, outcome: Outcome, ttl_seconds: int) -> bool:
        """Record a completion that arrived before its token; return whether it was stored."""
        now = int(time.time())
        item = {
            "jobKey": key,
            "outcome": json.dumps(outcome.to_item()),
            "completedAt": now,
            "expiresAt": now + ttl_seconds,
        }
        return self._put(item, now)

    def _put(self, item: dict[str, Any], now: int) -> bool:
        written = conditionally(
            lambda: self._table.put_item(
                Item=item,
                ConditionExpression="attribute_not_exists(jobKey) OR expiresAt <= :now",
                ExpressionAttributeValues={":now": now},
            )
        )
        return written is not None

    def delete_token(self, key: str, token: str) -> None:
        """Delete the entry only while it still holds this token."""
        self._delete(key, "#t = :t", {"#t": "token"}, {":t": token})

    def delete_outcome(self, key: str) -> None:
        self._delete(key, "attribute_exists(outcome)", None, None)

    def _delete(self, key: str, condition: str, names: dict[str, str] | None, values: dict[str, Any] | None) -> None:
        kwargs: dict[str, Any] = {"Key": {"jobKey": key}, "ConditionExpression": condition}
        if names:
            kwargs["ExpressionAttributeNames"] = names
        if values:
            kwargs["ExpressionAttributeValues"] = values
        conditionally(lambda: self._table.delete_item(**kwargs))  # refused: the entry is another one by now


def _token_item(key: str, token: str, waiter: Waiter, now: int, ttl_seconds: int) -> dict[str, Any]:
    return {"jobKey": key, "token": token, **waiter.item(), "registeredAt": now, "expiresAt": now + ttl_seconds}


def _kind(item: dict[str, Any]) -> Kind:
    """What waits on a token item (one written before items carried their kind is a task's)."""
    return Kind(item.get("waiterKind", Kind.TASK_TOKEN))


def _outcome(stored: dict[str, Any]) -> Outcome:
    """A recorded outcome (one written before outcomes carried their error prefix takes its adapter's)."""
    if "errorPrefix" not in stored:
        stored = {**stored, "errorPrefix": adapter(stored["service"]).name}
    return Outcome.from_item(stored)
