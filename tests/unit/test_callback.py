"""The generalized callback as a workflow sees it: a waiting task's token is paired with a job, and the job's
completion event resumes the task exactly once, whatever the order, repetition or lateness of the two.

The functions run as Lambda would call them (handler, event, context) on moto, against real executions parked on
`.waitForTaskToken` tasks; DescribeExecution shows what the workflow saw. The handlers and shared.callback.service are
imported inside the tests, after the `aws` fixture has set the functions' environment (see conftest.py).
"""

from __future__ import annotations

import copy
import importlib
import io
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from pydantic import ValidationError

from localcloud.clock import ManualClock
from shared.exceptions import (
    JobIdTooLongError,
    TokenConflictError,
    TransientAwsError,
    UnknownJobEventError,
    UnknownServiceError,
)
from tests.unit.faults import CONNECTION_LOST, fail
from tests.unit.payloads import registration as registration_of
from tests.unit.payloads import translate_job
from tests.unit.support import EVENTS, REPO, Aws, ClientSpy, invoke, template
from tests.unit.waiting import WaitingTask

JOB_ID = "8882c5390a2c0bd2d6ddba2f5b5faa9d"
JOB_KEY = f"translate#{JOB_ID}"
UNSUCCESSFUL = ["COMPLETED_WITH_ERROR", "FAILED", "STOPPED"]
NOT_TERMINAL = ["SUBMITTED", "IN_PROGRESS", "STOP_REQUESTED"]

pytestmark = pytest.mark.usefixtures("jobs_of_this_stack")


def translate_event(status: str, job_id: str = JOB_ID) -> dict[str, Any]:
    """A Translate job state-change event in EventBridge's envelope (the events/ sample, with this job and status)."""
    event = json.loads((EVENTS / "resume_job.translate-completed.json").read_text())
    event["detail"] = {**event["detail"], "jobId": job_id, "jobStatus": status}
    return dict(event)


def registration(token: str, job_id: str = JOB_ID, **extra: Any) -> dict[str, Any]:
    """What the workflow's WaitForTranslation task sends the register function."""
    return registration_of(extra.pop("service", "translate"), job_id, token, **extra)


def register(token: str, job_id: str = JOB_ID, **extra: Any) -> str:
    return str(invoke("register_token", registration(token, job_id, **extra))["status"])


def complete(status: str, job_id: str = JOB_ID) -> str:
    return str(invoke("resume_job", translate_event(status, job_id))["status"])


def callbacks() -> Any:
    return importlib.import_module("shared.callback.service").callbacks()


def outcome(status: str, job_id: str = JOB_ID, service: str = "translate") -> Any:
    """The Outcome of a completion event (for services whose events the adapters do not know yet)."""
    adapters = importlib.import_module("shared.callback.adapters")
    detail = {"jobId": job_id, "jobStatus": status}
    return adapters.Outcome(service, job_id, status, status == "COMPLETED", detail, adapters.adapter(service).name)


# ----------------------------------------------------------------------------------------------------------------
# Registration
# ----------------------------------------------------------------------------------------------------------------
def test_registration_stores_the_token_under_the_service_and_job_id(aws: Aws) -> None:
    # Given a workflow waiting for a Translate job
    before = int(time.time())

    # When its task registers the token
    status = register("token-1")

    # Then the token is stored under translate#<job id>, expiring after the task's timeout plus the margin
    after = int(time.time())
    assert status == "REGISTERED"
    item = aws.item(JOB_KEY)
    assert item is not None
    assert item["jobKey"] == JOB_KEY
    assert item["token"] == "token-1"
    assert before <= item["registeredAt"] <= after
    ttl = int(aws.environment["TASK_TIMEOUT_SECONDS"]) + int(aws.environment["TOKEN_TTL_MARGIN_SECONDS"])
    assert item["expiresAt"] == item["registeredAt"] + ttl
    assert before + ttl <= item["expiresAt"] <= after + ttl  # epoch seconds, as DynamoDB TTL requires


def test_registration_honours_an_explicit_ttl(aws: Aws) -> None:
    # Given a registration that says how long it should live
    # When it is registered
    status = register("token-1", ttlSeconds=120)

    # Then the entry expires after that many seconds
    assert status == "REGISTERED"
    item = aws.item(JOB_KEY)
    assert item is not None
    assert item["expiresAt"] == item["registeredAt"] + 120


def test_registration_stores_the_tasks_heartbeat_seconds_when_the_workflow_passes_them(aws: Aws) -> None:
    # Given a workflow waiting with HeartbeatSeconds 1800, and one of a version that does not pass them
    # When both register their tokens
    assert register("token-1", heartbeatSeconds=1800) == "REGISTERED"
    assert register("token-2", job_id="c0ffee0000000000000000000000beef") == "REGISTERED"

    # Then the first entry says them (the reconciler knows when its heartbeat runs out), the other one does not
    first, other = aws.item(JOB_KEY), aws.item("translate#c0ffee0000000000000000000000beef")
    assert first is not None and first["heartbeatSeconds"] == 1800
    assert other is not None and "heartbeatSeconds" not in other


def test_the_same_registration_twice_is_a_duplicate_and_changes_nothing(aws: Aws) -> None:
    # Given a registered token
    register("token-1")
    stored = aws.item(JOB_KEY)

    # When the same registration arrives again (Step Functions retried the Lambda call)
    status = register("token-1")

    # Then it is acknowledged as a duplicate and the entry is untouched
    assert status == "DUPLICATE"
    assert aws.item(JOB_KEY) == stored


def test_another_token_for_the_same_job_is_refused(aws: Aws) -> None:
    # Given a job already paired with one waiting task
    register("token-1")

    # When another task registers a different token for the same job
    with pytest.raises(TokenConflictError) as refused:
        register("token-2")

    # Then it is refused with a named error (a Catch can match it), and the first token is still the one stored
    assert JOB_KEY in str(refused.value)
    assert "token-1" not in str(refused.value)
    item = aws.item(JOB_KEY)
    assert item is not None
    assert item["token"] == "token-1"


def test_an_invalid_registration_is_refused_without_echoing_the_token(aws: Aws) -> None:
    # Given a registration that lacks the job id
    token = "AQCEAAAAKgAAAAMAAAAAAAAAAQ-secret-tail-0123456789"

    # When it reaches the register function
    with pytest.raises(ValidationError) as refused:
        invoke("register_token", {"service": "translate", "taskToken": token})

    # Then it is refused, and the error Lambda logs names the field but not the token, not even in part
    assert "jobId" in str(refused.value)
    assert token[-16:] not in str(refused.value)
    assert aws.items() == []


@pytest.mark.parametrize("service", ["transcribe", "Translate", "translate "])
def test_a_registration_for_a_service_no_adapter_knows_is_refused_and_nothing_is_written(
    aws: Aws, service: str
) -> None:
    # Given a waiting task that names a service the kit has no adapter for (or misspells one)
    token = "AQCEAAAAKgAAAAMAAAAAAAAAAQ-unknown-service-token"

    # When it registers its token
    with pytest.raises(UnknownServiceError) as refused:
        invoke("register_token", registration(token, service=service))

    # Then it is refused with a named error listing the services it could have named, and nothing is stored
    # (its job's completion could never resume it)
    assert repr(service) in str(refused.value)
    for known in ("translate", "macie", "bda", "healthlake"):
        assert known in str(refused.value)
    assert token not in str(refused.value)
    assert aws.items() == []


def test_a_job_id_too_long_for_a_key_is_refused_by_name_and_nothing_is_written(aws: Aws) -> None:
    # Given job ids whose key ("translate#" + id) is one byte over DynamoDB's 2048-byte partition key limit
    token = "AQCEAAAAKgAAAAMAAAAAAAAAAQ-long-job-id-token"
    too_long = ["j" * 2039, "é" * 1019 + "j"]  # 2039 bytes either way

    for job_id in too_long:
        # When a workflow registers for it, or its completion arrives
        with pytest.raises(JobIdTooLongError) as registered:
            register(token, job_id)
        with pytest.raises(JobIdTooLongError):
            complete("COMPLETED", job_id)

        # Then both are refused with the named error (not DynamoDB's ValidationException), and nothing is stored
        assert "2039 bytes" in str(registered.value)
        assert token not in str(registered.value)
    assert aws.items() == []


def test_a_job_id_that_just_fits_a_key_is_registered(aws: Aws) -> None:
    job_id = "j" * 2038  # "translate#" + 2038 bytes: exactly 2048

    assert register("AQCEAAAAKgAAAAMAAAAAAAAAAQ-longest-job-id", job_id) == "REGISTERED"
    assert [item["jobKey"] for item in aws.items()] == [f"translate#{job_id}"]


def test_job_ids_of_different_services_never_collide(aws: Aws, waiting_task: Callable[..., WaitingTask]) -> None:
    # Given two workflows waiting for jobs of different services that happen to have the same id
    translation, export = waiting_task(), waiting_task()
    assert register(translation.token, "job-1") == "REGISTERED"
    assert register(export.token, "job-1", service="healthlake") == "REGISTERED"

    # When the Translate job completes
    status = complete("COMPLETED", job_id="job-1")

    # Then only the workflow waiting for the Translate job resumes; the other one still waits, its token kept
    assert status == "RESUMED"
    assert translation.wait_until_closed()["status"] == "SUCCEEDED"
    assert export.status() == "RUNNING"
    assert aws.item("translate#job-1") is None
    healthlake = aws.item("healthlake#job-1")
    assert healthlake is not None
    assert healthlake["token"] == export.token


# ----------------------------------------------------------------------------------------------------------------
# Registration and completion in either order, repeated, late, expired
# ----------------------------------------------------------------------------------------------------------------
def test_a_completion_before_the_registration_is_delivered_by_the_registration(
    aws: Aws, waiting_task: Callable[..., WaitingTask]
) -> None:
    # Given a job that finished before its workflow registered the token (the early-completion race)
    assert complete("COMPLETED") == "RECORDED"
    task = waiting_task()

    # When the token is registered
    status = register(task.token)

    # Then the registration resumes the workflow at once with the recorded outcome, and the entry is gone
    assert status == "RESUMED"
    execution = task.wait_until_closed()
    assert execution["status"] == "SUCCEEDED"
    assert json.loads(execution["output"]) == {
        **translate_event("COMPLETED")["detail"],
        "service": "translate",
        "jobId": JOB_ID,
        "status": "COMPLETED",
    }
    assert aws.items() == []


def test_an_early_failure_is_delivered_by_the_registration(
    aws: Aws, waiting_task: Callable[..., WaitingTask], sfn_spy: ClientSpy
) -> None:
    # Given a job that failed before its workflow registered the token
    assert complete("FAILED") == "RECORDED"
    task = waiting_task()

    # When the token is registered
    status = register(task.token)

    # Then the registration fails the waiting task with the job's error, and the entry is gone
    assert status == "RESUMED"
    execution = task.wait_until_closed()
    assert (execution["status"], execution["error"]) == ("FAILED", "Translate.FAILED")
    assert [call["taskToken"] for call in sfn_spy.calls_to("send_task_failure")] == [task.token]
    assert aws.items() == []


def test_a_failure_recorded_by_the_previous_release_is_still_delivered_with_its_error_name(
    aws: Aws, waiting_task: Callable[..., WaitingTask]
) -> None:
    # Given an early failure recorded before outcomes carried their error prefix (a deploy while jobs are in flight)
    assert complete("FAILED") == "RECORDED"
    item = aws.item(JOB_KEY)
    assert item is not None
    stored = json.loads(item["outcome"])
    del stored["errorPrefix"]
    aws.table.update_item(
        Key={"jobKey": JOB_KEY},
        UpdateExpression="SET outcome = :o",
        ExpressionAttributeValues={":o": json.dumps(stored)},
    )
    task = waiting_task()

    # When the token is registered, the workflow fails with the error its Catch matches
    assert register(task.token) == "RESUMED"
    execution = task.wait_until_closed()
    assert (execution["status"], execution["error"]) == ("FAILED", "Translate.FAILED")


def test_a_completion_after_the_registration_resumes_the_workflow_and_deletes_the_entry(
    aws: Aws, waiting_task: Callable[..., WaitingTask]
) -> None:
    # Given a workflow whose token is registered
    task = waiting_task()
    register(task.token)

    # When the job completes
    status = complete("COMPLETED")

    # Then the workflow resumes and the entry is deleted
    assert status == "RESUMED"
    assert task.wait_until_closed()["status"] == "SUCCEEDED"
    assert aws.item(JOB_KEY) is None


def test_the_same_completion_three_times_resumes_the_workflow_once(
    aws: Aws, waiting_task: Callable[..., WaitingTask], sfn_spy: ClientSpy
) -> None:
    # Given a workflow whose token is registered
    task = waiting_task()
    register(task.token)

    # When the completion event is delivered three times (EventBridge and Lambda deliver at least once)
    statuses = [complete("COMPLETED") for _ in range(3)]

    # Then the task is resumed exactly once, and the repeats are acknowledged without error
    assert statuses[0] == "RESUMED"
    assert set(statuses[1:]) <= {"RECORDED", "DUPLICATE"}
    assert len(sfn_spy.calls_to("send_task_success")) == 1
    assert sfn_spy.calls_to("send_task_failure") == []
    assert task.wait_until_closed()["status"] == "SUCCEEDED"


@pytest.mark.parametrize("closed_by", ["StopExecution", "task timeout"])
def test_a_completion_for_a_task_that_is_already_closed_is_acknowledged(
    aws: Aws, clock: ManualClock, waiting_task: Callable[..., WaitingTask], sfn_spy: ClientSpy, closed_by: str
) -> None:
    # Given a registered task that was stopped, or timed out (after its hour), before the job finished
    task = waiting_task(timeout_seconds=3600)
    register(task.token)
    if closed_by == "StopExecution":
        task.stop()
    else:
        clock.armed()
        clock.advance(3600)
        assert task.wait_until_closed()["status"] == "FAILED"  # States.Timeout

    # When the job's completion arrives
    status = complete("COMPLETED")

    # Then the callback was attempted, the refusal is acknowledged (no exception, no retry) and the entry cleaned up
    assert status == "ALREADY_CLOSED"
    assert [call["taskToken"] for call in sfn_spy.calls_to("send_task_success")] == [task.token]
    assert aws.item(JOB_KEY) is None


def test_an_expired_registration_is_not_resumed(aws: Aws, sfn_spy: ClientSpy) -> None:
    # Given a registration past its expiry that DynamoDB's TTL has not deleted yet
    now = int(time.time())
    aws.table.put_item(Item={"jobKey": JOB_KEY, "token": "stale-token", "registeredAt": now - 90, "expiresAt": now - 1})

    # When the job completes
    status = complete("COMPLETED")

    # Then the stale token is not used: the completion is recorded for a registration still to come
    assert status == "RECORDED"
    assert sfn_spy.calls == []
    item = aws.item(JOB_KEY)
    assert item is not None
    assert "token" not in item
    assert "outcome" in item


@pytest.mark.parametrize("stale", ["token", "outcome"])
def test_an_expired_entry_is_replaced_by_a_new_registration(aws: Aws, sfn_spy: ClientSpy, stale: str) -> None:
    # Given an expired entry (a token or an early completion) that DynamoDB's TTL has not deleted yet
    now = int(time.time())
    stale_value = "stale-token" if stale == "token" else json.dumps(outcome("COMPLETED").to_item())
    aws.table.put_item(Item={"jobKey": JOB_KEY, stale: stale_value, "registeredAt": now - 90, "expiresAt": now - 1})

    # When a workflow registers a token for the job
    status = register("token-1")

    # Then the registration replaces it: no conflict, and no stale outcome delivered
    assert status == "REGISTERED"
    assert sfn_spy.calls == []
    item = aws.item(JOB_KEY)
    assert item is not None
    assert item["token"] == "token-1"
    assert item["expiresAt"] > now
    assert "outcome" not in item


# ----------------------------------------------------------------------------------------------------------------
# Translate statuses
# ----------------------------------------------------------------------------------------------------------------
def test_a_completed_job_resumes_the_workflow_with_the_event_detail(
    aws: Aws, waiting_task: Callable[..., WaitingTask], sfn_spy: ClientSpy
) -> None:
    # Given a workflow waiting for a Translate job
    task = waiting_task()
    register(task.token)
    event = translate_event("COMPLETED")

    # When the job's COMPLETED event arrives
    status = invoke("resume_job", event)["status"]

    # Then the task succeeds with the event detail plus service, job id and status as its output
    assert status == "RESUMED"
    execution = task.wait_until_closed()
    assert execution["status"] == "SUCCEEDED"
    assert json.loads(execution["output"]) == {
        **event["detail"],
        "service": "translate",
        "jobId": JOB_ID,
        "status": "COMPLETED",
    }
    assert len(sfn_spy.calls_to("send_task_success")) == 1


@pytest.mark.parametrize("job_status", UNSUCCESSFUL)
def test_an_unsuccessful_job_fails_the_task_with_an_error_named_after_the_status(
    aws: Aws, waiting_task: Callable[..., WaitingTask], sfn_spy: ClientSpy, job_status: str
) -> None:
    # Given a workflow waiting for a Translate job
    task = waiting_task()
    register(task.token)

    # When the job ends unsuccessfully
    status = complete(job_status)

    # Then the task fails with `Translate.<STATUS>` (what a Catch matches) and a cause naming the job
    assert status == "RESUMED"
    execution = task.wait_until_closed()
    assert (execution["status"], execution["error"]) == ("FAILED", f"Translate.{job_status}")
    # moto drops the cause from DescribeExecution (offline-cloud.md gap 7): read it from the call itself
    [failure] = sfn_spy.calls_to("send_task_failure")
    assert failure["error"] == f"Translate.{job_status}"
    assert JOB_ID in failure["cause"]
    assert job_status in failure["cause"]
    assert sfn_spy.calls_to("send_task_success") == []
    assert aws.item(JOB_KEY) is None


REASON = "No documents were found at the input S3 location s3://documents/incoming/."


@pytest.mark.parametrize("early", [False, True], ids=["registered-first", "completed-first"])
def test_a_failed_jobs_cause_carries_the_reason_the_service_gives(
    aws: Aws,
    waiting_task: Callable[..., WaitingTask],
    sfn_spy: ClientSpy,
    stubbed: Callable[[str], Stubber],
    early: bool,
) -> None:
    # Given a Translate job that failed (its event says only FAILED) and DescribeTextTranslationJob's Message
    stubbed("translate").add_response(
        "describe_text_translation_job", translate_job(JOB_ID, "FAILED", REASON), {"JobId": JOB_ID}
    )
    task = waiting_task()

    # When its completion and the registration arrive, in either order
    if early:
        assert complete("FAILED") == "RECORDED"
        assert register(task.token) == "RESUMED"
    else:
        assert register(task.token) == "REGISTERED"
        assert complete("FAILED") == "RESUMED"

    # Then SendTaskFailure's cause (what the workflow, and a client of the task API, sees) ends with that reason,
    # which was asked for once
    [failure] = sfn_spy.calls_to("send_task_failure")
    assert failure["error"] == "Translate.FAILED"
    assert failure["cause"] == f"translate job {JOB_ID} ended FAILED: {REASON}"
    stubbed("translate").assert_no_pending_responses()
    assert task.wait_until_closed()["status"] == "FAILED"


@pytest.mark.parametrize("job_status", NOT_TERMINAL)
def test_a_status_that_does_not_end_the_job_is_ignored(aws: Aws, job_status: str) -> None:
    # Given no registration for the job
    # When an event with a status that does not end the job arrives
    status = complete(job_status)

    # Then it is ignored and nothing is written
    assert status == "IGNORED"
    assert aws.items() == []


@pytest.mark.parametrize("job_status", NOT_TERMINAL)
def test_a_status_that_does_not_end_the_job_leaves_the_waiting_task_alone(
    aws: Aws, waiting_task: Callable[..., WaitingTask], sfn_spy: ClientSpy, job_status: str
) -> None:
    # Given a workflow waiting for a Translate job
    task = waiting_task()
    register(task.token)
    stored = aws.item(JOB_KEY)

    # When an event with a status that does not end the job arrives
    status = complete(job_status)

    # Then the task keeps waiting and its token stays registered
    assert status == "IGNORED"
    assert sfn_spy.calls == []
    assert task.status() == "RUNNING"
    assert aws.item(JOB_KEY) == stored


@pytest.mark.parametrize(
    ("source", "detail_type"),
    [
        ("aws.transcribe", "Transcribe Job State Change"),
        ("aws.translate", "Translate Parallel Data State Change"),
    ],
)
def test_an_event_no_adapter_knows_is_refused(aws: Aws, source: str, detail_type: str) -> None:
    # Given an event from a source or of a detail-type no adapter handles (a rule wider than the adapters)
    event = {**translate_event("COMPLETED"), "source": source, "detail-type": detail_type}

    # When it reaches the resume function
    with pytest.raises(UnknownJobEventError) as refused:
        invoke("resume_job", event)

    # Then it fails with a named error (the event goes to the on-failure destination), nothing written
    assert source in str(refused.value)
    assert aws.items() == []


# ----------------------------------------------------------------------------------------------------------------
# Logs
# ----------------------------------------------------------------------------------------------------------------
@pytest.fixture
def function_logs(aws: Aws) -> Iterator[io.StringIO]:
    """What the functions' Powertools logger writes (to stdout, i.e. CloudWatch Logs, on Lambda)."""
    handler = importlib.import_module("shared.observability").logger.registered_handler
    stream = io.StringIO()
    previous = handler.setStream(stream)
    try:
        yield stream
    finally:
        handler.setStream(previous)


def test_task_tokens_never_appear_in_the_logs(
    aws: Aws,
    waiting_task: Callable[..., WaitingTask],
    function_logs: io.StringIO,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given workflows going through every path that logs: registration, resume, duplicate, early completion,
    # conflict, a closed task, an invalid registration
    caplog.set_level(logging.INFO)
    errors: list[str] = []
    resumed, early, closed = waiting_task(), waiting_task(), waiting_task()
    tokens = [resumed.token, early.token, closed.token, "conflicting-token-0123456789"]

    # When they run
    register(resumed.token, "job-resumed")
    register(resumed.token, "job-resumed")
    complete("COMPLETED", "job-resumed")
    complete("FAILED", "job-early")
    register(early.token, "job-early")
    register(closed.token, "job-closed")
    closed.stop()
    try:
        register(tokens[3], "job-closed")
    except TokenConflictError as exc:
        errors.append(repr(exc))
    complete("COMPLETED", "job-closed")
    try:
        invoke("register_token", {"service": "translate", "taskToken": tokens[3]})
    except ValidationError as exc:
        errors.append(str(exc))

    # Then the logs refer to tokens only by their reference, and no token appears in clear anywhere
    captured = capsys.readouterr()
    function_records = [record for record in caplog.records if not record.name.startswith("moto")]
    logged = "\n".join(
        [function_logs.getvalue(), captured.out, captured.err, *errors]
        + [f"{record.getMessage()} {copy.copy(record.__dict__)}" for record in function_records]
    )
    token_ref = importlib.import_module("shared.observability").token_ref
    assert token_ref(resumed.token) in function_logs.getvalue()
    assert token_ref(closed.token) in function_logs.getvalue()
    assert "already closed" in function_logs.getvalue()
    for token in tokens:
        assert token not in logged


# ----------------------------------------------------------------------------------------------------------------
# Transient AWS errors never become a job's outcome
# ----------------------------------------------------------------------------------------------------------------
def functions_client(service: str) -> Any:
    """The functions' own (cached) client of a service: faults injected into it reach the handlers."""
    return importlib.import_module("shared.aws").client(service)


def token_table() -> Any:
    """The functions' own DynamoDB client behind the token table."""
    settings = importlib.import_module("shared.settings").callback_settings()
    return importlib.import_module("shared.aws").table(settings.token_table).meta.client


TRANSIENT = [
    ("ProvisionedThroughputExceededException", 400),
    ("ThrottlingException", 400),
    ("InternalServerError", 500),
    (CONNECTION_LOST, 0),
]


@pytest.mark.parametrize(("code", "status"), TRANSIENT, ids=[code for code, _ in TRANSIENT])
def test_a_registration_the_token_table_throttles_raises_transient_aws_error_and_stores_nothing(
    aws: Aws, waiting_task: Callable[..., WaitingTask], code: str, status: int
) -> None:
    # Given a waiting workflow, and the token table refusing the write (throttled, failing or unreachable)
    task = waiting_task()
    fault = fail(token_table(), "PutItem", code, status, times=1)

    # When the token is registered
    # Then the register function raises the named error the Task state's Retry matches, and nothing is stored
    with pytest.raises(TransientAwsError):
        register(task.token)
    assert fault.failed == 1
    assert aws.items() == []
    assert task.status() == "RUNNING"

    # And the Task state's retry registers, so the job's completion resumes the workflow
    assert register(task.token) == "REGISTERED"
    assert complete("COMPLETED") == "RESUMED"
    assert task.wait_until_closed()["status"] == "SUCCEEDED"


def test_an_early_completion_whose_delivery_is_throttled_is_delivered_by_the_retried_registration(
    aws: Aws, waiting_task: Callable[..., WaitingTask], sfn_spy: ClientSpy
) -> None:
    # Given a job that finished before its workflow registered, and SendTaskSuccess throttled once
    assert complete("COMPLETED") == "RECORDED"
    task = waiting_task()
    fail(functions_client("stepfunctions"), "SendTaskSuccess", times=1)

    # When the token is registered
    # Then the registration raises TransientAwsError: the recorded outcome is kept, the task still waits
    with pytest.raises(TransientAwsError):
        register(task.token)
    item = aws.item(JOB_KEY)
    assert item is not None and "outcome" in item
    assert task.status() == "RUNNING"
    assert sfn_spy.calls_to("send_task_failure") == []

    # And the Task state's retry delivers it
    assert register(task.token) == "RESUMED"
    assert task.wait_until_closed()["status"] == "SUCCEEDED"
    assert aws.items() == []


@pytest.mark.parametrize(
    ("operation", "code", "status"),
    [
        ("SendTaskSuccess", "ThrottlingException", 400),
        ("SendTaskSuccess", "ServiceUnavailable", 503),
        ("SendTaskSuccess", CONNECTION_LOST, 0),
        ("GetItem", "ProvisionedThroughputExceededException", 400),
        ("DeleteItem", "ThrottlingException", 400),
    ],
    ids=lambda value: str(value),
)
def test_a_completion_a_call_of_which_is_throttled_raises_transient_aws_error_and_is_delivered_on_retry(
    aws: Aws, waiting_task: Callable[..., WaitingTask], sfn_spy: ClientSpy, operation: str, code: str, status: int
) -> None:
    # Given a waiting workflow, and one of the resume function's calls throttled (or failing, or unreachable) once
    task = waiting_task()
    register(task.token)
    client = functions_client("stepfunctions") if operation.startswith("SendTask") else token_table()
    fail(client, operation, code, status, times=1)

    # When the job's completion event arrives
    # Then the resume function raises TransientAwsError (Lambda retries the event, then dead-letters it): the
    # workflow is never failed for it
    with pytest.raises(TransientAwsError):
        complete("COMPLETED")
    assert sfn_spy.calls_to("send_task_failure") == []
    if operation != "DeleteItem":  # a throttled clean-up comes after the workflow was resumed
        assert task.status() == "RUNNING"
        item = aws.item(JOB_KEY)
        assert item is not None and item["token"] == task.token

    # And Lambda's retry of the event resumes the workflow with the job's outcome (once)
    assert complete("COMPLETED") in {"RESUMED", "ALREADY_CLOSED"}
    assert task.wait_until_closed()["status"] == "SUCCEEDED"
    assert aws.items() == []
    assert sfn_spy.calls_to("send_task_failure") == []


@pytest.mark.parametrize("code", ["AccessDeniedException", "ValidationException"])
def test_an_error_that_a_retry_cannot_fix_is_not_called_transient(
    aws: Aws, waiting_task: Callable[..., WaitingTask], code: str
) -> None:
    # Given the token table refusing the write for good (permissions, a bad request)
    task = waiting_task()
    fail(token_table(), "PutItem", code, 400)

    # When the token is registered
    # Then the service's own error surfaces (the Task state's Retry does not match it)
    with pytest.raises(ClientError) as refused:
        register(task.token)
    assert refused.value.response["Error"]["Code"] == code


# ----------------------------------------------------------------------------------------------------------------
# A retried registration: Step Functions may hand the retry a new task token
# ----------------------------------------------------------------------------------------------------------------
WAITER = {
    "executionArn": "arn:aws:states:us-east-1:123456789012:execution:callback-kit-documents:run-1",
    "stateName": "WaitForTranslation",
    "stateEnteredTime": "2026-01-15T10:30:06.123Z",
    "retryCount": 0,
}
RETRY = {**WAITER, "retryCount": 1}  # the Task state's next attempt


def test_a_retried_registration_with_a_new_token_replaces_the_dead_one(
    aws: Aws, waiting_task: Callable[..., WaitingTask]
) -> None:
    # Given a registration whose Task state attempt failed after the token was stored (its token is dead), and the
    # state's retry, which brought a new token (two parked tasks stand for the two attempts' tokens)
    dead, retried = waiting_task(), waiting_task()
    assert register(dead.token, **WAITER) == "REGISTERED"

    # When the retry registers its new token from the same execution, state and state entry
    status = register(retried.token, **RETRY)

    # Then it replaces the dead token, and the job's completion resumes the retry's token
    assert status == "REGISTERED"
    item = aws.item(JOB_KEY)
    assert item is not None and item["token"] == retried.token
    assert complete("COMPLETED") == "RESUMED"
    assert retried.wait_until_closed()["status"] == "SUCCEEDED"
    assert dead.status() == "RUNNING"


def test_an_earlier_attempt_arriving_after_its_retry_never_replaces_the_retrys_token(
    aws: Aws, waiting_task: Callable[..., WaitingTask]
) -> None:
    # Given a retry's token registered (attempt 1), while its failed first attempt is still running somewhere
    dead, retried = waiting_task(), waiting_task()
    assert register(retried.token, **RETRY) == "REGISTERED"

    # When the first attempt's registration (attempt 0, its token dead) arrives last
    # Then it is refused, and the retry's live token stays: the completion resumes it
    with pytest.raises(TokenConflictError):
        register(dead.token, **WAITER)
    item = aws.item(JOB_KEY)
    assert item is not None and item["token"] == retried.token
    assert complete("COMPLETED") == "RESUMED"
    assert retried.wait_until_closed()["status"] == "SUCCEEDED"


@pytest.mark.parametrize(
    "other",
    [
        {"executionArn": WAITER["executionArn"].replace("run-1", "run-2")},  # another execution
        {"stateName": "WaitForClassification"},  # another state of the same execution
        {"stateEnteredTime": "2026-01-15T10:45:00.000Z"},  # the state entered again (a loop): another wait
        {"retryCount": 0},  # the same attempt with another token (not a retry)
    ],
    ids=["another-execution", "another-state", "another-entry", "same-attempt"],
)
def test_a_registration_from_another_waiter_never_replaces_the_token(
    aws: Aws, waiting_task: Callable[..., WaitingTask], other: dict[str, str]
) -> None:
    # Given a workflow's registered token
    first, second = waiting_task(), waiting_task()
    assert register(first.token, **WAITER) == "REGISTERED"

    # When another waiter registers a token for the same job
    # Then it is refused with TokenConflictError, and the first token stays
    with pytest.raises(TokenConflictError):
        register(second.token, **{**WAITER, **other})
    item = aws.item(JOB_KEY)
    assert item is not None and item["token"] == first.token
    assert complete("COMPLETED") == "RESUMED"
    assert first.wait_until_closed()["status"] == "SUCCEEDED"


# ----------------------------------------------------------------------------------------------------------------
# What the workflows and the template give the functions
# ----------------------------------------------------------------------------------------------------------------
def register_tasks() -> list[tuple[str, dict[str, Any]]]:
    """Every Task state of the state machines that invokes the register function, as (file:state, state)."""
    found = []
    for path in sorted((REPO / "statemachines").glob("*.asl.json")):
        pending = [json.loads(path.read_text())]
        while pending:
            machine = pending.pop()
            for name, state in machine["States"].items():
                pending.extend(state.get("Branches", []))
                if state.get("Parameters", {}).get("FunctionName") == "${RegisterTokenFunctionArn}":
                    found.append((f"{path.name}:{name}", state))
    return found


@pytest.mark.parametrize(("where", "state"), register_tasks(), ids=[where for where, _ in register_tasks()])
def test_every_register_task_names_its_waiter_and_retries_transient_errors_with_jitter(
    where: str, state: dict[str, Any]
) -> None:
    # Given a Task state that registers its token
    # Then it tells the register function which waiter it is (so a retry can replace its own dead token)
    payload = state["Parameters"]["Payload"]
    assert payload["executionArn.$"] == "$$.Execution.Id"
    assert payload["stateName.$"] == "$$.State.Name"
    assert payload["stateEnteredTime.$"] == "$$.State.EnteredTime"
    assert payload["retryCount.$"] == "$$.State.RetryCount"
    # and the HeartbeatSeconds it waits with, so the reconciler takes the jobs nearest their deadline first
    assert payload["heartbeatSeconds.$"] == state["HeartbeatSecondsPath"]
    # and it retries TransientAwsError and Lambda's own transient errors, backing off with a cap and full jitter
    retry = next(r for r in state["Retry"] if "TransientAwsError" in r["ErrorEquals"])
    assert {"Lambda.ServiceException", "Lambda.TooManyRequestsException"} <= set(retry["ErrorEquals"])
    assert retry["BackoffRate"] > 1
    assert retry["MaxDelaySeconds"] > 0
    assert retry["JitterStrategy"] == "FULL"


def test_the_reconciler_is_not_retried_by_lambda_but_its_failures_reach_the_destination() -> None:
    properties = template()["Resources"]["ReconcileJobsFunction"]["Properties"]
    assert properties["EventInvokeConfig"]["MaximumRetryAttempts"] == 0
    assert properties["EventInvokeConfig"]["DestinationConfig"]["OnFailure"]["Type"] == "SQS"


def test_the_resume_function_may_describe_classification_jobs_and_nothing_more_of_macie() -> None:
    statements = [
        statement["Fn::If"][1] if "Fn::If" in statement else statement  # a grant under a condition, as if it held
        for policy in template()["Resources"]["ResumeJobFunction"]["Properties"]["Policies"]
        if isinstance(policy, dict) and "Statement" in policy
        for statement in policy["Statement"]
    ]
    macie = [s["Action"] for s in statements if "macie2" in str(s["Action"])]
    assert macie == ["macie2:DescribeClassificationJob"]
