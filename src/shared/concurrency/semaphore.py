"""The callback semaphore: N permits per named resource in DynamoDB, handed out in arrival order, with no polling.

Items of the permits table (partition key `resource`, sort key `entry`):
- `#`              the resource's head: `held`, how many permits are taken;
- `holder#<arn>`   a permit held by an execution (`executionArn`, `since`);
- `waiter#<arn>`   an execution waiting for a permit (`executionArn`, `taskToken`, `queuedAt`, its `limit`).
A local secondary index (`queue`, sort key `queuedAt`) holds only the waiters, oldest first; a global one
(`byExecution`) finds everything an execution holds or waits for, wherever it ended.

Every acquire queues its execution, then dispatches; every release frees, then dispatches. Dispatching hands free
permits to the oldest waiters, each hand-over one transaction (head `held < limit`, holder put, waiter deleted), so
the count never passes the limit however many dispatchers run at once, and a waiter queued while a permit was being
freed is always seen by one of them. A granted waiter is resumed with SendTaskSuccess; a waiter whose task is
already closed gives its permit back at once.

Acquire and release are idempotent per execution: an execution holds at most one permit of a resource, a retried
acquire keeps its place in the queue (with the retry's token), a release frees only the caller's own permit.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from botocore.exceptions import ClientError

from shared.aws import client, conditionally, error_code, is_running, table
from shared.observability import logger, token_ref
from shared.waits import TOLERATED_CALLBACK_ERRORS, send_heartbeat

HEAD = "#"
HOLDER, WAITER = "holder#", "waiter#"
QUEUE_INDEX, EXECUTION_INDEX = "queue", "byExecution"


class Grant(StrEnum):
    GRANTED = "GRANTED"
    FULL = "FULL"  # every permit is taken
    GONE = "GONE"  # the waiter was no longer there as read (another dispatcher granted it, or it was dropped)
    ALREADY_HELD = "ALREADY_HELD"  # the waiter's execution holds a permit already


class Acquired(StrEnum):
    HELD = "HELD"  # the execution already holds a permit: its task was resumed at once
    QUEUED = "QUEUED"  # waiting in line (it may have been granted by its own dispatch already)


@dataclass(frozen=True)
class Waiter:
    resource: str
    execution_arn: str
    token: str
    limit: int


@dataclass(frozen=True)
class Entry:
    """Something an execution holds or waits for: a permit (`waiting` False) or a place in a queue."""

    resource: str
    execution_arn: str
    waiting: bool


class Semaphore:
    def __init__(self, table_name: str, ttl_seconds: int) -> None:
        self._name = table_name
        self._table = table(table_name)
        self._ttl_seconds = ttl_seconds

    # --- the three operations -----------------------------------------------------------------------------------
    def acquire(self, resource: str, limit: int, execution_arn: str, token: str) -> Acquired:
        """Queue the execution for a permit of `resource` (at most `limit` held at once); its task is resumed when
        it gets one, at once if one is free and nobody queued earlier."""
        if (since := self._held_since(resource, execution_arn)) is not None:
            self._resume(Waiter(resource, execution_arn, token, limit), since)
            return Acquired.HELD
        now = time.time()
        self._table.update_item(  # a retried acquire keeps its place: queuedAt is set once
            Key={"resource": resource, "entry": WAITER + execution_arn},
            UpdateExpression=(
                "SET executionArn = :arn, taskToken = :token, #limit = :limit, expiresAt = :expires,"
                " queuedAt = if_not_exists(queuedAt, :now)"
            ),
            ExpressionAttributeNames={"#limit": "limit"},
            ExpressionAttributeValues={
                ":arn": execution_arn,
                ":token": token,
                ":limit": limit,
                ":expires": int(now) + self._ttl_seconds,
                ":now": _queued_at(now),
            },
        )
        logger.info("permit queued", extra={"resource": resource, "executionArn": execution_arn})
        self.dispatch(resource)
        return Acquired.QUEUED

    def release(self, resource: str, execution_arn: str) -> bool:
        """Give back this execution's permit, or its place in the queue (an acquire that timed out); then hand free
        permits to the waiters. False if it held and awaited nothing (a retried release)."""
        released = self._free(resource, execution_arn) or self._drop(resource, execution_arn)
        self.dispatch(resource)
        return released

    def forget(self, execution_arn: str) -> list[Entry]:
        """Everything an execution that ended still holds or waits for, released or dropped (its status change
        event; when that event is lost, the sweeper recovers the same, holder by holder and waiter by waiter)."""
        entries = list(self.entries_of(execution_arn))
        for entry in entries:
            self.release(entry.resource, entry.execution_arn)
        return entries

    def sweep(self) -> dict[str, int]:
        """Recover what lost events left behind: a holder no longer RUNNING gives its permit back (DescribeExecution
        tells); a waiter gets a heartbeat (its acquire task has HeartbeatSeconds), and leaves the queue if that is
        refused and its execution is no longer RUNNING (a refusal alone can be a waiter whose acquire call is still
        returning); then every resource is dispatched."""
        counts = {"released": 0, "heartbeats": 0, "closed": 0}
        resources: set[str] = set()
        for entry, token in list(self.participants()):
            resources.add(entry.resource)
            if token is None:  # a holder
                if not is_running(entry.execution_arn) and self._free(entry.resource, entry.execution_arn):
                    counts["released"] += 1
            elif send_heartbeat(token, entry.resource):
                counts["heartbeats"] += 1
            elif not is_running(entry.execution_arn) and self._drop(entry.resource, entry.execution_arn, token):
                counts["closed"] += 1
        for resource in sorted(resources):
            self.dispatch(resource)
        return counts

    # --- dispatch -------------------------------------------------------------------------------------------------
    def dispatch(self, resource: str) -> int:
        """Hand free permits to the oldest waiters, each resumed; return how many were granted."""
        granted = 0
        while (waiter := self._oldest_waiter(resource)) is not None:
            grant, since = self._grant(waiter)
            if grant is Grant.FULL:
                break
            if grant is Grant.ALREADY_HELD:  # a retried acquire raced its own grant: it holds, so it goes on
                held_since = self._held_since(resource, waiter.execution_arn)
                if self._drop(waiter.resource, waiter.execution_arn, waiter.token) and held_since is not None:
                    self._resume(waiter, held_since)
            elif grant is Grant.GRANTED:
                granted += 1
                if not self._resume(waiter, since):  # its task is closed (timed out, execution ended): give it back
                    self._free(resource, waiter.execution_arn)
            # Grant.GONE: another dispatcher got to this waiter first; look again
        return granted

    def _grant(self, waiter: Waiter) -> tuple[Grant, str]:
        """One transaction: count a permit taken (below the waiter's limit), record the holder, remove the waiter."""
        since = datetime.now(UTC).isoformat()  # taken after this waiter was read as the oldest: grants are in order
        try:
            client("dynamodb").transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self._name,
                            "Key": _wire_key(waiter.resource, HEAD, ""),
                            "UpdateExpression": "SET held = if_not_exists(held, :zero) + :one",
                            "ConditionExpression": "attribute_not_exists(held) OR held < :limit",
                            "ExpressionAttributeValues": {
                                ":zero": {"N": "0"},
                                ":one": {"N": "1"},
                                ":limit": {"N": str(waiter.limit)},
                            },
                        }
                    },
                    {
                        "Put": {
                            "TableName": self._name,
                            "Item": {
                                **_wire_key(waiter.resource, HOLDER, waiter.execution_arn),
                                "executionArn": {"S": waiter.execution_arn},
                                "since": {"S": since},
                            },
                            "ConditionExpression": "attribute_not_exists(#entry)",
                            "ExpressionAttributeNames": {"#entry": "entry"},
                        }
                    },
                    {
                        "Delete": {
                            "TableName": self._name,
                            "Key": _wire_key(waiter.resource, WAITER, waiter.execution_arn),
                            "ConditionExpression": "taskToken = :token",
                            "ExpressionAttributeValues": {":token": {"S": waiter.token}},
                        }
                    },
                ]
            )
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            head, holder, queued = _reasons(exc, 3)
            if "TransactionConflict" in (head, holder, queued) or "ThrottlingError" in (head, holder, queued):
                raise  # another transaction on these items, or a throttle: the invocation's retries take over
            if queued == "ConditionalCheckFailed":
                return Grant.GONE, since
            if holder == "ConditionalCheckFailed":
                return Grant.ALREADY_HELD, since
            if head == "ConditionalCheckFailed":
                return Grant.FULL, since
            raise
        logger.info(
            "permit granted", extra={"resource": waiter.resource, "executionArn": waiter.execution_arn, "since": since}
        )
        return Grant.GRANTED, since

    def _free(self, resource: str, execution_arn: str) -> bool:
        try:
            client("dynamodb").transact_write_items(
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": self._name,
                            "Key": _wire_key(resource, HOLDER, execution_arn),
                            "ConditionExpression": "attribute_exists(#entry)",
                            "ExpressionAttributeNames": {"#entry": "entry"},
                        }
                    },
                    {
                        "Update": {
                            "TableName": self._name,
                            "Key": _wire_key(resource, HEAD, ""),
                            "UpdateExpression": "SET held = held - :one",
                            "ConditionExpression": "held > :zero",
                            "ExpressionAttributeValues": {":zero": {"N": "0"}, ":one": {"N": "1"}},
                        }
                    },
                ]
            )
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException" and _reasons(exc, 2)[0] == "ConditionalCheckFailed":
                return False  # not (or no longer) a holder
            raise
        logger.info("permit released", extra={"resource": resource, "executionArn": execution_arn})
        return True

    def _drop(self, resource: str, execution_arn: str, token: str | None = None) -> bool:
        """Take a waiter out of the queue (only if it still waits with `token`, when given)."""
        condition: dict[str, Any] = {"ConditionExpression": "attribute_exists(#entry)"}
        condition["ExpressionAttributeNames"] = {"#entry": "entry"}
        if token is not None:
            condition["ConditionExpression"] += " AND taskToken = :token"
            condition["ExpressionAttributeValues"] = {":token": token}
        key = _key(resource, WAITER, execution_arn)
        return conditionally(lambda: self._table.delete_item(Key=key, **condition)) is not None

    def _resume(self, waiter: Waiter, granted_at: str) -> bool:
        """SendTaskSuccess to the waiter's task (the permit: resource, holder, when granted); False if that task is
        already closed."""
        output = {"resource": waiter.resource, "executionArn": waiter.execution_arn, "grantedAt": granted_at}
        try:
            client("stepfunctions").send_task_success(taskToken=waiter.token, output=json.dumps(output))
        except ClientError as exc:
            if error_code(exc) not in TOLERATED_CALLBACK_ERRORS:
                raise
            logger.info("permit waiter gone", extra={"resource": waiter.resource, "token": token_ref(waiter.token)})
            return False
        return True

    # --- reads ----------------------------------------------------------------------------------------------------
    def _held_since(self, resource: str, execution_arn: str) -> str | None:
        """When the execution was granted its permit of `resource`, or None if it holds none."""
        item = self._table.get_item(Key=_key(resource, HOLDER, execution_arn), ConsistentRead=True).get("Item")
        return str(item["since"]) if item else None

    def _oldest_waiter(self, resource: str) -> Waiter | None:
        page = self._table.query(
            IndexName=QUEUE_INDEX,
            KeyConditionExpression="#r = :r",
            ExpressionAttributeNames={"#r": "resource"},
            ExpressionAttributeValues={":r": resource},
            ConsistentRead=True,
            Limit=1,
        )
        for item in page.get("Items", []):
            return Waiter(resource, str(item["executionArn"]), str(item["taskToken"]), int(item["limit"]))
        return None

    def entries_of(self, execution_arn: str) -> Iterator[Entry]:
        kwargs: dict[str, Any] = {
            "IndexName": EXECUTION_INDEX,
            "KeyConditionExpression": "executionArn = :arn",
            "ExpressionAttributeValues": {":arn": execution_arn},
        }
        while True:
            page = self._table.query(**kwargs)
            for item in page.get("Items", []):
                yield Entry(str(item["resource"]), execution_arn, str(item["entry"]).startswith(WAITER))
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def participants(self) -> Iterator[tuple[Entry, str | None]]:
        """Every holder and waiter of every resource, with the waiter's token (a scan: the table holds only the
        executions in flight)."""
        kwargs: dict[str, Any] = {"FilterExpression": "attribute_exists(executionArn)", "ConsistentRead": True}
        while True:
            page = self._table.scan(**kwargs)
            for item in page.get("Items", []):
                waiting = str(item["entry"]).startswith(WAITER)
                entry = Entry(str(item["resource"]), str(item["executionArn"]), waiting)
                yield entry, str(item["taskToken"]) if waiting else None
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _reasons(exc: ClientError, count: int) -> list[str]:
    """The cancellation reason of each item of a cancelled transaction, in order ("None" where it held)."""
    codes = [str(r.get("Code", "None")) for r in exc.response.get("CancellationReasons", [])]
    return (codes + ["None"] * count)[:count]


def _queued_at(now: float) -> str:
    """The queue's sort key: arrival time to the microsecond, fixed width so strings sort as times."""
    return f"{int(now * 1_000_000):020d}"


def _key(resource: str, kind: str, execution_arn: str) -> dict[str, str]:
    return {"resource": resource, "entry": HEAD if kind == HEAD else kind + execution_arn}


def _wire_key(resource: str, kind: str, execution_arn: str) -> dict[str, dict[str, str]]:
    return {name: {"S": value} for name, value in _key(resource, kind, execution_arn).items()}
