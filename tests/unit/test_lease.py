"""The lease that keeps a scheduled function to one run at a time (src/shared/lease.py), on template.yaml's LeaseTable
on moto: taken by one conditional write while free or expired, given back only by its holder, and each of the three
scheduled functions that hold one doing nothing while another run holds it.

Times are handed to the lease (its `now`), never waited for. Modules of src/ are imported inside the tests (see
support.check_observability).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.unit.support import EVENTS, REGION, Aws, invoke

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
NAME = "test-lease"


@dataclass(frozen=True)
class Invocation:
    """The two things a lease reads from Lambda's context object."""

    aws_request_id: str
    remaining_ms: int = 60_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def leases(aws: Aws) -> Iterator[Any]:
    """The deployed lease table (emptied after the test)."""
    leases = boto3.resource("dynamodb", region_name=REGION).Table(aws.environment["LEASE_TABLE"])
    try:
        yield leases
    finally:
        for item in leases.scan(ConsistentRead=True)["Items"]:
            leases.delete_item(Key={"pk": item["pk"]})


def lease(aws: Aws, at: float = T0, name: str = NAME) -> Any:
    """The lease `name` as a run sees it at the time `at`."""
    return importlib.import_module("shared.lease").Lease(aws.environment["LEASE_TABLE"], name, now=lambda: at)


def item(leases: Any, name: str = NAME) -> dict[str, Any] | None:
    found = leases.get_item(Key={"pk": name}, ConsistentRead=True).get("Item")
    return None if found is None else dict(found)


def hold(leases: Any, name: str, holder: str = "another-run", expires_at: float = 4_102_444_800) -> dict[str, Any]:
    """The lease as another run left it (until 2100 unless told)."""
    held = {"pk": name, "holder": holder, "expiresAt": int(expires_at), "takenAt": int(T0)}
    leases.put_item(Item=held)
    return held


# ----------------------------------------------------------------------------------------------------------------
# Lease: take and release
# ----------------------------------------------------------------------------------------------------------------
def test_a_free_lease_is_taken_until_the_holders_deadline_and_released(aws: Aws, leases: Any) -> None:
    # When a run takes the free lease for its remaining 60 seconds
    assert lease(aws).take("run-1", 60) is True

    # Then one item names it as the holder until then (expiresAt, epoch seconds: also the table's TTL)
    assert item(leases) == {"pk": NAME, "holder": "run-1", "expiresAt": int(T0) + 60, "takenAt": int(T0)}
    # And when it gives the lease back, the item is gone
    assert lease(aws, T0 + 5).release("run-1") is True
    assert item(leases) is None


def test_a_second_run_is_refused_while_the_lease_is_held(aws: Aws, leases: Any) -> None:
    # Given a run holding the lease for 60 seconds
    assert lease(aws).take("run-1", 60)

    # When another run asks for it during those 60 seconds, up to their very end
    refused = [lease(aws, T0 + after).take("run-2", 60) for after in (0, 30, 60)]

    # Then it is refused each time, and the lease is still the first run's, unchanged
    assert refused == [False, False, False]
    assert item(leases) == {"pk": NAME, "holder": "run-1", "expiresAt": int(T0) + 60, "takenAt": int(T0)}


def test_an_expired_lease_is_taken_over(aws: Aws, leases: Any) -> None:
    # Given a run that took the lease for 60 seconds and crashed without giving it back
    assert lease(aws).take("crashed-run", 60)

    # When the next run asks after the crashed run's deadline
    taken = lease(aws, T0 + 61).take("run-2", 300)

    # Then it holds the lease, for its own time
    assert taken is True
    assert item(leases) == {"pk": NAME, "holder": "run-2", "expiresAt": int(T0) + 361, "takenAt": int(T0) + 61}


def test_a_release_by_a_run_that_does_not_hold_the_lease_changes_nothing(aws: Aws, leases: Any) -> None:
    # Given run-2 holding the lease it took over from run-1 (which outlived its lease)
    assert lease(aws).take("run-1", 60)
    assert lease(aws, T0 + 61).take("run-2", 60)
    before = item(leases)

    # When run-1, and a run that never held it, give it back
    released = [lease(aws, T0 + 62).release(holder) for holder in ("run-1", "never-held")]

    # Then neither released anything: run-2 still holds it
    assert released == [False, False]
    assert item(leases) == before
    # And giving back a lease nobody holds releases nothing either
    assert lease(aws, name="free-lease").release("run-1") is False


def test_a_retried_invocation_takes_back_its_own_lease(aws: Aws, leases: Any) -> None:
    # Given an invocation that died holding the lease (Lambda retries it under the same request id)
    assert lease(aws).take("request-1", 60)

    # When its retry asks before the lease expired, then it gets it (for its own new time)
    assert lease(aws, T0 + 10).take("request-1", 60) is True
    assert item(leases) == {"pk": NAME, "holder": "request-1", "expiresAt": int(T0) + 70, "takenAt": int(T0) + 10}


def test_leases_of_different_names_are_independent(aws: Aws, leases: Any) -> None:
    assert lease(aws, name="reconcile-jobs").take("run-1", 60)
    assert lease(aws, name="sweep-permits").take("run-2", 60)
    assert {i["pk"]: i["holder"] for i in leases.scan(ConsistentRead=True)["Items"]} == {
        "reconcile-jobs": "run-1",
        "sweep-permits": "run-2",
    }


# ----------------------------------------------------------------------------------------------------------------
# single_flight: what the handlers use
# ----------------------------------------------------------------------------------------------------------------
def test_single_flight_holds_the_lease_for_the_block_and_gives_it_back(aws: Aws, leases: Any) -> None:
    single_flight = importlib.import_module("shared.lease").single_flight

    # When an invocation with 45 s left enters the block
    with single_flight(NAME, Invocation("request-1", remaining_ms=45_000)) as held:
        # Then it holds the lease for those 45 s at most
        assert held is True
        during = item(leases)
        assert during is not None and during["holder"] == "request-1"
        assert during["expiresAt"] - during["takenAt"] in {45, 46}  # rounded up
    # And the lease is free once the block is left
    assert item(leases) is None


def test_single_flight_skips_while_another_run_holds_the_lease(aws: Aws, leases: Any) -> None:
    single_flight = importlib.import_module("shared.lease").single_flight
    # Given another run holding the lease
    held_by_other = hold(leases, NAME)

    # When an invocation enters the block, then it is told it does not hold the lease
    with single_flight(NAME, Invocation("request-2")) as held:
        assert held is False

    # And the other run's lease is left as it was
    assert item(leases) == held_by_other


def test_single_flight_gives_the_lease_back_when_the_work_fails(aws: Aws, leases: Any) -> None:
    single_flight = importlib.import_module("shared.lease").single_flight

    # When the work inside the block raises
    with pytest.raises(RuntimeError, match="the work failed"), single_flight(NAME, Invocation("request-1")) as held:
        assert held
        raise RuntimeError("the work failed")

    # Then its error is what the caller sees, and the lease is free for the next run
    assert item(leases) is None


def test_a_lease_that_cannot_be_given_back_does_not_fail_the_run(
    aws: Aws, leases: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared_lease = importlib.import_module("shared.lease")

    def unavailable(self: Any, holder: str) -> bool:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "try again"}}, "DeleteItem")

    # Given the lease table failing the release
    monkeypatch.setattr(shared_lease.Lease, "release", unavailable)

    # When a run's work succeeds, then its result stands (the lease runs out at its deadline)
    with shared_lease.single_flight(NAME, Invocation("request-1", remaining_ms=30_000)) as held:
        result = "done" if held else "skipped"
    assert result == "done"
    remaining = item(leases)
    assert remaining is not None and remaining["holder"] == "request-1"


# ----------------------------------------------------------------------------------------------------------------
# The scheduled functions
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scheduled:
    module: str  # handlers.<module>
    lease: str
    work: tuple[str, str]  # where the handler's work lives: (module, attribute path)


SCHEDULED = [
    Scheduled("reconcile_jobs", "reconcile-jobs", ("shared.callback.reconcile", "Reconciler.run")),
    Scheduled("start_admitted", "start-admitted", ("handlers.start_admitted", "admit")),
    Scheduled("sweep_permits", "sweep-permits", ("shared.concurrency.semaphore", "Semaphore.sweep")),
]


def watch_work(scheduled: Scheduled, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record each call of the handler's work (which still runs)."""
    module_name, path = scheduled.work
    owner: Any = importlib.import_module(module_name)
    *parents, attribute = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    real: Callable[..., Any] = getattr(owner, attribute)
    calls: list[Any] = []

    def watched(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, attribute, watched)
    return calls


@pytest.mark.parametrize("scheduled", SCHEDULED, ids=lambda s: s.module)
def test_a_scheduled_run_does_nothing_while_another_holds_its_lease(
    scheduled: Scheduled, aws: Aws, leases: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    schedule = json.loads((EVENTS / f"{scheduled.module}.schedule.json").read_text())
    work = watch_work(scheduled, monkeypatch)
    # Given another run of the function holding its lease
    held_by_other = hold(leases, scheduled.lease)

    # When the schedule invokes the function
    result = invoke(scheduled.module, schedule)

    # Then it reports that it skipped, did none of its work, and left the other run's lease alone
    assert result == {"skipped": True}
    assert work == []
    assert item(leases, scheduled.lease) == held_by_other

    # And once the other run has given the lease back, the next tick does the work, and frees the lease after it
    leases.delete_item(Key={"pk": scheduled.lease})
    result = invoke(scheduled.module, schedule)
    assert "skipped" not in result
    assert len(work) == 1
    assert item(leases, scheduled.lease) is None


@pytest.mark.parametrize("scheduled", SCHEDULED, ids=lambda s: s.module)
def test_a_scheduled_run_takes_over_the_lease_of_a_run_that_died(
    scheduled: Scheduled, aws: Aws, leases: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    schedule = json.loads((EVENTS / f"{scheduled.module}.schedule.json").read_text())
    work = watch_work(scheduled, monkeypatch)
    # Given a run that died holding the lease, whose deadline has passed
    hold(leases, scheduled.lease, holder="dead-run", expires_at=T0)

    # When the schedule invokes the function, then it does its work, and frees the lease after it
    assert "skipped" not in invoke(scheduled.module, schedule)
    assert len(work) == 1
    assert item(leases, scheduled.lease) is None
