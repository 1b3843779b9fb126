"""statemachines/documents.asl.json, state by state: Macie's check, then per branch (Translate, Macie) the job's
start, the progress entry and the wait for the job's completion event; the Parallel state and the failure's naming."""

from __future__ import annotations

from typing import Any

import pytest

from tests.statemachines.conftest import (
    LAMBDA_INVOKE_BACKOFFS,
    LAMBDA_INVOKE_ERRORS,
    StateCaller,
    caught,
    inspected,
    output,
    retried,
)

MACHINE = "documents"
CONFIG = {"taskTimeoutSeconds": 86400, "heartbeatSeconds": 3600}
REQUEST = {
    "inputPrefix": "docs/in/",
    "outputPrefix": "docs/out/",
    "sourceLanguage": "en",
    "targetLanguages": ["es"],
    "config": CONFIG,
}
TASK = {"id": "5b1f6a52-task", "expiresAt": 1924992000}  # an execution the task API started carries its task
# What a registration's failure may be: the register function's own TransientAwsError, Lambda's service errors, the
# function crashing or timing out. Retried, with IntervalSeconds 1, BackoffRate 2, MaxDelaySeconds 30, jittered.
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


class Branch:
    """One branch of TranslateAndClassify: its states and what its job's service answers."""

    def __init__(self, name: str, job: str, started: dict[str, Any], start_errors: list[str], timed_out: str) -> None:
        self.name, self.key = name, name.lower()
        self.start, self.choose = f"Start{name}", f"IsTaskWaitingFor{name}"
        self.log, self.wait, self.timed_out = f"LogWaitingFor{name}", f"WaitFor{name}", timed_out
        self.job, self.started, self.start_errors = job, started, start_errors
        self.waiting = {**REQUEST, self.key: {"jobId": job}}


TRANSLATION = Branch(
    "Translation",
    job="d2a6e0ba1c3b4c5d",
    started={"JobId": "d2a6e0ba1c3b4c5d", "JobStatus": "SUBMITTED"},  # StartTextTranslationJob's answer
    start_errors=["Translate.TooManyRequestsException", "Translate.InternalServerException"],
    timed_out="TranslationTimedOut",
)
CLASSIFICATION = Branch(
    "Classification",
    job="7f1e2d3c4b5a69788",
    started={  # CreateClassificationJob's answer
        "JobId": "7f1e2d3c4b5a69788",
        "JobArn": "arn:aws:macie2:us-east-1:123456789012:classification-job/7f1e2d3c4b5a69788",
    },
    start_errors=["Macie2.ThrottlingException", "Macie2.InternalServerException"],
    timed_out="ClassificationTimedOut",
)
BRANCHES = [pytest.param(TRANSLATION, id="translation"), pytest.param(CLASSIFICATION, id="classification")]
# Both jobs done: what the tagging states see
JOBS_DONE = {
    **REQUEST,
    "jobs": {"translation": {"jobId": TRANSLATION.job}, "classification": {"jobId": CLASSIFICATION.job}},
}


# --- Macie's check ----------------------------------------------------------------------------------------------------
def test_macies_session_status_is_kept_for_the_choice(teststate: StateCaller) -> None:
    # When GetMacieSession answers ENABLED
    answer = teststate(MACHINE, "CheckMacie", REQUEST, result={"Status": "ENABLED"})
    # Then its status is kept at $.macie and IsMacieEnabled decides
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", "IsMacieEnabled")
    assert output(answer)["macie"] == {"status": "ENABLED"}


@pytest.mark.parametrize("error", ["Macie2.ThrottlingException", "Macie2.InternalServerException"])
def test_a_throttled_macie_check_is_retried_three_times_then_fails(teststate: StateCaller, error: str) -> None:
    spent = retried(teststate, MACHINE, "CheckMacie", REQUEST, error, [2, 4, 8])
    assert caught(spent) == ("FAILED", "", error)


def test_macie_off_ends_in_macie_not_enabled_without_a_retry(teststate: StateCaller) -> None:
    # When Macie refuses the check (Macie off: AccessDeniedException)
    answer = teststate(MACHINE, "CheckMacie", REQUEST, error="Macie2.AccessDeniedException")
    # Then it is caught at once into MacieNotEnabled, the error at $.macie
    assert caught(answer) == ("CAUGHT_ERROR", "MacieNotEnabled", "Macie2.AccessDeniedException")
    assert output(answer)["macie"]["Error"] == "Macie2.AccessDeniedException"


@pytest.mark.parametrize(("status", "then"), [("ENABLED", "TranslateAndClassify"), ("PAUSED", "MacieNotEnabled")])
def test_only_an_enabled_macie_starts_the_jobs(teststate: StateCaller, status: str, then: str) -> None:
    answer = teststate(MACHINE, "IsMacieEnabled", {**REQUEST, "macie": {"status": status}})
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", then)


# --- each branch: the job's start -------------------------------------------------------------------------------------
@pytest.mark.parametrize("branch", BRANCHES)
def test_a_started_jobs_id_is_kept_for_its_wait(teststate: StateCaller, branch: Branch) -> None:
    # When the service answers the start (checked against its API: STRICT)
    answer = teststate(MACHINE, branch.start, REQUEST, result=branch.started)
    # Then the job id is kept, and the progress choice comes next
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", branch.choose)
    assert output(answer)[branch.key] == {"jobId": branch.job}


@pytest.mark.parametrize("branch", BRANCHES)
def test_a_throttled_job_start_is_retried_three_times_then_fails_the_branch(
    teststate: StateCaller, branch: Branch
) -> None:
    for error in branch.start_errors:
        spent = retried(teststate, MACHINE, branch.start, REQUEST, error, [2, 4, 8])
        assert caught(spent) == ("FAILED", "", error)  # the Parallel state's Catch takes it


# --- each branch: the progress entry ----------------------------------------------------------------------------------
@pytest.mark.parametrize("branch", BRANCHES)
def test_progress_is_logged_only_for_the_task_apis_executions(teststate: StateCaller, branch: Branch) -> None:
    with_task = teststate(MACHINE, branch.choose, {**branch.waiting, "task": TASK})
    direct = teststate(MACHINE, branch.choose, branch.waiting)
    assert (with_task["nextState"], direct["nextState"]) == (branch.log, branch.wait)


@pytest.mark.parametrize("branch", BRANCHES)
def test_a_progress_entry_that_cannot_be_written_never_stops_the_wait(teststate: StateCaller, branch: Branch) -> None:
    logging = {**branch.waiting, "task": TASK}
    # When the entry is written (PutItem's answer), throttled until its retries are spent, or refused
    written = teststate(MACHINE, branch.log, logging, result={})
    throttled = retried(
        teststate, MACHINE, branch.log, logging, "DynamoDB.ProvisionedThroughputExceededException", [1, 2, 4]
    )
    refused = teststate(MACHINE, branch.log, logging, error="DynamoDB.ConditionalCheckFailedException")
    # Then each way the wait comes next, with the state's input unchanged
    assert (written["status"], written["nextState"], output(written)) == ("SUCCEEDED", branch.wait, logging)
    for answer in (throttled, refused):
        assert (answer["status"], answer["nextState"], output(answer)) == ("CAUGHT_ERROR", branch.wait, logging)


# --- each branch: the wait for the job's completion -------------------------------------------------------------------
@pytest.mark.parametrize("branch", BRANCHES)
def test_the_wait_registers_the_token_and_ends_with_the_jobs_outcome(teststate: StateCaller, branch: Branch) -> None:
    # When the resume function sends the job's outcome (SendTaskSuccess: the callback's outcome)
    outcome = {"jobId": branch.job, "status": "COMPLETED", "service": branch.key}
    answer = teststate(MACHINE, branch.wait, branch.waiting, result=outcome)
    # Then the branch ends with the job's id and status
    assert answer["status"] == "SUCCEEDED" and "nextState" not in answer
    assert output(answer) == {"jobId": branch.job, "status": "COMPLETED"}
    # And the registration carried the job and the task's token
    registration = inspected(answer, "afterParameters")["Payload"]
    assert (registration["jobId"], registration["heartbeatSeconds"]) == (branch.job, CONFIG["heartbeatSeconds"])
    assert isinstance(registration["taskToken"], str) and registration["taskToken"]


@pytest.mark.parametrize("branch", BRANCHES)
@pytest.mark.parametrize("error", REGISTRATION_ERRORS)
def test_a_failed_registration_is_registered_again(teststate: StateCaller, branch: Branch, error: str) -> None:
    first = teststate(MACHINE, branch.wait, branch.waiting, error=error)
    spent = teststate(MACHINE, branch.wait, branch.waiting, error=error, retries=len(LAMBDA_INVOKE_BACKOFFS))
    assert first["status"] == "RETRIABLE"
    assert caught(spent) == ("FAILED", "", error)


@pytest.mark.parametrize("branch", BRANCHES)
def test_registration_retries_back_off_to_thirty_seconds(teststate: StateCaller, branch: Branch) -> None:
    error = "Lambda.TooManyRequestsException"
    spent = retried(teststate, MACHINE, branch.wait, branch.waiting, error, LAMBDA_INVOKE_BACKOFFS, jitter=True)
    assert caught(spent) == ("FAILED", "", error)


@pytest.mark.parametrize("branch", BRANCHES)
@pytest.mark.parametrize("error", ["States.Timeout", "States.HeartbeatTimeout"])
def test_a_wait_that_runs_out_is_the_jobs_timeout(teststate: StateCaller, branch: Branch, error: str) -> None:
    # When the wait's TimeoutSeconds, or its HeartbeatSeconds, runs out
    answer = teststate(MACHINE, branch.wait, branch.waiting, error=error)
    # Then it is not retried, and the branch fails as the job's timeout
    assert caught(answer) == ("CAUGHT_ERROR", branch.timed_out, error)
    assert output(answer)["error"] == {"Error": error, "Cause": f"mocked {error}"}
    assert "retryIndex" not in answer["inspectionData"]["errorDetails"]


@pytest.mark.parametrize("branch", BRANCHES)
def test_the_jobs_own_failure_is_never_retried(teststate: StateCaller, branch: Branch) -> None:
    # When the resume function reports the job failed (SendTaskFailure with the service's error)
    error = f"{branch.name}.FAILED"
    answer = teststate(MACHINE, branch.wait, branch.waiting, error=error)
    # Then the branch fails with it at once: no Retry or Catch of the wait takes it
    assert caught(answer) == ("FAILED", "", error)
    assert "errorDetails" not in answer["inspectionData"]


# --- both branches, and the failure's name ----------------------------------------------------------------------------
def test_both_jobs_outcomes_go_on_to_tagging(teststate: StateCaller) -> None:
    results = [
        {"jobId": TRANSLATION.job, "status": "COMPLETED"},
        {"jobId": CLASSIFICATION.job, "status": "COMPLETE"},
    ]
    answer = teststate(MACHINE, "TranslateAndClassify", REQUEST, result=results)
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", "IsTaskTagging")
    assert output(answer)["jobs"] == {"translation": results[0], "classification": results[1]}


def test_tagging_is_logged_only_for_the_task_apis_executions(teststate: StateCaller) -> None:
    with_task = teststate(MACHINE, "IsTaskTagging", {**JOBS_DONE, "task": TASK})
    direct = teststate(MACHINE, "IsTaskTagging", JOBS_DONE)
    assert (with_task["nextState"], direct["nextState"]) == ("LogTagging", "TagDocuments")


@pytest.mark.parametrize(
    "error", ["DynamoDB.ProvisionedThroughputExceededException", "DynamoDB.InternalServerErrorException"]
)
def test_a_tagging_entry_that_cannot_be_written_never_stops_the_tagging(teststate: StateCaller, error: str) -> None:
    logging = {**JOBS_DONE, "task": TASK}
    # When the entry is written (PutItem's answer), throttled or failing until its retries are spent, or refused
    written = teststate(MACHINE, "LogTagging", logging, result={})
    throttled = retried(teststate, MACHINE, "LogTagging", logging, error, [1, 2, 4])
    refused = teststate(MACHINE, "LogTagging", logging, error="DynamoDB.ConditionalCheckFailedException")
    # Then each way the tagging comes next, with the state's input unchanged (the Catch's ResultPath is null)
    assert (written["status"], written["nextState"], output(written)) == ("SUCCEEDED", "TagDocuments", logging)
    for answer, why in ((throttled, error), (refused, "DynamoDB.ConditionalCheckFailedException")):
        assert caught(answer) == ("CAUGHT_ERROR", "TagDocuments", why)
        assert output(answer) == logging


@pytest.mark.parametrize("error", LAMBDA_INVOKE_ERRORS)
def test_a_refused_tagging_invoke_is_retried_for_about_a_minute_then_named(teststate: StateCaller, error: str) -> None:
    # Given both jobs done (a new account's whole Lambda quota may be 10: the tagging invoke is throttled under load)
    # When Lambda refuses the invoke every time
    spent = retried(teststate, MACHINE, "TagDocuments", JOBS_DONE, error, LAMBDA_INVOKE_BACKOFFS, jitter=True)
    # Then WhyFailed names it once six jittered retries are spent
    assert caught(spent) == ("CAUGHT_ERROR", "WhyFailed", error)


def test_a_branchs_failure_is_named_by_why_failed(teststate: StateCaller) -> None:
    # When a branch fails (its wait timed out: TranslationTimedOut's Translate.Timeout)
    answer = teststate(
        MACHINE, "TranslateAndClassify", REQUEST, error="Translate.Timeout", caused_by="TranslationTimedOut"
    )
    # Then WhyFailed names it, the error at $.error
    assert caught(answer) == ("CAUGHT_ERROR", "WhyFailed", "Translate.Timeout")
    assert output(answer)["error"]["Error"] == "Translate.Timeout"


@pytest.mark.parametrize(
    ("error", "then"),
    [("States.Runtime", "DocumentsBroke"), ("States.TaskFailed", "DocumentsBroke"), ("Translate.Timeout", "Failed")],
)
def test_a_fail_state_re_raises_only_an_error_of_ours(teststate: StateCaller, error: str, then: str) -> None:
    answer = teststate(MACHINE, "WhyFailed", {**REQUEST, "error": {"Error": error, "Cause": "c"}})
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", then)
