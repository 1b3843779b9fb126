"""PutEvents done properly: at most 10 entries and 256 KB per call, refused entries retried, nothing dropped
(what is still refused is raised, or handed back to the caller to keep)."""

from __future__ import annotations

import random
import time
from typing import Any

from shared.aws import client
from shared.exceptions import EventsNotDeliveredError
from shared.observability import logger

MAX_ENTRIES_PER_CALL = 10
MAX_BYTES_PER_CALL = 256 * 1024
ATTEMPTS = 5


def entry_size(entry: dict[str, Any]) -> int:
    """PutEvents entry size as EventBridge counts it (the fields' UTF-8 bytes, 14 for Time)."""
    fields = [
        entry.get("Source", ""),
        entry.get("DetailType", ""),
        entry.get("Detail", ""),
        *entry.get("Resources", []),
    ]
    return 14 + sum(len(str(f).encode()) for f in fields)


def batches(entries: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split entries into PutEvents calls within both limits, keeping their order."""
    calls: list[list[dict[str, Any]]] = []
    size = 0
    for entry in entries:
        if not calls or len(calls[-1]) == MAX_ENTRIES_PER_CALL or size + entry_size(entry) > MAX_BYTES_PER_CALL:
            calls.append([])
            size = 0
        calls[-1].append(entry)
        size += entry_size(entry)
    return calls


def deliver(entries: list[dict[str, Any]], base_delay_seconds: float = 0.1) -> list[tuple[dict[str, Any], str]]:
    """Put every entry; retry only the ones PutEvents refuses (per-entry ErrorCode) with jittered backoff, at most
    ATTEMPTS rounds. Returns the entries still refused, each with its last ErrorCode (empty: all were put)."""
    pending = entries
    for attempt in range(ATTEMPTS):
        refused: list[tuple[dict[str, Any], str]] = []
        for batch in batches(pending):
            response = client("events").put_events(Entries=batch)
            if response["FailedEntryCount"]:
                for entry, result in zip(batch, response["Entries"], strict=True):
                    if result.get("ErrorCode"):
                        refused.append((entry, str(result["ErrorCode"])))
        if not refused:
            return []
        errors = sorted({code for _, code in refused})
        logger.warning("PutEvents refused entries", extra={"refused": len(refused), "errors": errors})
        pending = [entry for entry, _ in refused]
        if attempt + 1 < ATTEMPTS:
            time.sleep(base_delay_seconds * 2**attempt * random.uniform(0.5, 1.5))
    return refused


def put_events(entries: list[dict[str, Any]], base_delay_seconds: float = 0.1) -> int:
    """Put every entry (see `deliver`); returns how many were put.

    Raises EventsNotDeliveredError if some are still refused after ATTEMPTS rounds, so that the caller's own retry
    and dead-letter path takes over. Consumers must tolerate duplicates anyway (EventBridge delivers at least once),
    so re-putting a batch after a failed invocation is safe.
    """
    refused = deliver(entries, base_delay_seconds)
    if refused:
        raise EventsNotDeliveredError(f"{len(refused)} of {len(entries)} events refused after {ATTEMPTS} attempts")
    return len(entries)
