"""Data access for the task status log: one DynamoDB table, append-only (no entry is ever updated or deleted), and
the S3 objects of results too large for an entry.

Partition `taskId`, sort `seq`, a time-ordered sequence: `<ISO-8601 UTC time>#<what wrote it>` for progress
entries, the time in the one form the workflows write from `$$.State.EnteredTime` and the handlers with `timestamp`
(milliseconds, none on a whole second: `...:06Z` sorts after `...:06.500Z` as text, so entries are read back in time
order, not in the keys' text order). Two keys are fixed so that one
conditional write makes them unique: the head (`0000-...#SUBMITTED`, before every time) records the owner, type
and input; the end (`9999-...#END`, after every time) records the terminal status. Every entry carries `status`,
`at`, `detail` and `expiresAt` (TTL). Reads are strongly consistent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from shared.aws import EXECUTION_ENDS, client, conditionally, table

HEAD_SEQ = "0000-00-00T00:00:00.000Z#SUBMITTED"
END_SEQ = "9999-12-31T23:59:59.999Z#END"
SUBMITTED = "SUBMITTED"
RUNNING = "RUNNING"
CANCELLED = "CANCELLED"
SUCCEEDED = "SUCCEEDED"
TERMINAL = EXECUTION_ENDS | {CANCELLED}


def timestamp(moment: datetime | None = None) -> str:
    """A time (now, by default) as Step Functions writes `$$.State.EnteredTime`: UTC to the millisecond with `Z`
    (`2026-01-15T10:31:47.123Z`), and no fraction at all on a whole second (`2026-01-15T10:31:47Z`, as Java's Instant
    prints it), so the log holds one form whoever wrote an entry (entries are read back in time order, `_in_time`)."""
    utc = (moment or datetime.now(UTC)).astimezone(UTC)
    millis = utc.microsecond // 1000
    return utc.replace(tzinfo=None).isoformat(timespec="seconds") + (f".{millis:03d}" if millis else "") + "Z"


@dataclass(frozen=True)
class Entry:
    seq: str
    status: str
    at: str
    detail: dict[str, Any] = field(default_factory=dict)
    expires_at: int = 0
    # the head only
    owner: str | None = None
    type: str | None = None
    input: Any = None
    request_hash: str | None = None
    execution_arn: str | None = None
    # the end only, when the task succeeded: the output inline, or where it is stored
    output: str | None = None
    output_location: str | None = None

    @property
    def terminal(self) -> bool:
        return self.seq == END_SEQ

    def item(self, task_id: str) -> dict[str, Any]:
        """The entry's DynamoDB item: the fields every entry has (the head and the end add their own). The workflows
        write their progress entries in this shape too (statemachines/documents.asl.json)."""
        return {
            "taskId": task_id,
            "seq": self.seq,
            "status": self.status,
            "at": self.at,
            "detail": self.detail,
            "expiresAt": self.expires_at,
        }

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Entry:
        return cls(
            seq=str(item["seq"]),
            status=str(item["status"]),
            at=str(item["at"]),
            detail={k: _plain(v) for k, v in dict(item.get("detail") or {}).items()},
            expires_at=int(item.get("expiresAt", 0)),
            owner=item.get("owner"),
            type=item.get("type"),
            input=json.loads(item["input"]) if "input" in item else None,
            request_hash=item.get("requestHash"),
            execution_arn=item.get("executionArn"),
            output=item.get("output"),
            output_location=item.get("outputLocation"),
        )


def _plain(value: Any) -> Any:
    """DynamoDB numbers come back as Decimal; details only hold small integers and text."""
    if hasattr(value, "as_integer_ratio") and not isinstance(value, bool | int | float):
        return int(value) if value == int(value) else float(value)
    return value


def _in_time(entry: Entry) -> tuple[int, datetime, str]:
    """An entry's place: the head first, the end last, the others by the time their key starts with. Not by the key's
    text: Step Functions writes `$$.State.EnteredTime` on a whole second without a fraction (`...:06Z`), which sorts
    after `...:06.500Z` as text."""
    if entry.seq in (HEAD_SEQ, END_SEQ):
        return (0 if entry.seq == HEAD_SEQ else 2), datetime.min.replace(tzinfo=UTC), entry.seq
    return 1, datetime.fromisoformat(entry.seq.partition("#")[0]), entry.seq


class StatusLog:
    def __init__(self, table_name: str) -> None:
        self._table = table(table_name)

    def entries(self, task_id: str) -> list[Entry]:
        """Every entry of the task, oldest first (head first, end last); empty if there is no such task."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "taskId = :id",
            "ExpressionAttributeValues": {":id": task_id},
            "ConsistentRead": True,
        }
        entries: list[Entry] = []
        while True:
            page = self._table.query(**kwargs)
            entries += [Entry.from_item(item) for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return sorted(entries, key=_in_time)
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def create(self, task_id: str, head: Entry) -> bool:
        """Write the head entry unless the task exists; return whether it was written."""
        item = head.item(task_id) | {
            "owner": head.owner,
            "type": head.type,
            "input": json.dumps(head.input, separators=(",", ":")),
            "requestHash": head.request_hash,
            "executionArn": head.execution_arn,
        }
        return self._put(item)

    def append(self, task_id: str, entry: Entry) -> bool:
        """Append a progress entry; an entry with the same key already there is kept (a retried write)."""
        return self._put(entry.item(task_id))

    def end(self, task_id: str, entry: Entry) -> bool:
        """Append the terminal entry unless the task already has one; return whether it was written."""
        item = entry.item(task_id)
        if entry.output is not None:
            item["output"] = entry.output
        if entry.output_location is not None:
            item["outputLocation"] = entry.output_location
        return self._put(item)

    def _put(self, item: dict[str, Any]) -> bool:
        return (
            conditionally(lambda: self._table.put_item(Item=item, ConditionExpression="attribute_not_exists(seq)"))
            is not None
        )


class ResultStore:
    """Outputs too large for a log entry, one S3 object per task."""

    def __init__(self, bucket: str) -> None:
        self.bucket = bucket

    def put(self, task_id: str, output: str) -> str:
        key = f"results/{task_id}.json"
        client("s3").put_object(Bucket=self.bucket, Key=key, Body=output.encode(), ContentType="application/json")
        return f"s3://{self.bucket}/{key}"

    def get(self, location: str) -> str:
        bucket, _, key = location.removeprefix("s3://").partition("/")
        return str(client("s3").get_object(Bucket=bucket, Key=key)["Body"].read().decode())
