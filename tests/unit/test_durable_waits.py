"""A Lambda durable function's wait, closed through the same path as a Step Functions task's: the durable function
registers its callback id under the job id (in-process, as shared.documents.durable's submitters do), and the job's
completion event, the reconciler or a late registration closes it with SendDurableExecutionCallbackSuccess/Failure,
keeps it alive with SendDurableExecutionCallbackHeartbeat, and acknowledges one already closed.

The functions' Lambda client answers through botocore Stubber (validated against Lambda's model), each call expected
with its parameters; the Step Functions client records its calls (`sfn_spy`), so a durable wait that went the task
token's way would show. The handlers and shared.callback.service are imported inside the tests (see conftest.py).
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from tests.unit.payloads import registration, translate_job
from tests.unit.support import ACCOUNT, EVENTS, REGION, Aws, ClientSpy, backdate_registration, invoke
from tests.unit.waiting import WaitingTask

JOB_ID = "8882c5390a2c0bd2d6ddba2f5b5faa9d"
JOB_KEY = f"translate#{JOB_ID}"
# An opaque callback id, as Lambda hands a durable execution's `wait_for_callback` submitter (Lambda's pattern for
# one: [A-Za-z0-9+/]+={0,2})
CALLBACK_ID = "eyJleGVjdXRpb25Bcm4iOiJhcm46YXdzOmxhbWJkYSJ9Y2FsbGJhY2stMQ+/w=="
EXECUTION_ARN = (
    f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:callback-kit-documents-durable:$LATEST"
    "/durable-execution/documents-2026-11-26/4f0d2b8e-1c3a-4e5f-9a7b-6c8d0e2f4a61"
)
HEARTBEAT_SECONDS = 900
SCHEDULE = json.loads((EVENTS / "reconcile_jobs.schedule.json").read_text())
NOTHING = {"RESUMED": 0, "HEARTBEAT": 0, "CLOSED": 0, "UNCONFIRMED": 0, "DEFERRED": 0}

pytestmark = pytest.mark.usefixtures("jobs_of_this_stack", "translate_described_one_by_one")


class JsonOf:
    """Matches a JSON document (str or bytes) equal to `expected` once parsed: a Stubber expected parameter."""

    def __init__(self, expected: Any) -> None:
        self.expected = expected

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str | bytes) and json.loads(other) == self.expected

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(json.dumps(self.expected, sort_keys=True))

    def __repr__(self) -> str:
        return f"JsonOf({self.expected!r})"


def translate_event(status: str) -> dict[str, Any]:
    """A Translate job state-change event (the events/ sample, with this status)."""
    event = json.loads((EVENTS / "resume_job.translate-completed.json").read_text())
    event["detail"] = {**event["detail"], "jobId": JOB_ID, "jobStatus": status}
    return dict(event)


def complete(status: str) -> str:
    """The job's completion event, as the rule delivers it to the resume function."""
    return str(invoke("resume_job", translate_event(status))["status"])


def register_durable(callback_id: str = CALLBACK_ID) -> str:
    """What a durable function's submitter does once it started its job: register the callback id in-process."""
    service = importlib.import_module("shared.callback.service")
    tokens = importlib.import_module("shared.callback.tokens")
    waits = importlib.import_module("shared.waits")
    entered = "2026-11-26T10:30:05.120+00:00"
    waiter = tokens.Waiter(EXECUTION_ARN, "translate", entered, 0, HEARTBEAT_SECONDS, waits.Kind.CALLBACK_ID)
    return str(service.callbacks().register("translate", JOB_ID, callback_id, waiter).value)


def output_of(status: str) -> dict[str, Any]:
    """What the wait is resumed with: the job's details plus the service, job id and status (a task's output)."""
    return {**translate_event(status)["detail"], "service": "translate", "jobId": JOB_ID, "status": status}


def expect_success(lambda_: Stubber, output: dict[str, Any]) -> None:
    params = {"CallbackId": CALLBACK_ID, "Result": JsonOf(output)}
    lambda_.add_response("send_durable_execution_callback_success", {}, params)


def reconcile(aws: Aws) -> dict[str, int]:
    """One scheduled run of the reconcile function, the registration having waited longer than its threshold."""
    backdate_registration(aws, JOB_KEY, int(aws.environment["RECONCILE_AFTER_SECONDS"]) + 120)
    return dict(invoke("reconcile_jobs", SCHEDULE))


def describe_translation(stubbed: Callable[[str], Stubber], status: str, message: str | None = None) -> None:
    stubbed("translate").add_response(
        "describe_text_translation_job", translate_job(JOB_ID, status, message), {"JobId": JOB_ID}
    )


# ----------------------------------------------------------------------------------------------------------------
# The job's completion event closes the durable wait
# ----------------------------------------------------------------------------------------------------------------
def test_a_completion_event_closes_a_durable_wait_with_the_jobs_outcome(
    aws: Aws, stubbed: Callable[[str], Stubber], sfn_spy: ClientSpy
) -> None:
    # Given a durable execution waiting on a callback for a Translate job
    assert register_durable() == "REGISTERED"
    lambda_ = stubbed("lambda")
    expect_success(lambda_, output_of("COMPLETED"))

    # When the job's completion event reaches the resume function
    status = complete("COMPLETED")

    # Then the callback succeeds with the outcome a task would get as its output, once, and the entry is gone
    assert status == "RESUMED"
    lambda_.assert_no_pending_responses()
    assert sfn_spy.calls == []
    assert aws.item(JOB_KEY) is None


def test_a_failure_event_fails_the_durable_wait_with_the_error_a_catch_would_match(
    aws: Aws, stubbed: Callable[[str], Stubber], sfn_spy: ClientSpy
) -> None:
    # Given a durable execution waiting for a Translate job, which fails (its reason from DescribeTextTranslationJob)
    assert register_durable() == "REGISTERED"
    describe_translation(stubbed, "FAILED", "Unable to read the input.")
    lambda_ = stubbed("lambda")
    cause = f"translate job {JOB_ID} ended FAILED: Unable to read the input."
    error = {"ErrorType": "Translate.FAILED", "ErrorMessage": f"Translate.FAILED: {cause}"}
    lambda_.add_response("send_durable_execution_callback_failure", {}, {"CallbackId": CALLBACK_ID, "Error": error})

    # When the job's failure event reaches the resume function
    status = complete("FAILED")

    # Then the callback fails with ErrorType Translate.FAILED, its message opening with it too (the durable SDK
    # hands the function the message alone), and the entry is gone
    assert status == "RESUMED"
    lambda_.assert_no_pending_responses()
    assert sfn_spy.calls == []
    assert aws.item(JOB_KEY) is None


def test_a_completion_recorded_before_the_durable_registration_closes_the_callback_at_registration(
    aws: Aws, stubbed: Callable[[str], Stubber], sfn_spy: ClientSpy
) -> None:
    # Given a job that finished before its durable function registered the callback (the early-completion race)
    assert complete("COMPLETED") == "RECORDED"
    item = aws.item(JOB_KEY)
    assert item is not None and "outcome" in item
    lambda_ = stubbed("lambda")
    expect_success(lambda_, output_of("COMPLETED"))

    # When the submitter registers the callback id
    status = register_durable()

    # Then the registration closes the callback at once with the recorded outcome, and the outcome is deleted
    assert status == "RESUMED"
    lambda_.assert_no_pending_responses()
    assert sfn_spy.calls == []
    assert aws.items() == []


@pytest.mark.parametrize("code", ["CallbackTimeoutException", "ResourceNotFoundException"])
def test_a_durable_callback_already_closed_is_acknowledged_and_its_entry_removed(
    aws: Aws, stubbed: Callable[[str], Stubber], code: str
) -> None:
    # Given a durable wait whose callback timed out, or whose execution is gone, before its job's event came
    assert register_durable() == "REGISTERED"
    stubbed("lambda").add_client_error(
        "send_durable_execution_callback_success",
        code,
        f"{code} (stubbed)",
        400 if code == "CallbackTimeoutException" else 404,
        expected_params={"CallbackId": CALLBACK_ID, "Result": JsonOf(output_of("COMPLETED"))},
    )

    # When the job's completion event arrives
    status = complete("COMPLETED")

    # Then it is acknowledged (no error, so no retry and no dead letter), and the entry is removed
    assert status == "ALREADY_CLOSED"
    stubbed("lambda").assert_no_pending_responses()
    assert aws.item(JOB_KEY) is None


def test_a_durable_callback_refused_for_another_reason_fails_the_delivery_and_keeps_the_entry(
    aws: Aws, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a durable wait whose callback Lambda refuses as invalid (not as closed)
    assert register_durable() == "REGISTERED"
    stored = aws.item(JOB_KEY)
    stubbed("lambda").add_client_error(
        "send_durable_execution_callback_success",
        "InvalidParameterValueException",
        "The callback id is not valid.",
        400,
        expected_params={"CallbackId": CALLBACK_ID, "Result": JsonOf(output_of("COMPLETED"))},
    )

    # When the job's completion event arrives
    with pytest.raises(ClientError) as refused:
        complete("COMPLETED")

    # Then the error is not swallowed (the invocation fails, its retries and dead letter follow), and the entry stays
    assert refused.value.response["Error"]["Code"] == "InvalidParameterValueException"
    assert aws.item(JOB_KEY) == stored


# ----------------------------------------------------------------------------------------------------------------
# The reconciler
# ----------------------------------------------------------------------------------------------------------------
def test_the_reconciler_sends_a_durable_heartbeat_for_a_job_still_running(
    aws: Aws, stubbed: Callable[[str], Stubber], sfn_spy: ClientSpy
) -> None:
    # Given a durable wait, longer than the threshold, for a translation job that still runs
    assert register_durable() == "REGISTERED"
    describe_translation(stubbed, "IN_PROGRESS")
    lambda_ = stubbed("lambda")
    lambda_.add_response("send_durable_execution_callback_heartbeat", {}, {"CallbackId": CALLBACK_ID})

    # When the reconciler runs
    before = int(time.time())
    result = reconcile(aws)

    # Then the callback gets SendDurableExecutionCallbackHeartbeat (not SendTaskHeartbeat), and the entry notes when
    assert result == {**NOTHING, "HEARTBEAT": 1}
    lambda_.assert_no_pending_responses()
    assert sfn_spy.calls == []
    item = aws.item(JOB_KEY)
    assert item is not None and item["token"] == CALLBACK_ID
    assert before <= int(item["heartbeatAt"]) <= time.time()


@pytest.mark.parametrize("code", ["CallbackTimeoutException", "ResourceNotFoundException"])
def test_the_reconciler_forgets_a_durable_wait_whose_callback_is_closed(
    aws: Aws, stubbed: Callable[[str], Stubber], sfn_spy: ClientSpy, code: str
) -> None:
    # Given a durable wait whose callback timed out (or whose execution is gone) while its job still runs
    assert register_durable() == "REGISTERED"
    describe_translation(stubbed, "IN_PROGRESS")
    stubbed("lambda").add_client_error(
        "send_durable_execution_callback_heartbeat",
        code,
        f"{code} (stubbed)",
        400 if code == "CallbackTimeoutException" else 404,
        expected_params={"CallbackId": CALLBACK_ID},
    )

    # When the reconciler runs
    result = reconcile(aws)

    # Then the heartbeat's refusal says the wait is closed, and its entry is removed
    assert result == {**NOTHING, "CLOSED": 1}
    stubbed("lambda").assert_no_pending_responses()
    assert sfn_spy.calls == []
    assert aws.item(JOB_KEY) is None


def test_the_reconciler_resumes_a_durable_wait_whose_job_finished_through_the_durable_call(
    aws: Aws, stubbed: Callable[[str], Stubber], sfn_spy: ClientSpy
) -> None:
    # Given a durable wait for a translation job that finished, its event lost
    assert register_durable() == "REGISTERED"
    described = translate_job(JOB_ID, "COMPLETED")["TextTranslationJobProperties"]
    describe_translation(stubbed, "COMPLETED")
    lambda_ = stubbed("lambda")
    described = json.loads(json.dumps(described, default=str))  # its times as the outcome carries them
    expect_success(lambda_, {**described, "service": "translate", "jobId": JOB_ID, "status": "COMPLETED"})

    # When the reconciler runs
    result = reconcile(aws)

    # Then the callback succeeds with the job's described outcome, and the entry is gone
    assert result == {**NOTHING, "RESUMED": 1}
    lambda_.assert_no_pending_responses()
    assert sfn_spy.calls == []
    assert aws.item(JOB_KEY) is None


# ----------------------------------------------------------------------------------------------------------------
# What the token table holds
# ----------------------------------------------------------------------------------------------------------------
def test_a_durable_registration_is_stored_with_its_kind(aws: Aws) -> None:
    # When a durable function registers its callback id
    assert register_durable() == "REGISTERED"

    # Then the item says it holds a callback id, and names the execution, the callback and its heartbeat
    item = aws.item(JOB_KEY)
    assert item is not None
    assert (item["token"], item["waiterKind"]) == (CALLBACK_ID, "callbackId")
    assert (item["executionArn"], item["stateName"], item["heartbeatSeconds"]) == (
        EXECUTION_ARN,
        "translate",
        HEARTBEAT_SECONDS,
    )


def test_an_item_written_before_items_carried_their_kind_is_a_task_tokens(
    aws: Aws, waiting_task: Callable[..., WaitingTask], stubbed: Callable[[str], Stubber], sfn_spy: ClientSpy
) -> None:
    # Given a task's registration as the previous release wrote it: without waiterKind
    task = waiting_task()
    assert invoke("register_token", registration("translate", JOB_ID, task.token)) == {"status": "REGISTERED"}
    aws.table.update_item(Key={"jobKey": JOB_KEY}, UpdateExpression="REMOVE waiterKind")
    item = aws.item(JOB_KEY)
    assert item is not None and "waiterKind" not in item
    lambda_ = stubbed("lambda")  # any call on it would fail: nothing is queued

    # When its job's completion event arrives
    status = complete("COMPLETED")

    # Then the task is resumed with SendTaskSuccess, as before, and no durable call is made
    assert status == "RESUMED"
    assert [call["taskToken"] for call in sfn_spy.calls_to("send_task_success")] == [task.token]
    assert task.wait_until_closed()["status"] == "SUCCEEDED"
    lambda_.assert_no_pending_responses()
    assert aws.item(JOB_KEY) is None
