"""PutEvents done properly: at most 10 entries and 256 KB per call, refused entries and throttled calls retried, nothing
dropped (what is still refused is raised, or handed back to the caller to keep).

The retry budget: at most ATTEMPTS rounds (5). A round puts every entry still pending; between rounds the publisher
sleeps `base_delay_seconds` (0.1 s) x 2^round x a jitter in [0.5, 1.5], at most 2.3 s in all. An entry PutEvents
refuses (its per-entry ErrorCode) and a call EventBridge throttles as a whole (ThrottlingException and the other
transient errors of shared.aws, raised once the SDK's own retries inside the call are spent) are both put again in
the next round. When the rounds are spent, entries still refused are returned with their ErrorCode, and a call still
throttled raises EventBusThrottledError (a TransientAwsError: the caller's retry takes over later, as for any
throttled call).
"""

from __future__ import annotations

import random
import time
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from shared.aws import client, is_transient
from shared.exceptions import EventBusThrottledError, EventsNotDeliveredError
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
    """Put every entry; retry the ones PutEvents refuses (per-entry ErrorCode) and the calls it throttles as a whole,
    with jittered backoff, within the module's budget (ATTEMPTS rounds). Returns the entries still refused, each with
    its last ErrorCode (empty: all were put); raises EventBusThrottledError if a call is still throttled."""
    pending = entries
    for attempt in range(ATTEMPTS):
        refused: list[tuple[dict[str, Any], str]] = []
        throttled: list[dict[str, Any]] = []
        error: BotoCoreError | ClientError | None = None
        for batch in batches(pending):
            try:
                response = client("events").put_events(Entries=batch)
            except (BotoCoreError, ClientError) as exc:
                if not is_transient(exc):
                    raise
                throttled.extend(batch)
                error = exc
                continue
            if response["FailedEntryCount"]:
                for entry, result in zip(batch, response["Entries"], strict=True):
                    if result.get("ErrorCode"):
                        refused.append((entry, str(result["ErrorCode"])))
        if not refused and not throttled:
            return []
        errors = sorted({code for _, code in refused})
        logger.warning(
            "PutEvents refused entries or was throttled",
            extra={"refused": len(refused), "errors": errors, "throttled": len(throttled), "call": str(error or "")},
        )
        pending = [entry for entry, _ in refused] + throttled
        if attempt + 1 < ATTEMPTS:
            time.sleep(base_delay_seconds * 2**attempt * random.uniform(0.5, 1.5))
    if error is not None:
        raise EventBusThrottledError(
            f"PutEvents of {len(throttled)} of {len(entries)} events still failed after {ATTEMPTS} rounds: {error}"
        ) from error
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
