"""statemachines/extract-document.asl.json, state by state: the permit of the account's BDA job quota, the job's
start and the wait for its completion event, the result's location, the permit given back on every path."""

from __future__ import annotations

import pytest

from tests.statemachines.conftest import (
    LAMBDA_INVOKE_BACKOFFS,
    LAMBDA_INVOKE_ERRORS,
    StateCaller,
    caught,
    output,
    retried,
)

MACHINE = "extract-document"
CONFIG = {
    "maxConcurrentJobs": 5,
    "permitWaitSeconds": 900,
    "permitHeartbeatSeconds": 120,
    "taskTimeoutSeconds": 86400,
    "heartbeatSeconds": 3600,
}
DOCUMENT = {
    "document": "docs/in/invoice.pdf",
    "outputPrefix": "extract/batch-1",
    "projectArn": "arn:aws:bedrock:us-east-1:aws:data-automation-project/public-default",
    "profileArn": "arn:aws:bedrock:us-east-1:123456789012:data-automation-profile/us.data-automation-v1",
    "config": CONFIG,
}
INVOCATION = "arn:aws:bedrock:us-east-1:123456789012:data-automation-invocation/4f7c2d9e"
WAITING = {**DOCUMENT, "job": {"invocationArn": INVOCATION, "jobId": "4f7c2d9e"}}
REGISTRATION_ERRORS = [
    "TransientAwsError",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
    "Lambda.Unknown",
    "Runtime.ExitError",
    "Sandbox.Timedout",
]


# --- the permit -------------------------------------------------------------------------------------------------------
def test_a_granted_permit_starts_the_extraction(teststate: StateCaller) -> None:
    answer = teststate(MACHINE, "AcquirePermit", DOCUMENT, result={"resource": "bda:us-east-1", "position": 1})
    assert (answer["status"], answer["nextState"], output(answer)) == ("SUCCEEDED", "StartExtraction", DOCUMENT)


@pytest.mark.parametrize("error", LAMBDA_INVOKE_ERRORS)
def test_a_failed_acquire_call_is_retried_then_gives_the_place_back(teststate: StateCaller, error: str) -> None:
    spent = retried(teststate, MACHINE, "AcquirePermit", DOCUMENT, error, LAMBDA_INVOKE_BACKOFFS, jitter=True)
    assert caught(spent) == ("CAUGHT_ERROR", "GiveUpPermit", error)


@pytest.mark.parametrize("error", ["States.Timeout", "States.HeartbeatTimeout"])
def test_no_permit_in_time_gives_the_place_back(teststate: StateCaller, error: str) -> None:
    answer = teststate(MACHINE, "AcquirePermit", DOCUMENT, error=error)
    assert caught(answer) == ("CAUGHT_ERROR", "GiveUpPermit", error)


# --- the job's start --------------------------------------------------------------------------------------------------
def test_a_started_job_is_waited_for_by_its_id(teststate: StateCaller) -> None:
    # When BDA answers InvokeDataAutomationAsync (checked against its API: STRICT)
    answer = teststate(MACHINE, "StartExtraction", DOCUMENT, result={"InvocationArn": INVOCATION})
    # Then the job id is the invocation ARN's last part, and the wait comes next
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", "WaitForExtraction")
    assert output(answer)["job"] == {"invocationArn": INVOCATION, "jobId": "4f7c2d9e"}


@pytest.mark.parametrize(
    "error",
    [
        "BedrockDataAutomationRuntime.ServiceQuotaExceededException",
        "BedrockDataAutomationRuntime.ThrottlingException",
        "BedrockDataAutomationRuntime.InternalServerException",
    ],
)
def test_a_start_over_the_quota_is_retried_five_times_then_gives_the_permit_back(
    teststate: StateCaller, error: str
) -> None:
    spent = retried(teststate, MACHINE, "StartExtraction", DOCUMENT, error, [5, 10, 20, 40, 80])
    assert caught(spent) == ("CAUGHT_ERROR", "GiveUpPermit", error)


def test_a_refused_start_gives_the_permit_back_at_once(teststate: StateCaller) -> None:
    error = "BedrockDataAutomationRuntime.ValidationException"
    answer = teststate(MACHINE, "StartExtraction", DOCUMENT, error=error)
    assert caught(answer) == ("CAUGHT_ERROR", "GiveUpPermit", error)


# --- the wait for the job's completion --------------------------------------------------------------------------------
def test_the_jobs_completion_gives_the_permit_back_then_reads_the_output(teststate: StateCaller) -> None:
    answer = teststate(MACHINE, "WaitForExtraction", WAITING, result={"jobId": "4f7c2d9e", "status": "Success"})
    assert (answer["status"], answer["nextState"], output(answer)) == ("SUCCEEDED", "ReleasePermit", WAITING)


@pytest.mark.parametrize("error", REGISTRATION_ERRORS)
def test_a_failed_registration_is_registered_again_then_gives_the_permit_back(
    teststate: StateCaller, error: str
) -> None:
    spent = retried(teststate, MACHINE, "WaitForExtraction", WAITING, error, [1, 2, 4, 8, 16, 30], jitter=True)
    assert caught(spent) == ("CAUGHT_ERROR", "GiveUpPermit", error)
    assert spent["inspectionData"]["errorDetails"]["catchIndex"] == 1  # the States.ALL catcher


@pytest.mark.parametrize("error", ["States.Timeout", "States.HeartbeatTimeout"])
def test_a_wait_that_runs_out_is_the_jobs_timeout(teststate: StateCaller, error: str) -> None:
    answer = teststate(MACHINE, "WaitForExtraction", WAITING, error=error)
    assert caught(answer) == ("CAUGHT_ERROR", "ExtractionTimedOut", error)
    assert answer["inspectionData"]["errorDetails"] == {"catchIndex": 0}


def test_the_jobs_own_failure_gives_the_permit_back_without_a_retry(teststate: StateCaller) -> None:
    answer = teststate(MACHINE, "WaitForExtraction", WAITING, error="BedrockDataAutomation.FAILED")
    assert caught(answer) == ("CAUGHT_ERROR", "GiveUpPermit", "BedrockDataAutomation.FAILED")
    assert answer["inspectionData"]["errorDetails"] == {"catchIndex": 1}


# --- the result, and the permit given back ----------------------------------------------------------------------------
def test_the_results_location_is_the_documents_result(teststate: StateCaller) -> None:
    # When BDA answers GetDataAutomationStatus (STRICT)
    status = {"Status": "Success", "OutputConfiguration": {"S3Uri": "s3://documents/extract/batch-1/job_metadata.json"}}
    answer = teststate(MACHINE, "LocateOutput", WAITING, result=status)
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", "Extracted")
    assert output(answer)["result"] == {"output": "s3://documents/extract/batch-1/job_metadata.json"}


@pytest.mark.parametrize(
    "error",
    ["BedrockDataAutomationRuntime.ThrottlingException", "BedrockDataAutomationRuntime.InternalServerException"],
)
def test_a_result_that_cannot_be_read_is_the_documents_failure(teststate: StateCaller, error: str) -> None:
    spent = retried(teststate, MACHINE, "LocateOutput", WAITING, error, [1, 2, 4, 8, 16])
    assert caught(spent) == ("CAUGHT_ERROR", "NotExtracted", error)


@pytest.mark.parametrize(("state", "then"), [("ReleasePermit", "LocateOutput"), ("GiveUpPermit", "NotExtracted")])
def test_giving_the_permit_back_is_retried_five_times_whatever_fails(
    teststate: StateCaller, state: str, then: str
) -> None:
    released = teststate(MACHINE, state, WAITING, result={"StatusCode": 200})
    assert (released["status"], released["nextState"], output(released)) == ("SUCCEEDED", then, WAITING)
    spent = retried(teststate, MACHINE, state, WAITING, "Sandbox.Timedout", [1, 2, 4, 8, 16])
    assert caught(spent) == ("FAILED", "", "Sandbox.Timedout")
