"""The reconciler under pressure: a burst of lost completion events, more waiting jobs than a run can reach.

A run takes the waiting jobs nearest their heartbeat deadline first (the last heartbeat, or the registration, plus the
task's HeartbeatSeconds, which the registration stores), asks Translate for a page of up to 500 jobs per call instead
of one describe per job, paces each service's calls to its rate, and stops taking jobs before its invocation's time is
up, leaving the rest to the next run, which takes them first.

The reconcile function runs as Lambda calls it, against real waiting tasks on moto, its Reconciler paced on the tests'
ManualClock: each wait of its pacers moves the clock, and with it the waiting tasks' HeartbeatSeconds timers, so a
run too slow for a heartbeat window would let tasks time out as on AWS, without racing the wall clock. Translate
answers through botocore Stubber.
"""

from __future__ import annotations

import importlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from botocore.stub import ANY, Stubber

from localcloud.clock import ManualClock
from tests.unit.payloads import registration, translate_job
from tests.unit.support import EVENTS, Aws, ClientSpy, backdate_registration, invoke
from tests.unit.waiting import WaitingTask

SCHEDULE = json.loads((EVENTS / "reconcile_jobs.schedule.json").read_text())
LIST, DESCRIBE = "list_text_translation_jobs", "describe_text_translation_job"
LISTED = {"Filter": {"SubmittedAfterTime": ANY}, "MaxResults": 500}


@pytest.fixture
def paced(aws: Aws, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """`paced(workers=1)`: the reconcile function's Reconciler paces its calls and measures its time on the test's
    clock (each wait advances it), takes every registered job (no threshold) and gets the given options."""

    def install(**options: Any) -> None:
        reconcile = importlib.import_module("shared.callback.reconcile")
        service = importlib.import_module("shared.callback.service")

        def reconciler() -> Any:
            return reconcile.Reconciler(
                service.callbacks(), 0, clock=lambda: clock.now().timestamp(), sleep=clock.advance, **options
            )

        monkeypatch.setattr(importlib.import_module("handlers.reconcile_jobs"), "reconciler", reconciler)

    return install


def reconcile(clock: ManualClock) -> tuple[dict[str, int], float]:
    """One scheduled run of the reconcile function: what it answered, and how much clock time its pacing took."""
    started = clock.now()
    result = dict(invoke("reconcile_jobs", SCHEDULE))
    return result, (clock.now() - started).total_seconds()


def job_id(n: int) -> str:
    return f"{n:032x}"


def waiting_for(
    aws: Aws, waiting_task: Callable[..., WaitingTask], n: int, heartbeat_seconds: int | None, sfn_heartbeat: int
) -> WaitingTask:
    """A workflow waiting (HeartbeatSeconds `sfn_heartbeat`) for translation job `n`, registered with
    `heartbeat_seconds` (None: as a version before registrations carried it)."""
    task = waiting_task(heartbeat_seconds=sfn_heartbeat)
    extra = {} if heartbeat_seconds is None else {"heartbeatSeconds": heartbeat_seconds}
    assert invoke("register_token", registration("translate", job_id(n), task.token, **extra)) == {
        "status": "REGISTERED"
    }
    return task


def listing(jobs: dict[int, str]) -> dict[str, Any]:
    """ListTextTranslationJobs' answer: these jobs (number -> status), and one of another stack."""
    listed = {**{job_id(n): status for n, status in jobs.items()}, "f" * 32: "COMPLETED"}
    return {
        "TextTranslationJobPropertiesList": [
            translate_job(j, s)["TextTranslationJobProperties"] for j, s in listed.items()
        ]
    }


def described_one_by_one(monkeypatch: pytest.MonkeyPatch, calls_per_second: float) -> None:
    """Translate as a service that cannot list its jobs (each is described on its own), at this rate."""
    adapters = importlib.import_module("shared.callback.adapters")
    slow = replace(adapters.TRANSLATE, list_jobs=None, calls_per_second=calls_per_second)
    monkeypatch.setitem(adapters.ADAPTERS, "translate", slow)


# ----------------------------------------------------------------------------------------------------------------
# A burst of lost events
# ----------------------------------------------------------------------------------------------------------------
def test_a_burst_of_100_lost_events_is_recovered_within_a_6_second_heartbeat_window(
    aws: Aws,
    clock: ManualClock,
    waiting_task: Callable[..., WaitingTask],
    stubbed: Callable[[str], Stubber],
    paced: Callable[..., None],
) -> None:
    # Given 100 workflows waiting with HeartbeatSeconds 6 for translation jobs that have all finished, their events
    # lost (described one by one at Translate's 10 a second, the last would be asked 9.9 s later: about 40 would
    # time out)
    tasks = [waiting_for(aws, waiting_task, n, 6, sfn_heartbeat=6) for n in range(100)]
    clock.armed(100)  # every task's heartbeat timer runs on the clock the reconciler's pacing moves
    stubbed("translate").add_response(LIST, listing(dict.fromkeys(range(100), "COMPLETED")), LISTED)
    paced()

    # When the reconciler runs
    result, spent = reconcile(clock)

    # Then one ListTextTranslationJobs call answered for every job, the run spent less than a heartbeat window, and
    # every workflow ended as its job did: none timed out
    assert result["RESUMED"] == 100
    assert spent < 6
    assert [task.wait_until_closed()["status"] for task in tasks] == ["SUCCEEDED"] * 100
    stubbed("translate").assert_no_pending_responses()


# ----------------------------------------------------------------------------------------------------------------
# Nearest the heartbeat deadline first
# ----------------------------------------------------------------------------------------------------------------
def test_jobs_are_taken_nearest_their_heartbeat_deadline_first(
    aws: Aws,
    clock: ManualClock,
    waiting_task: Callable[..., WaitingTask],
    stubbed: Callable[[str], Stubber],
    sfn_spy: ClientSpy,
    paced: Callable[..., None],
) -> None:
    # Given four workflows waiting for running translation jobs, registered in this order:
    # 0 with HeartbeatSeconds 1800: its deadline in half an hour;
    # 1 by a version before registrations carried HeartbeatSeconds: its deadline unknown, taken as its registration;
    # 2 with HeartbeatSeconds 300: in five minutes;
    # 3 with HeartbeatSeconds 60, registered two hours ago but heartbeated just now: in a minute
    heartbeats = {0: 1800, 1: None, 2: 300, 3: 60}
    tasks = {n: waiting_for(aws, waiting_task, n, seconds, sfn_heartbeat=3600) for n, seconds in heartbeats.items()}
    backdate_registration(aws, f"translate#{job_id(3)}", 7200)
    aws.table.update_item(
        Key={"jobKey": f"translate#{job_id(3)}"},
        UpdateExpression="SET heartbeatAt = :now",
        ExpressionAttributeValues={":now": int(time.time())},
    )
    stubbed("translate").add_response(LIST, listing(dict.fromkeys(heartbeats, "IN_PROGRESS")), LISTED)
    paced(workers=1)  # one job at a time: the order taken is the order acted on

    # When the reconciler runs
    result, _ = reconcile(clock)

    # Then the tasks got their heartbeats nearest deadline first: the unknown one, then 1 minute, 5, 30
    assert result["HEARTBEAT"] == 4
    assert [call["taskToken"] for call in sfn_spy.calls_to("send_task_heartbeat")] == [
        tasks[n].token for n in (1, 3, 2, 0)
    ]


def test_a_run_stops_taking_jobs_before_its_time_is_up_and_the_next_run_takes_those_first(
    aws: Aws,
    clock: ManualClock,
    waiting_task: Callable[..., WaitingTask],
    stubbed: Callable[[str], Stubber],
    sfn_spy: ClientSpy,
    paced: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given 30 workflows waiting for running jobs (registered in a shuffled order, hours ago; HeartbeatSeconds 600,
    # 700, ... by job number), of a service described one job at a time at one call a second, and runs whose time
    # leaves 20.5 s to take jobs in (the invocation's 30 s, less the FINISH_SECONDS kept to finish the last one)
    order = list(range(30))
    random.Random(26).shuffle(order)
    tasks = {n: waiting_for(aws, waiting_task, n, 600 + 100 * n, sfn_heartbeat=3600) for n in order}
    for n in tasks:
        backdate_registration(aws, f"translate#{job_id(n)}", 10_000)
    described_one_by_one(monkeypatch, calls_per_second=1.0)
    monkeypatch.setattr(importlib.import_module("shared.callback.reconcile"), "FINISH_SECONDS", 30 - 20.5)
    paced(workers=1)
    for n in range(22):  # the 22 nearest deadlines, in that order (Stubber checks each call's job)
        stubbed("translate").add_response(DESCRIBE, translate_job(job_id(n), "IN_PROGRESS"), {"JobId": job_id(n)})

    # When the reconciler runs
    result, spent = reconcile(clock)

    # Then it took the 22 jobs nearest their deadline (a describe a second, the last one at 21 s), and left the 8
    # farthest to the next run, untouched
    assert (result["HEARTBEAT"], result["DEFERRED"]) == (22, 8)
    assert spent == pytest.approx(21)
    assert [call["taskToken"] for call in sfn_spy.calls_to("send_task_heartbeat")] == [
        tasks[n].token for n in range(22)
    ]
    assert all("heartbeatAt" not in (aws.item(f"translate#{job_id(n)}") or {}) for n in range(22, 30))

    # When the next run comes, with as much time
    for n in [*range(22, 30), *range(14)]:
        stubbed("translate").add_response(DESCRIBE, translate_job(job_id(n), "IN_PROGRESS"), {"JobId": job_id(n)})
    result, _ = reconcile(clock)

    # Then it takes the 8 it left first: the heartbeats of the others moved their deadlines on
    assert (result["HEARTBEAT"], result["DEFERRED"]) == (22, 8)
    second = [call["taskToken"] for call in sfn_spy.calls_to("send_task_heartbeat")][22:]
    assert second == [tasks[n].token for n in [*range(22, 30), *range(14)]]
    stubbed("translate").assert_no_pending_responses()


# ----------------------------------------------------------------------------------------------------------------
# Translate's listing
# ----------------------------------------------------------------------------------------------------------------
def test_translates_listing_answers_for_many_jobs_and_a_job_it_misses_is_described(
    aws: Aws,
    clock: ManualClock,
    waiting_task: Callable[..., WaitingTask],
    stubbed: Callable[[str], Stubber],
    sfn_spy: ClientSpy,
    paced: Callable[..., None],
) -> None:
    # Given three workflows waiting for translation jobs: 0 finished and 1 running, both in the listing's two pages,
    # and 2 finished but missing from the listing (submitted before the window it lists)
    tasks = [waiting_for(aws, waiting_task, n, 600, sfn_heartbeat=3600) for n in range(3)]
    first, second = listing({0: "COMPLETED"}), listing({1: "IN_PROGRESS"})
    stubbed("translate").add_response(LIST, {**first, "NextToken": "page-2"}, LISTED)
    stubbed("translate").add_response(LIST, second, {**LISTED, "NextToken": "page-2"})
    stubbed("translate").add_response(DESCRIBE, translate_job(job_id(2), "COMPLETED"), {"JobId": job_id(2)})
    paced()

    # When the reconciler runs
    result, spent = reconcile(clock)

    # Then the listed jobs were acted on from the listing (two calls, paced at 10 a second), the other one described
    assert (result["RESUMED"], result["HEARTBEAT"]) == (2, 1)
    assert spent == pytest.approx(0.1)
    assert tasks[0].wait_until_closed()["status"] == tasks[2].wait_until_closed()["status"] == "SUCCEEDED"
    assert sfn_spy.calls_to("send_task_heartbeat") == [{"taskToken": tasks[1].token}]
    stubbed("translate").assert_no_pending_responses()


def test_a_listing_that_fails_leaves_each_job_to_its_describe(
    aws: Aws,
    clock: ManualClock,
    waiting_task: Callable[..., WaitingTask],
    stubbed: Callable[[str], Stubber],
    paced: Callable[..., None],
) -> None:
    # Given two workflows waiting for finished translation jobs, and ListTextTranslationJobs throttled (or not
    # permitted)
    tasks = [waiting_for(aws, waiting_task, n, 600, sfn_heartbeat=3600) for n in range(2)]
    stubbed("translate").add_client_error(LIST, "ThrottlingException", "Rate exceeded", 400)
    for n in range(2):
        stubbed("translate").add_response(DESCRIBE, translate_job(job_id(n), "COMPLETED"), {"JobId": job_id(n)})
    paced()

    # When the reconciler runs
    result, _ = reconcile(clock)

    # Then each job was described on its own and resumed
    assert result["RESUMED"] == 2
    assert [task.wait_until_closed()["status"] for task in tasks] == ["SUCCEEDED"] * 2
    stubbed("translate").assert_no_pending_responses()
