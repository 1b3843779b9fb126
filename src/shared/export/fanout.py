"""The export's fan-out: each exported NDJSON object streamed onto the custom bus, one event per record, resumable.

Every non-blank line of a file ends up in exactly one of three places per run: published on the bus; quarantined
(not a publishable record: the line, its file and line number and the reason go to `runs/<run>/quarantine/` in the
export bucket); or undelivered (PutEvents kept refusing it: the entry and its ErrorCode go to
`runs/<run>/undelivered/`). After each group of at most 10 records the file's checkpoint (`FILE#<run>#<key>` in the
state table: lines done and the counts) moves forward with one conditional write, so a retried Map item resumes
after its last checkpoint instead of publishing the file again. Only a crash between a PutEvents call and its
checkpoint re-publishes, and then only that group (PutEvents has no idempotency key)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from shared.aws import client, conditionally, table
from shared.eventbus import MAX_BYTES_PER_CALL, MAX_ENTRIES_PER_CALL, deliver, entry_size
from shared.exceptions import CheckpointMovedError, UnpublishableRecordError
from shared.settings import ExportSettings

EXPORT_SOURCE = "callback-kit.export"
GROUP_LINES = 100  # at most this many lines between two checkpoints, so a run of bad lines still moves on
CHECKPOINT_TTL_SECONDS = 30 * 24 * 3600


@dataclass(frozen=True)
class FileProgress:
    """A file's checkpoint: `lines` read so far (blank ones included: where a retry resumes) and what became of the
    `records` (non-blank lines) among them."""

    lines: int = 0
    records: int = 0
    published: int = 0
    quarantined: int = 0
    undelivered: int = 0
    complete: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Group:
    """The lines between two checkpoints: the entries to put (with their line numbers) and the rejected lines."""

    first: int
    entries: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    records: int = 0


def run_prefix(run: str, kind: str) -> str:
    """Where a run keeps the lines it could not publish: kind is `quarantine` or `undelivered`."""
    return f"runs/{run}/{kind}/"


def entry_for(line: bytes, location: dict[str, Any], bus: str, detail_type: str) -> dict[str, Any]:
    """The PutEvents entry for one exported line (`location`: its bucket, key and line number); UnpublishableRecordError
    says why there is none. A record too large for one event (256 KB) is published as a reference to its line instead
    (`{resourceType, id, oversized: true, location}`), so consumers still get every record and can fetch the large
    ones."""
    try:
        record = json.loads(line)
    except ValueError as exc:  # also invalid UTF-8
        raise UnpublishableRecordError(f"not JSON: {exc}") from exc
    if not isinstance(record, dict):
        raise UnpublishableRecordError(f"not a JSON object but {type(record).__name__}")
    if not isinstance(record.get("resourceType"), str) or not record["resourceType"]:
        raise UnpublishableRecordError("no resourceType")
    entry = {
        "Source": EXPORT_SOURCE,
        "DetailType": detail_type,
        "Detail": json.dumps(record, separators=(",", ":")),
        "Resources": [],
        "EventBusName": bus,
    }
    if entry_size(entry) > MAX_BYTES_PER_CALL:
        reference = {"resourceType": record["resourceType"], "id": record.get("id"), "location": location}
        entry["Detail"] = json.dumps({**reference, "oversized": True}, separators=(",", ":"))
    return entry


class FileCheckpoints:
    """A run's per-file checkpoints in the export state table."""

    def __init__(self, table_name: str, run: str) -> None:
        self._table = table(table_name)
        self._run = run

    def _key(self, key: str) -> dict[str, str]:
        return {"pk": f"FILE#{self._run}#{key}"}

    def load(self, key: str) -> FileProgress | None:
        """The file's checkpoint, or None if nothing of it was published in this run yet."""
        item = self._table.get_item(Key=self._key(key), ConsistentRead=True).get("Item")
        if item is None:
            return None
        counts = {name: int(item[name]) for name in ("lines", "records", "published", "quarantined", "undelivered")}
        return FileProgress(**counts, complete=bool(item["complete"]))

    def advance(self, key: str, before: FileProgress, after: FileProgress) -> None:
        """Move the checkpoint from `before` to `after`; CheckpointMovedError if it is no longer at `before`."""
        condition = "#lines = :before" if before.lines else "attribute_not_exists(#lines) OR #lines = :before"
        values = {f":{name}": value for name, value in after.as_dict().items()}
        written = conditionally(
            lambda: self._table.update_item(
                Key=self._key(key),
                UpdateExpression="SET #lines = :lines, records = :records, published = :published, "
                "quarantined = :quarantined, undelivered = :undelivered, complete = :complete, expiresAt = :expires",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#lines": "lines"},
                ExpressionAttributeValues={
                    **values,
                    ":before": before.lines,
                    ":expires": int(time.time()) + CHECKPOINT_TTL_SECONDS,
                },
            )
        )
        if written is None:
            raise CheckpointMovedError(f"checkpoint of {key} moved past line {before.lines} in run {self._run}")


def publish_records(settings: ExportSettings, run: str, bucket: str, key: str) -> FileProgress:
    """Publish one NDJSON object's records for run `run`, resuming after the file's checkpoint; return its final
    progress (the whole file's counts, also when some lines were published by an earlier attempt)."""
    checkpoints = FileCheckpoints(settings.table_name, run)
    progress = checkpoints.load(key) or FileProgress()
    if progress.complete:
        return progress
    body = client("s3").get_object(Bucket=bucket, Key=key)["Body"]
    group = _Group(first=progress.lines + 1)
    number = progress.lines
    for number, line in enumerate(body.iter_lines(), start=1):
        if number <= progress.lines:
            continue
        if line.strip():
            group.records += 1
            location = {"bucket": bucket, "key": key, "line": number}
            try:
                group.entries.append((number, entry_for(line, location, settings.bus, settings.detail_type)))
            except UnpublishableRecordError as exc:
                group.rejected.append({**location, "reason": str(exc), "content": line.decode(errors="replace")})
        if len(group.entries) == MAX_ENTRIES_PER_CALL or number - group.first + 1 >= GROUP_LINES:
            progress = _settle(settings, checkpoints, run, bucket, key, group, progress, number, complete=False)
            group = _Group(first=number + 1)
    return _settle(settings, checkpoints, run, bucket, key, group, progress, max(number, progress.lines), complete=True)


def _settle(
    settings: ExportSettings,
    checkpoints: FileCheckpoints,
    run: str,
    bucket: str,
    key: str,
    group: _Group,
    progress: FileProgress,
    last: int,
    *,
    complete: bool,
) -> FileProgress:
    """Put the group's entries, keep what could not be published, then move the checkpoint past line `last`."""
    line_of = {id(entry): number for number, entry in group.entries}
    refused = deliver([entry for _, entry in group.entries]) if group.entries else []
    undelivered = [
        {"bucket": bucket, "key": key, "line": line_of[id(entry)], "errorCode": code, "entry": entry}
        for entry, code in refused
    ]
    _keep(settings.bucket, f"{run_prefix(run, 'quarantine')}{key}/{group.first}-{last}.ndjson", group.rejected)
    _keep(settings.bucket, f"{run_prefix(run, 'undelivered')}{key}/{group.first}-{last}.ndjson", undelivered)
    after = replace(
        progress,
        lines=last,
        records=progress.records + group.records,
        published=progress.published + len(group.entries) - len(refused),
        quarantined=progress.quarantined + len(group.rejected),
        undelivered=progress.undelivered + len(refused),
        complete=complete,
    )
    checkpoints.advance(key, progress, after)
    return after


def _keep(bucket: str, key: str, lines: list[dict[str, Any]]) -> None:
    """Write lines that were not published to S3 (a retried group overwrites its own object, never duplicates)."""
    if lines:
        body = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
        client("s3").put_object(Bucket=bucket, Key=key, Body=body.encode(), ContentType="application/x-ndjson")


def tally_run(settings: ExportSettings, run: str, manifest_key: str) -> dict[str, Any]:
    """What became of the run's records, from the checkpoints of the files in its manifest. A file without a complete
    checkpoint is counted as unfinished (its records are unknown); the workflow checks that every record is
    accounted for."""
    files = json.loads(client("s3").get_object(Bucket=settings.bucket, Key=manifest_key)["Body"].read())
    checkpoints = FileCheckpoints(settings.table_name, run)
    totals = FileProgress(complete=True)
    unfinished = 0
    for file in files:
        progress = checkpoints.load(file["key"])
        if progress is None or not progress.complete:
            unfinished += 1
            continue
        totals = replace(
            totals,
            records=totals.records + progress.records,
            published=totals.published + progress.published,
            quarantined=totals.quarantined + progress.quarantined,
            undelivered=totals.undelivered + progress.undelivered,
        )
    errors = totals.quarantined + totals.undelivered
    return {
        "status": "COMPLETED_WITH_ERRORS" if errors else "COMPLETED",
        "files": len(files),
        "filesUnfinished": unfinished,
        "records": totals.records,
        "published": totals.published,
        "quarantined": totals.quarantined,
        "undelivered": totals.undelivered,
        "accounted": totals.published + errors,
        "quarantineLocation": f"s3://{settings.bucket}/{run_prefix(run, 'quarantine')}",
        "undeliveredLocation": f"s3://{settings.bucket}/{run_prefix(run, 'undelivered')}",
    }
