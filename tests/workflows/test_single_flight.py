"""One reconciler run at a time on the offline cloud, by its lease (src/shared/lease.py), not by reserved concurrency:
runs invoked while another is inside its work report that they skipped and do nothing, and the run after it ends
does the work.

The reconciler's own schedule is paused for the test (and anything it had fired has finished), so every run is one of
the test's. The run that takes the lease is held inside its work: its scan of the token table waits until the test
lets it go, so the overlap does not depend on how long a pass takes. Every wait is for a positive signal (the held
scan entered, the other runs' answers); the deadlines only bound a failure.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
from moto.dynamodb.models import DynamoDBBackend

from localcloud.cloud import LocalCloud

FUNCTION = "ReconcileJobsFunction"
LEASE = "reconcile-jobs"  # the lease its handler takes
OVERLAPPING = 4  # runs invoked while the first is inside its work
WAIT_S = 120.0  # bounds a failure only (cold starts of five environments on a busy machine take seconds)
COUNTS = {"RESUMED", "HEARTBEAT", "CLOSED", "UNCONFIRMED", "DEFERRED"}  # what a run that did the work answers


def physical_id(cloud: LocalCloud, logical_id: str) -> str:
    return next(r.physical_id for r in cloud.stack.resources if r.logical_id == logical_id)


@dataclass
class HeldScan:
    """The first scan of the token table while armed waits inside moto until `release()`; every scan is counted."""

    table: str
    entered: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    scans: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def enter(self, table_name: str) -> None:
        if table_name != self.table:
            return
        with self._lock:
            self.scans += 1
            first = not self.entered.is_set()
            self.entered.set()
        if first:
            assert self.released.wait(WAIT_S), "the held scan was never released"

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def paused_schedule(cloud: LocalCloud) -> Iterator[None]:
    """The reconciler's schedule disabled, and what it fired before finished (the scheduler fires under the rule's
    lock, so every earlier invocation is already queued when DisableRule returns)."""
    events = cloud.client("events")
    rule = next(r.physical_id for r in cloud.stack.of_type("AWS::Events::Rule") if r.logical_id.startswith(FUNCTION))
    events.disable_rule(Name=rule)
    try:
        cloud.runtime.drain(timeout=WAIT_S)
        yield
    finally:
        events.enable_rule(Name=rule)


@pytest.fixture
def held_scan(cloud: LocalCloud, monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldScan]:
    held = HeldScan(physical_id(cloud, "TokenTable"))
    scan = DynamoDBBackend.scan  # localcloud's (under the backend's lock): the hold is outside the lock

    def held_then_scan(self: DynamoDBBackend, *args: Any, **kwargs: Any) -> Any:
        held.enter(kwargs.get("table_name", args[0] if args else ""))
        return scan(self, *args, **kwargs)

    monkeypatch.setattr(DynamoDBBackend, "scan", held_then_scan)
    try:
        yield held
    finally:
        held.release()  # a failed test leaves no run waiting


def lease_item(cloud: LocalCloud) -> dict[str, Any] | None:
    found = cloud.client("dynamodb").get_item(
        TableName=physical_id(cloud, "LeaseTable"), Key={"pk": {"S": LEASE}}, ConsistentRead=True
    )
    item = found.get("Item")
    return None if item is None else dict(item)


def reconcile(cloud: LocalCloud) -> dict[str, Any]:
    """One synchronous invocation of the reconciler, as its schedule would make it; its answer."""
    response, failed = cloud.invoke_function(FUNCTION, {"source": "aws.events", "detail-type": "Scheduled Event"})
    assert not failed, response
    return dict(response)


def test_overlapping_reconciler_runs_are_single_flight(
    cloud: LocalCloud, paused_schedule: None, held_scan: HeldScan
) -> None:
    # Given no run of the reconciler going on (its schedule paused, and its lease free)
    assert lease_item(cloud) is None
    with ThreadPoolExecutor(max_workers=1 + OVERLAPPING) as pool:
        # When a run is inside its work (held in its scan of the token table)
        first = pool.submit(reconcile, cloud)
        assert held_scan.entered.wait(WAIT_S), "the first run never reached its work"
        # And four more runs are invoked at once meanwhile
        start = threading.Barrier(OVERLAPPING)

        def overlapping() -> dict[str, Any]:
            start.wait(WAIT_S)
            return reconcile(cloud)

        others = [pool.submit(overlapping) for _ in range(OVERLAPPING)]
        answers = [other.result(timeout=WAIT_S) for other in others]

        # Then each of them reported that it skipped, none reached the work, and the first run still holds the lease
        assert answers == [{"skipped": True}] * OVERLAPPING
        assert held_scan.scans == 1
        assert first.running()
        holder = lease_item(cloud)
        assert holder is not None and int(holder["expiresAt"]["N"]) > int(holder["takenAt"]["N"])

        # When the first run's work goes on, then it did the work, and gave the lease back when it ended
        held_scan.release()
        done = first.result(timeout=WAIT_S)
    assert set(done) == COUNTS
    assert lease_item(cloud) is None

    # And the next run does the work
    assert set(reconcile(cloud)) == COUNTS
    assert held_scan.scans == 2
