"""The reconciler, as the schedule runs it: tasks waiting longer than the threshold are looked up through their
service's API. A finished job is resumed as its (lost) event would have; a running one gets a heartbeat; a task that
no longer exists has its entry removed; a job the API cannot describe gets nothing, so its task times out.

The reconcile function runs as Lambda calls it, against real waiting tasks on moto (with HeartbeatSeconds, as the
workflows' waiting tasks have); the services' APIs answer through botocore Stubber. Here every job is described on
its own: Translate's listing (many jobs a call), the order jobs are taken in and a run's time budget have their own
tests (test_reconcile_pressure.py).
"""

from __future__ import annotations

import importlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from botocore.stub import Stubber

from localcloud.clock import ManualClock
from shared.exceptions import ReconcileIncompleteError, TransientAwsError
from tests.unit.faults import fail
from tests.unit.payloads import (
    bda_status,
    healthlake_export,
    invocation_arn,
    macie_job,
    registration,
    translate_job,
)
from tests.unit.support import EVENTS, Aws, ClientSpy, backdate_registration, invoke
from tests.unit.waiting import WaitingTask, wait_until

SCHEDULE = json.loads((EVENTS / "reconcile_jobs.schedule.json").read_text())
HEARTBEAT_SECONDS = 600  # long enough not to matter, except in the tests that are about it
NOTHING = {"RESUMED": 0, "HEARTBEAT": 0, "CLOSED": 0, "UNCONFIRMED": 0, "DEFERRED": 0}

pytestmark = pytest.mark.usefixtures("jobs_of_this_stack", "translate_described_one_by_one")


@dataclass(frozen=True, eq=False)
class Job:
    """A job of one service and how its API is asked about it."""

    service: str
    job_id: str
    client: str
    method: str
    params: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.service}#{self.job_id}"


TRANSLATE = Job(
    "translate",
    "8882c5390a2c0bd2d6ddba2f5b5faa9d",
    "translate",
    "describe_text_translation_job",
    {"JobId": "8882c5390a2c0bd2d6ddba2f5b5faa9d"},
)
MACIE = Job(
    "macie",
    "85a55dc0fa6ed0be5939d0408f2e1c7b",
    "macie2",
    "describe_classification_job",
    {"jobId": "85a55dc0fa6ed0be5939d0408f2e1c7b"},
)
BDA = Job(
    "bda",
    "3f1c9a2e-7b4d-4e8a-9c6f-2d5b8e0a1f47",
    "bedrock-data-automation-runtime",
    "get_data_automation_status",
    {"invocationArn": invocation_arn("3f1c9a2e-7b4d-4e8a-9c6f-2d5b8e0a1f47")},
)
HEALTHLAKE = Job(
    "healthlake",
    "a1b2c3d4e5f60718293a4b5c6d7e8f90/c4e1f5a9b2d3086e7f1a2b3c4d5e6f70",
    "healthlake",
    "describe_fhir_export_job",
    {"DatastoreId": "a1b2c3d4e5f60718293a4b5c6d7e8f90", "JobId": "c4e1f5a9b2d3086e7f1a2b3c4d5e6f70"},
)


def reconcile() -> dict[str, int]:
    """One scheduled run of the reconcile function."""
    return dict(invoke("reconcile_jobs", SCHEDULE))


@pytest.fixture
def waiting_for(aws: Aws, waiting_task: Callable[..., WaitingTask]) -> Callable[..., WaitingTask]:
    """`waiting_for(job)`: a workflow whose task has been waiting for the job longer than the reconciler's threshold
    (`waiting_for(job, seconds=0)`: that has just registered)."""
    threshold = int(aws.environment["RECONCILE_AFTER_SECONDS"])

    def start(
        job: Job, seconds: int | None = None, heartbeat_seconds: int = HEARTBEAT_SECONDS, **task: Any
    ) -> WaitingTask:
        waiting = waiting_task(heartbeat_seconds=heartbeat_seconds, **task)
        assert invoke("register_token", registration(job.service, job.job_id, waiting.token)) == {
            "status": "REGISTERED"
        }
        backdate_registration(aws, job.key, threshold + 120 if seconds is None else seconds)
        return waiting

    return start


def answer(stubbed: Callable[[str], Stubber], job: Job, response: dict[str, Any]) -> None:
    stubbed(job.client).add_response(job.method, response, job.params)


# ----------------------------------------------------------------------------------------------------------------
# A finished job whose event was lost
# ----------------------------------------------------------------------------------------------------------------
FINISHED = [
    (TRANSLATE, translate_job(TRANSLATE.job_id, "COMPLETED"), "SUCCEEDED", None),
    (TRANSLATE, translate_job(TRANSLATE.job_id, "FAILED", "Unable to read the input."), "FAILED", "Translate.FAILED"),
    (MACIE, macie_job(MACIE.job_id, "COMPLETE"), "SUCCEEDED", None),
    (MACIE, macie_job(MACIE.job_id, "COMPLETE", "ERROR"), "FAILED", "Macie.JOB_COMPLETED_WITH_ERRORS"),
    (MACIE, macie_job(MACIE.job_id, "CANCELLED"), "FAILED", "Macie.JOB_CANCELLED"),
    (BDA, bda_status("Success"), "SUCCEEDED", None),
    (BDA, bda_status("ClientError", "InvalidInput"), "FAILED", "BedrockDataAutomation.ClientError"),
    (HEALTHLAKE, healthlake_export("a1b2c3d4e5f60718293a4b5c6d7e8f90", "x", "COMPLETED"), "SUCCEEDED", None),
    (
        HEALTHLAKE,
        healthlake_export("a1b2c3d4e5f60718293a4b5c6d7e8f90", "x", "COMPLETED_WITH_ERRORS"),
        "FAILED",
        "HealthLake.COMPLETED_WITH_ERRORS",
    ),
]


@pytest.mark.parametrize(
    ("job", "response", "end", "error"),
    FINISHED,
    ids=[f"{job.service}-{error or end}" for job, _, end, error in FINISHED],
)
def test_a_finished_job_whose_event_was_lost_is_resumed_as_the_event_would_have(
    aws: Aws,
    waiting_for: Callable[..., WaitingTask],
    stubbed: Callable[[str], Stubber],
    sfn_spy: ClientSpy,
    job: Job,
    response: dict[str, Any],
    end: str,
    error: str | None,
) -> None:
    # Given a workflow waiting for a job that has ended, according to its service's API
    task = waiting_for(job)
    answer(stubbed, job, response)

    # When the reconciler runs
    result = reconcile()

    # Then the task ends with the job's outcome (the error name a Catch matches on failure), its entry is removed
    assert result == {**NOTHING, "RESUMED": 1}
    execution = task.wait_until_closed()
    assert execution["status"] == end
    if error:
        assert execution["error"] == error
        assert [call["taskToken"] for call in sfn_spy.calls_to("send_task_failure")] == [task.token]
    else:
        output = json.loads(execution["output"])
        assert (output["service"], output["jobId"]) == (job.service, job.job_id)
        assert [call["taskToken"] for call in sfn_spy.calls_to("send_task_success")] == [task.token]
    assert sfn_spy.calls_to("send_task_heartbeat") == []
    assert aws.item(job.key) is None
    stubbed(job.client).assert_no_pending_responses()


def test_the_lost_event_arriving_after_all_is_a_harmless_duplicate(
    aws: Aws, waiting_for: Callable[..., WaitingTask], stubbed: Callable[[str], Stubber], sfn_spy: ClientSpy
) -> None:
    # Given a workflow the reconciler resumed for a finished translation job
    task = waiting_for(TRANSLATE)
    answer(stubbed, TRANSLATE, translate_job(TRANSLATE.job_id, "COMPLETED"))
    assert reconcile()["RESUMED"] == 1
    assert task.wait_until_closed()["status"] == "SUCCEEDED"

    # When the job's event, late rather than lost, arrives after all
    event = json.loads((EVENTS / "resume_job.translate-completed.json").read_text())
    invoke("resume_job", event)

    # Then nothing is sent to the workflow a second time
    assert len(sfn_spy.calls_to("send_task_success")) == 1
    assert sfn_spy.calls_to("send_task_failure") == []
    assert task.describe()["status"] == "SUCCEEDED"


# ----------------------------------------------------------------------------------------------------------------
# A running job
# ----------------------------------------------------------------------------------------------------------------
RUNNING = [
    (TRANSLATE, translate_job(TRANSLATE.job_id, "IN_PROGRESS")),
    (MACIE, macie_job(MACIE.job_id, "RUNNING")),
    (MACIE, macie_job(MACIE.job_id, "USER_PAUSED")),
    (BDA, bda_status("InProgress")),
    (HEALTHLAKE, healthlake_export("a1b2c3d4e5f60718293a4b5c6d7e8f90", "x", "IN_PROGRESS")),
]


@pytest.mark.parametrize(("job", "response"), RUNNING, ids=[f"{job.service}-{i}" for i, (job, _) in enumerate(RUNNING)])
def test_a_running_job_gets_a_heartbeat_and_its_task_keeps_waiting(
    aws: Aws,
    waiting_for: Callable[..., WaitingTask],
    stubbed: Callable[[str], Stubber],
    sfn_spy: ClientSpy,
    job: Job,
    response: dict[str, Any],
) -> None:
    # Given a workflow waiting for a job that is still running
    task = waiting_for(job)
    stored = aws.item(job.key)
    answer(stubbed, job, response)

    # When the reconciler runs
    before = int(time.time())
    result = reconcile()

    # Then the waiting task gets a heartbeat, keeps waiting, and its entry stays, noting when the heartbeat was sent
    # (its heartbeat deadline moved on)
    assert result == {**NOTHING, "HEARTBEAT": 1}
    assert sfn_spy.calls_to("send_task_heartbeat") == [{"taskToken": task.token}]
    assert sfn_spy.calls_to("send_task_success") == sfn_spy.calls_to("send_task_failure") == []
    assert task.status() == "RUNNING"
    item = aws.item(job.key)
    assert item is not None and before <= int(item.pop("heartbeatAt")) <= time.time()
    assert item == stored


def test_heartbeats_keep_a_task_alive_past_its_heartbeat_seconds_while_the_job_runs(
    aws: Aws, clock: ManualClock, waiting_for: Callable[..., WaitingTask], stubbed: Callable[[str], Stubber]
) -> None:
    # Given a workflow waiting, with HeartbeatSeconds 60, for a translation job that keeps running
    task = waiting_for(TRANSLATE, heartbeat_seconds=60, timeout_seconds=3600)
    clock.armed(1)  # its wait: for a heartbeat, at most until its TimeoutSeconds

    # When the reconciler runs every 30 seconds for five minutes
    for _ in range(10):
        answer(stubbed, TRANSLATE, translate_job(TRANSLATE.job_id, "IN_PROGRESS"))
        assert reconcile()["HEARTBEAT"] == 1
        clock.advance(30)

    # Then the task is still waiting: its wait has seen the last minute and waits on
    wait_until(lambda: clock.waiting_at(clock.now()) >= 1)
    assert task.status() == "RUNNING"


def test_a_task_whose_job_cannot_be_confirmed_times_out_on_its_heartbeat(
    aws: Aws, clock: ManualClock, waiting_for: Callable[..., WaitingTask], stubbed: Callable[[str], Stubber]
) -> None:
    # Given a workflow waiting, with HeartbeatSeconds 60 and TimeoutSeconds an hour, for a job its API cannot find
    task = waiting_for(TRANSLATE, heartbeat_seconds=60, timeout_seconds=3600)

    # When the reconciler cannot confirm the job, and a minute passes without a heartbeat
    stubbed("translate").add_client_error(
        "describe_text_translation_job",
        "ResourceNotFoundException",
        "Job not found",
        400,
        expected_params=TRANSLATE.params,
    )
    assert reconcile()["UNCONFIRMED"] == 1
    clock.armed(1)  # its wait: for a heartbeat, at most until its TimeoutSeconds
    clock.advance(61)

    # Then the task fails at its missed heartbeat, with States.Timeout as AWS records it (a Catch on
    # States.HeartbeatTimeout alone matches it on AWS, not offline: offline-cloud.md gap 2; the workflows catch both)
    execution = task.wait_until_closed()
    assert (execution["status"], execution["error"]) == ("FAILED", "States.Timeout")


# ----------------------------------------------------------------------------------------------------------------
# A task that no longer exists, a job that cannot be described
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("closed_by", ["StopExecution", "task timeout"])
def test_the_entry_of_a_task_that_no_longer_exists_is_removed(
    aws: Aws,
    waiting_for: Callable[..., WaitingTask],
    stubbed: Callable[[str], Stubber],
    sfn_spy: ClientSpy,
    closed_by: str,
) -> None:
    # Given a registered task that was stopped, or timed out, while its job still runs
    if closed_by == "StopExecution":
        task = waiting_for(TRANSLATE)
        task.stop()
    else:
        task = waiting_for(TRANSLATE, timeout_seconds=1, heartbeat_seconds=None)
        assert task.wait_until_closed()["status"] == "FAILED"
    answer(stubbed, TRANSLATE, translate_job(TRANSLATE.job_id, "IN_PROGRESS"))

    # When the reconciler runs
    result = reconcile()

    # Then its heartbeat is refused as for a closed task, and its entry is removed
    assert result == {**NOTHING, "CLOSED": 1}
    assert sfn_spy.calls_to("send_task_heartbeat") == [{"taskToken": task.token}]
    assert aws.item(TRANSLATE.key) is None


@pytest.mark.parametrize(
    ("code", "status"),
    [("ResourceNotFoundException", 400), ("ThrottlingException", 400), ("AccessDeniedException", 403)],
)
@pytest.mark.parametrize("job", [TRANSLATE, MACIE, BDA, HEALTHLAKE], ids=lambda job: job.service)
def test_a_job_the_api_cannot_describe_gets_no_heartbeat(
    aws: Aws,
    waiting_for: Callable[..., WaitingTask],
    stubbed: Callable[[str], Stubber],
    sfn_spy: ClientSpy,
    job: Job,
    code: str,
    status: int,
) -> None:
    # Given a workflow waiting for a job whose API answers with an error
    task = waiting_for(job)
    stored = aws.item(job.key)
    stubbed(job.client).add_client_error(job.method, code, f"{code} (stubbed)", status, expected_params=job.params)

    # When the reconciler runs
    result = reconcile()

    # Then the job is unconfirmed: no heartbeat, no outcome, the entry kept (the task times out on its heartbeat)
    assert result == {**NOTHING, "UNCONFIRMED": 1}
    assert sfn_spy.calls == []
    assert task.status() == "RUNNING"
    assert aws.item(job.key) == stored


def test_a_service_endpoint_that_cannot_be_reached_does_not_cost_the_other_tasks_their_heartbeat(
    aws: Aws, waiting_for: Callable[..., WaitingTask], stubbed: Callable[[str], Stubber], sfn_spy: ClientSpy
) -> None:
    # Given a workflow waiting for a data automation job whose API endpoint cannot be reached (a network error, not
    # an answer), and one waiting for a translation that runs
    unreachable, running = waiting_for(BDA), waiting_for(TRANSLATE)
    bda = importlib.import_module("shared.aws").client(BDA.client)

    def cannot_connect(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url=bda.meta.endpoint_url)

    bda.meta.events.register_first(
        "before-call.bedrock-data-automation-runtime.GetDataAutomationStatus", cannot_connect
    )
    answer(stubbed, TRANSLATE, translate_job(TRANSLATE.job_id, "IN_PROGRESS"))

    # When the reconciler runs
    result = reconcile()

    # Then the unreachable job is unconfirmed (no heartbeat), and the running one still gets its heartbeat
    assert result == {**NOTHING, "HEARTBEAT": 1, "UNCONFIRMED": 1}
    assert sfn_spy.calls_to("send_task_heartbeat") == [{"taskToken": running.token}]
    assert unreachable.status() == "RUNNING"
    assert aws.item(BDA.key) is not None


def test_an_entry_of_a_service_no_adapter_knows_is_unconfirmed(aws: Aws, sfn_spy: ClientSpy) -> None:
    # Given a waiting entry of a service this version has no adapter for (left by an older version)
    now = int(time.time())
    item = {"jobKey": "transcribe#job-1", "token": "tok", "registeredAt": now - 3600, "expiresAt": now + 3600}
    aws.table.put_item(Item=item)

    # When the reconciler runs
    result = reconcile()

    # Then it is left alone, unconfirmed
    assert result == {**NOTHING, "UNCONFIRMED": 1}
    assert sfn_spy.calls == []
    assert aws.item("transcribe#job-1") == item


# ----------------------------------------------------------------------------------------------------------------
# What the reconciler looks at
# ----------------------------------------------------------------------------------------------------------------
def test_tasks_registered_more_recently_than_the_threshold_are_left_alone(
    aws: Aws, waiting_for: Callable[..., WaitingTask], stubbed: Callable[[str], Stubber], sfn_spy: ClientSpy
) -> None:
    # Given one workflow waiting longer than the threshold, and others that registered within it (any describe
    # of their jobs would fail the test: Stubber answers only for the first)
    threshold = int(aws.environment["RECONCILE_AFTER_SECONDS"])
    old = waiting_for(TRANSLATE)
    recent = [waiting_for(MACIE, seconds=0), waiting_for(BDA, seconds=threshold - 60)]
    answer(stubbed, TRANSLATE, translate_job(TRANSLATE.job_id, "IN_PROGRESS"))
    for service in ("macie2", "bedrock-data-automation-runtime"):
        stubbed(service)

    # When the reconciler runs
    result = reconcile()

    # Then only the first is looked at
    assert result == {**NOTHING, "HEARTBEAT": 1}
    assert sfn_spy.calls_to("send_task_heartbeat") == [{"taskToken": old.token}]
    assert all(task.status() == "RUNNING" for task in recent)


def test_expired_entries_and_early_completions_are_ignored(
    aws: Aws, stubbed: Callable[[str], Stubber], sfn_spy: ClientSpy
) -> None:
    # Given a token past its expiry that TTL has not deleted yet, and a completion waiting for its registration
    now = int(time.time())
    expired = {"jobKey": TRANSLATE.key, "token": "stale", "registeredAt": now - 90_000, "expiresAt": now - 1}
    early = {"jobKey": MACIE.key, "outcome": "{}", "completedAt": now - 3600, "expiresAt": now + 3600}
    for item in (expired, early):
        aws.table.put_item(Item=item)
    stubbed("translate")
    stubbed("macie2")

    # When the reconciler runs
    result = reconcile()

    # Then neither is looked at (no describe, no heartbeat) nor changed
    assert result == NOTHING
    assert sfn_spy.calls == []
    assert aws.item(TRANSLATE.key) == expired
    assert aws.item(MACIE.key) == early


def test_one_run_handles_each_waiting_task_by_what_its_job_says(
    aws: Aws, waiting_for: Callable[..., WaitingTask], stubbed: Callable[[str], Stubber], sfn_spy: ClientSpy
) -> None:
    # Given four workflows waiting: a translation that finished, a classification that runs, a data automation
    # job its API cannot describe, and an export whose task was stopped
    finished, running, unconfirmed = waiting_for(TRANSLATE), waiting_for(MACIE), waiting_for(BDA)
    stopped = waiting_for(HEALTHLAKE)
    stopped.stop()
    answer(stubbed, TRANSLATE, translate_job(TRANSLATE.job_id, "COMPLETED"))
    answer(stubbed, MACIE, macie_job(MACIE.job_id, "RUNNING"))
    stubbed(BDA.client).add_client_error(BDA.method, "ThrottlingException", "Rate exceeded", 400)
    answer(stubbed, HEALTHLAKE, healthlake_export("a1b2c3d4e5f60718293a4b5c6d7e8f90", "x", "IN_PROGRESS"))

    # When the reconciler runs
    result = reconcile()

    # Then each got what its job called for
    assert result == {"RESUMED": 1, "HEARTBEAT": 1, "CLOSED": 1, "UNCONFIRMED": 1, "DEFERRED": 0}
    assert finished.wait_until_closed()["status"] == "SUCCEEDED"
    assert running.status() == unconfirmed.status() == "RUNNING"
    assert {call["taskToken"] for call in sfn_spy.calls_to("send_task_heartbeat")} == {running.token, stopped.token}
    assert aws.item(TRANSLATE.key) is None
    assert aws.item(HEALTHLAKE.key) is None
    assert aws.item(MACIE.key) is not None
    assert aws.item(BDA.key) is not None


# ----------------------------------------------------------------------------------------------------------------
# Each job on its own: one job's failure never stops the others
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("job_status", "operation", "end"),
    [("IN_PROGRESS", "SendTaskHeartbeat", "RUNNING"), ("COMPLETED", "SendTaskSuccess", "SUCCEEDED")],
    ids=["heartbeat", "resume"],
)
def test_one_throttled_job_of_twenty_does_not_stop_the_other_nineteen(
    aws: Aws,
    waiting_for: Callable[..., WaitingTask],
    stubbed: Callable[[str], Stubber],
    sfn_spy: ClientSpy,
    job_status: str,
    operation: str,
    end: str,
) -> None:
    # Given twenty workflows waiting (longer than the threshold) for translation jobs in the same state, and Step
    # Functions throttling the call for one of them (after botocore's retries)
    jobs = [Job("translate", f"{n:032x}", "translate", "describe_text_translation_job", {}) for n in range(20)]
    tasks = {job.job_id: waiting_for(job) for job in jobs}
    throttled = jobs[7]
    for job in jobs:  # the jobs are reconciled in parallel, in any order: the answers do not depend on it
        stubbed("translate").add_response(job.method, translate_job(job.job_id, job_status))
    fault = fail(
        importlib.import_module("shared.aws").client("stepfunctions"),
        operation,
        when=lambda params: params["taskToken"] == tasks[throttled.job_id].token,
    )

    # When the reconciler runs
    # Then it reports the partial failure with a named error, after reconciling every other job
    with pytest.raises(ReconcileIncompleteError, match="1 of 20"):
        reconcile()
    assert fault.failed == 1
    called = {call["taskToken"] for call in sfn_spy.calls_to(operation.replace("SendTask", "send_task_").lower())}
    assert called == {task.token for task in tasks.values()}
    others = [job for job in jobs if job is not throttled]
    for job in others:
        if end == "RUNNING":
            assert tasks[job.job_id].status() == "RUNNING"
        else:
            assert tasks[job.job_id].wait_until_closed()["status"] == end
            assert aws.item(job.key) is None
    # and the throttled job's workflow still waits, its token kept for the next scheduled run
    assert tasks[throttled.job_id].status() == "RUNNING"
    item = aws.item(throttled.key)
    assert item is not None and item["token"] == tasks[throttled.job_id].token
    stubbed("translate").assert_no_pending_responses()


def test_the_reconciler_describes_jobs_in_parallel_at_a_paced_rate(
    aws: Aws, waiting_for: Callable[..., WaitingTask], stubbed: Callable[[str], Stubber], sfn_spy: ClientSpy
) -> None:
    # Given twelve workflows waiting for running translation jobs, and the translate client recording when (and on
    # which thread) each DescribeTextTranslationJob call starts
    jobs = [Job("translate", f"{n:032x}", "translate", "describe_text_translation_job", {}) for n in range(12)]
    tasks = [waiting_for(job) for job in jobs]
    for job in jobs:
        stubbed("translate").add_response(job.method, translate_job(job.job_id, "IN_PROGRESS"))
    started: list[tuple[float, int]] = []

    def record(**_: Any) -> None:
        started.append((time.monotonic(), threading.get_ident()))

    translate = importlib.import_module("shared.aws").client("translate")
    translate.meta.events.register_first("before-parameter-build.translate.DescribeTextTranslationJob", record)

    # When the reconciler runs
    assert reconcile() == {**NOTHING, "HEARTBEAT": 12}

    # Then the describes ran on several threads, yet no faster than ten a second (the describe rate limit)
    assert len(started) == 12
    assert len({thread for _, thread in started}) > 1
    times = sorted(at for at, _ in started)
    assert times[-1] - times[0] >= 11 * 0.1 - 0.01
    assert {call["taskToken"] for call in sfn_spy.calls_to("send_task_heartbeat")} == {t.token for t in tasks}


@pytest.fixture
def dynamodb_calls(aws: Aws) -> Iterator[list[tuple[int, int]]]:
    """Every DynamoDB call made by a client created from here on, as (thread, client)."""
    calls: list[tuple[int, int]] = []

    def record(request_signer: Any, **_: Any) -> None:
        calls.append((threading.get_ident(), id(request_signer)))

    events = boto3._get_default_session().events
    events.register("before-call.dynamodb", record)
    yield calls
    events.unregister("before-call.dynamodb", record)


def test_the_reconcilers_workers_share_no_dynamodb_resource(
    dynamodb_calls: list[tuple[int, int]],
    waiting_for: Callable[..., WaitingTask],
    stubbed: Callable[[str], Stubber],
    sfn_spy: ClientSpy,
) -> None:
    # Given twenty workflows waiting for translation jobs that finished
    jobs = [Job("translate", f"{n:032x}", "translate", "describe_text_translation_job", {}) for n in range(20)]
    tasks = [waiting_for(job) for job in jobs]
    for job in jobs:
        stubbed("translate").add_response(job.method, translate_job(job.job_id, "COMPLETED"))
    # When the reconciler resumes them all, on its worker threads
    assert reconcile() == {**NOTHING, "RESUMED": 20}
    assert all(task.wait_until_closed()["status"] == "SUCCEEDED" for task in tasks)
    # Then each thread made its token table calls through a client of its own: boto3's resources must not be
    # shared across threads
    threads_of: dict[int, set[int]] = {}
    for thread, client in dynamodb_calls:
        threads_of.setdefault(client, set()).add(thread)
    assert len({thread for thread, _ in dynamodb_calls}) > 1
    assert all(len(threads) == 1 for threads in threads_of.values()), threads_of


def test_a_run_that_cannot_list_the_waiting_jobs_fails_with_the_transient_error_and_changes_nothing(
    aws: Aws, waiting_for: Callable[..., WaitingTask], sfn_spy: ClientSpy
) -> None:
    # Given a workflow waiting (longer than the threshold) for a translation job, and the token table's Scan throttled
    # (after botocore's retries)
    job = Job("translate", f"{1:032x}", "translate", "describe_text_translation_job", {})
    task = waiting_for(job)
    tokens = importlib.import_module("shared.aws").table(aws.table.name)
    fault = fail(tokens.meta.client, "Scan")

    # When the reconciler runs
    # Then it fails with TransientAwsError (the next scheduled run is its retry), having touched no task
    with pytest.raises(TransientAwsError, match="ThrottlingException"):
        reconcile()
    assert fault.failed == 1
    assert sfn_spy.calls == [] and task.status() == "RUNNING"
    assert aws.item(job.key) is not None
