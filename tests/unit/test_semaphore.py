"""The callback semaphore (acquire_permit, release_permit, sweep_permits) against real waiting tasks: a task resumed
is a permit granted, a task still RUNNING is a waiter."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from boto3.dynamodb.conditions import Key
from pydantic import ValidationError

from localcloud.clock import ManualClock
from tests.unit.faults import fail
from tests.unit.support import EVENTS, REGION, Aws, Deployed, invoke
from tests.unit.waiting import WaitingTask, wait_until

RESOURCE = "partner-api"


@pytest.fixture
def permits(aws: Aws, stack: Deployed) -> Any:
    """The permit table, emptied after the test."""
    table = boto3.resource("dynamodb", region_name=REGION).Table(stack.physical_id("PermitTable"))
    yield table
    for item in table.scan(ConsistentRead=True)["Items"]:
        table.delete_item(Key={"resource": item["resource"], "entry": item["entry"]})


def acquire(task: WaitingTask, limit: int, resource: str = RESOURCE, token: str | None = None) -> Any:
    event = {"resource": resource, "limit": limit, "executionArn": task.execution_arn, "taskToken": token or task.token}
    return invoke("acquire_permit", event)


def release(task: WaitingTask, resource: str = RESOURCE) -> Any:
    return invoke("release_permit", {"resource": resource, "executionArn": task.execution_arn})


def granted(task: WaitingTask) -> bool:
    """Whether the task was resumed with its permit (the execution then ends SUCCEEDED with the permit as output)."""
    execution = task.describe()
    if execution["status"] == "RUNNING":
        return False
    assert execution["status"] == "SUCCEEDED", execution
    return True


def holders(permits: Any, resource: str = RESOURCE) -> set[str]:
    items = permits.query(KeyConditionExpression=Key("resource").eq(resource), ConsistentRead=True)["Items"]
    return {item["executionArn"] for item in items if item["entry"].startswith("holder#")}


def live_holder(waiting_task: Callable[..., WaitingTask]) -> WaitingTask:
    """An execution that holds the only permit and goes on running, as a workflow in its critical section does
    (a waiting task's execution would end once resumed: another task's token takes the resume)."""
    holder, stand_in = waiting_task(), waiting_task()
    acquire(holder, limit=1, token=stand_in.token)
    wait_until(lambda: granted(stand_in), "the holder's permit")
    return holder


def status_change(task: WaitingTask, status: str) -> dict[str, Any]:
    """Step Functions' Execution Status Change event for the task's execution (the events/ sample, this ARN)."""
    event = json.loads((EVENTS / "release_permit.execution-aborted.json").read_text())
    event["detail"] |= {"executionArn": task.execution_arn, "status": status}
    event["resources"] = [task.execution_arn]
    return dict(event)


def test_a_free_permit_resumes_the_task_at_once(permits: Any, waiting_task: Callable[..., WaitingTask]) -> None:
    task = waiting_task()

    acquire(task, limit=3)

    output = json.loads(task.wait_until_closed()["output"])
    assert output == {"resource": RESOURCE, "executionArn": task.execution_arn, "grantedAt": output["grantedAt"]}
    assert datetime.fromisoformat(output["grantedAt"]) <= datetime.now(UTC)
    assert holders(permits) == {task.execution_arn}


def test_beyond_the_limit_a_task_waits_until_a_holder_releases(
    permits: Any, waiting_task: Callable[..., WaitingTask]
) -> None:
    first, second, third = waiting_task(), waiting_task(), waiting_task()
    for task in (first, second, third):
        acquire(task, limit=2)
    assert wait_until(lambda: granted(first) and granted(second), "the first two permits")
    assert third.status() == "RUNNING"

    assert release(first) == {"resource": RESOURCE, "released": True}

    assert wait_until(lambda: granted(third), "the third task's permit")
    assert holders(permits) == {second.execution_arn, third.execution_arn}


def test_permits_go_to_the_waiters_in_the_order_they_came(
    permits: Any, waiting_task: Callable[..., WaitingTask]
) -> None:
    holder, *waiters = [waiting_task() for _ in range(5)]
    for task in (holder, *waiters):
        acquire(task, limit=1)

    order = []
    current = holder
    for _ in waiters:
        release(current)
        current = wait_until(lambda: next((task for task in waiters if task not in order and granted(task)), None))
        order.append(current)
        assert holders(permits) == {current.execution_arn}  # never two at once with a limit of 1

    assert order == waiters


def test_a_retried_release_never_frees_another_permit(permits: Any, waiting_task: Callable[..., WaitingTask]) -> None:
    first, second, third = waiting_task(), waiting_task(), waiting_task()
    for task in (first, second, third):
        acquire(task, limit=1)
    release(first)
    wait_until(lambda: granted(second))

    assert release(first) == {"resource": RESOURCE, "released": False}

    assert holders(permits) == {second.execution_arn}
    assert third.status() == "RUNNING"


def test_a_retried_acquire_holds_one_permit_and_keeps_its_place(
    permits: Any, waiting_task: Callable[..., WaitingTask]
) -> None:
    # Given a holder (whose acquire is retried with a new token) and two waiters, the first of which retries too
    holder, holder_retry, early, early_retry, late = [waiting_task() for _ in range(5)]
    acquire(holder, limit=1)
    acquire(early, limit=1)
    acquire(late, limit=1)

    acquire(holder, limit=1, token=holder_retry.token)  # the retry of a task that holds goes on at once
    acquire(early, limit=1, token=early_retry.token)  # the retry of a waiting one keeps its place, with its token

    assert wait_until(lambda: granted(holder_retry), "the retried holder's resume")
    assert holders(permits) == {holder.execution_arn}
    release(holder)
    assert wait_until(lambda: granted(early_retry), "the retried waiter's permit")
    assert late.status() == "RUNNING"
    assert holders(permits) == {early.execution_arn}


def test_an_execution_that_ends_holding_a_permit_gives_it_back(
    permits: Any, waiting_task: Callable[..., WaitingTask]
) -> None:
    holder, waiter = waiting_task(), waiting_task()
    acquire(holder, limit=1)
    acquire(waiter, limit=1)

    result = invoke("release_permit", status_change(holder, "ABORTED"))

    assert result == {"executionArn": holder.execution_arn, "released": 1}
    assert wait_until(lambda: granted(waiter), "the waiter's permit")
    assert holders(permits) == {waiter.execution_arn}


def test_an_execution_that_ends_waiting_leaves_the_queue(
    permits: Any, waiting_task: Callable[..., WaitingTask]
) -> None:
    holder, gone, next_in_line = waiting_task(), waiting_task(), waiting_task()
    for task in (holder, gone, next_in_line):
        acquire(task, limit=1)
    gone.stop()
    invoke("release_permit", status_change(gone, "ABORTED"))

    release(holder)

    assert wait_until(lambda: granted(next_in_line), "the next waiter's permit")
    assert holders(permits) == {next_in_line.execution_arn}


def test_a_waiter_whose_wait_timed_out_is_skipped(
    permits: Any, waiting_task: Callable[..., WaitingTask], clock: ManualClock
) -> None:
    holder, impatient, patient = waiting_task(), waiting_task(timeout_seconds=60), waiting_task()
    for task in (holder, impatient, patient):
        acquire(task, limit=1)
    clock.advance(61)
    ended = impatient.wait_until_closed()
    assert (ended["status"], ended["error"]) == ("FAILED", "States.Timeout")

    release(holder)

    assert wait_until(lambda: granted(patient), "the patient waiter's permit")
    assert holders(permits) == {patient.execution_arn}


def test_the_sweeper_recovers_the_permit_of_an_execution_whose_end_was_not_seen(
    permits: Any, waiting_task: Callable[..., WaitingTask]
) -> None:
    # Given a holder that was stopped and whose status change event never came, and a waiter
    holder, waiter = live_holder(waiting_task), waiting_task()
    waiters_task = waiting_task(heartbeat_seconds=3600, timeout_seconds=7200)  # as AcquirePermit's: it heartbeats
    acquire(waiter, limit=1, token=waiters_task.token)  # the waiter's execution goes on running once granted
    holder.stop()

    counts = invoke("sweep_permits", {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}})

    assert counts["released"] == 1
    assert wait_until(lambda: granted(waiters_task), "the waiter's permit")
    assert holders(permits) == {waiter.execution_arn}


def test_the_sweeper_drops_a_waiter_whose_execution_ended_unseen(
    permits: Any, waiting_task: Callable[..., WaitingTask]
) -> None:
    holder = live_holder(waiting_task)
    gone, next_in_line = [waiting_task(heartbeat_seconds=3600, timeout_seconds=7200) for _ in range(2)]
    acquire(gone, limit=1)
    acquire(next_in_line, limit=1)
    gone.stop()  # and its status change event is lost

    counts = invoke("sweep_permits", {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}})

    assert counts == {"released": 0, "heartbeats": 1, "closed": 1}
    release(holder)
    assert wait_until(lambda: granted(next_in_line), "the next waiter's permit")


def test_a_refused_heartbeat_does_not_drop_a_waiter_whose_execution_runs(
    permits: Any, waiting_task: Callable[..., WaitingTask]
) -> None:
    # Given a waiter whose task refuses heartbeats (TaskTimedOut) while its execution still runs
    holder, waiter = live_holder(waiting_task), waiting_task()
    acquire(waiter, limit=1)
    fail(importlib.import_module("shared.aws").client("stepfunctions"), "SendTaskHeartbeat", "TaskTimedOut")

    counts = invoke("sweep_permits", {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}})

    # Then it keeps its place, and gets the permit when the holder releases
    assert counts == {"released": 0, "heartbeats": 0, "closed": 0}
    release(holder)
    assert wait_until(lambda: granted(waiter), "the waiter's permit")


def test_the_sweeper_keeps_live_waiters_alive_with_heartbeats(
    permits: Any, waiting_task: Callable[..., WaitingTask], clock: ManualClock
) -> None:
    # Given a live holder and a waiter whose acquire task has HeartbeatSeconds 60
    holder, waiter = live_holder(waiting_task), waiting_task(heartbeat_seconds=60, timeout_seconds=3600)
    acquire(waiter, limit=1)
    clock.armed(1)  # its wait: for a heartbeat, at most until its TimeoutSeconds

    # When the sweeper runs every 40 s for two minutes
    for _ in range(3):
        clock.advance(40)
        counts = invoke("sweep_permits", {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}})
        assert counts == {"released": 0, "heartbeats": 1, "closed": 0}

    # Then the waiter is still waiting its turn, and the holder still holds
    assert waiter.status() == "RUNNING"
    assert holders(permits) == {holder.execution_arn}


@pytest.mark.parametrize(
    "event",
    [
        {"resource": RESOURCE, "limit": 1, "executionArn": "arn:aws:states:::execution:m:e"},  # no token
        {"resource": "bad name with spaces", "limit": 1, "executionArn": "arn:x", "taskToken": "t"},
        {"resource": RESOURCE, "limit": 0, "executionArn": "arn:x", "taskToken": "t"},
    ],
    ids=["no-token", "bad-resource-name", "zero-limit"],
)
def test_a_bad_acquire_is_refused_and_changes_nothing(permits: Any, event: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        invoke("acquire_permit", event)

    assert permits.scan(ConsistentRead=True)["Items"] == []
