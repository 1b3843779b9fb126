"""The export's fan-out: each exported NDJSON object streamed onto the custom bus, one event per record."""

from __future__ import annotations

import json
from typing import Any

from shared.aws import client
from shared.eventbus import MAX_BYTES_PER_CALL, entry_size, put_events

EXPORT_SOURCE = "callback-kit.export"
PUBLISH_CHUNK = 100  # records read ahead of each PutEvents round (memory stays flat whatever the file size)


def publish_records(bucket: str, key: str, bus: str, detail_type: str) -> int:
    """Stream one NDJSON object and put each record on the bus; return how many were published.

    A record too large for one event (256 KB) is published as a reference to its line in the object instead, so
    consumers still get every record and can fetch the large ones."""
    body = client("s3").get_object(Bucket=bucket, Key=key)["Body"]
    published = 0
    chunk: list[dict[str, Any]] = []
    for number, line in enumerate(body.iter_lines(), start=1):
        if not line.strip():
            continue
        record = json.loads(line)
        entry = {
            "Source": EXPORT_SOURCE,
            "DetailType": detail_type,
            "Detail": json.dumps(record, separators=(",", ":")),
            "Resources": [],
            "EventBusName": bus,
        }
        if entry_size(entry) > MAX_BYTES_PER_CALL:
            location = {"bucket": bucket, "key": key, "line": number}
            reference = {"resourceType": record.get("resourceType"), "id": record.get("id"), "location": location}
            entry["Detail"] = json.dumps({**reference, "oversized": True}, separators=(",", ":"))
        chunk.append(entry)
        if len(chunk) == PUBLISH_CHUNK:
            published += put_events(chunk)
            chunk = []
    if chunk:
        published += put_events(chunk)
    return published
