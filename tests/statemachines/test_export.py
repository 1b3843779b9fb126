"""statemachines/export.asl.json, state by state: the run lock, the wait for the HealthLake export (an SQS message's
task token), the records' publication, the tally, and every failure's way to MarkFailed and its name."""

from __future__ import annotations

from typing import Any

import pytest

from tests.statemachines.conftest import (
    LAMBDA_INVOKE_BACKOFFS,
    LAMBDA_INVOKE_ERRORS,
    StateCaller,
    caught,
    output,
    retried,
)

MACHINE = "export"
CONFIG = {
    "heartbeatSeconds": 600,
    "timeoutSeconds": 86400,
    "maxConcurrency": 5,
    "triggerTime": "2026-11-20T02:00:00.000Z",
}
LOCKED = {"config": CONFIG, "lock": {"acquired": True, "lastRunTime": "2026-11-19T02:00:00.000Z", "holder": None}}
EXPORTED = {**LOCKED, "export": {"bucket": "exports", "manifestKey": "manifests/run-1.json", "fileCount": 2}}


def failed(error: str) -> dict[str, Any]:
    return {**EXPORTED, "error": {"Error": error, "Cause": f"mocked {error}"}}


# --- the run lock -----------------------------------------------------------------------------------------------------
def test_the_lock_answer_decides_whether_the_run_goes_on(teststate: StateCaller) -> None:
    # When the lock function answers (its payload, a JSON object: Lambda's model has Payload as a blob, which STRICT
    # would refuse for an object)
    lock = {"acquired": True, "lastRunTime": "2026-11-19T02:00:00.000Z", "holder": None}
    answer = teststate(MACHINE, "TakeLock", {"config": CONFIG}, result={"Payload": lock}, validation="NONE")
    # Then the run's lock is kept for the choice
    assert (answer["status"], answer["nextState"], output(answer)["lock"]) == ("SUCCEEDED", "IsAnotherRunActive", lock)


@pytest.mark.parametrize("error", LAMBDA_INVOKE_ERRORS)
def test_a_failed_lock_call_is_retried_then_marks_the_run_failed(teststate: StateCaller, error: str) -> None:
    spent = retried(teststate, MACHINE, "TakeLock", {"config": CONFIG}, error, LAMBDA_INVOKE_BACKOFFS, jitter=True)
    assert caught(spent) == ("CAUGHT_ERROR", "MarkFailed", error)


@pytest.mark.parametrize(("acquired", "then"), [(True, "Export"), (False, "Skipped")])
def test_a_run_held_by_another_is_skipped(teststate: StateCaller, acquired: bool, then: str) -> None:
    answer = teststate(MACHINE, "IsAnotherRunActive", {**LOCKED, "lock": {**LOCKED["lock"], "acquired": acquired}})
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", then)


# --- the wait for the export ------------------------------------------------------------------------------------------
def test_the_finished_exports_manifest_is_published(teststate: StateCaller) -> None:
    # When the export's consumer resumes the wait with the manifest (SendTaskSuccess)
    manifest = {"bucket": "exports", "manifestKey": "manifests/run-1.json", "fileCount": 2}
    answer = teststate(MACHINE, "Export", LOCKED, result=manifest)
    # Then the records' publication comes next
    assert (answer["status"], answer["nextState"], output(answer)["export"]) == (
        "SUCCEEDED",
        "PublishRecords",
        manifest,
    )


@pytest.mark.parametrize(
    "error", ["States.Timeout", "States.HeartbeatTimeout", "HealthLake.FAILED", "SQS.QueueDoesNotExist"]
)
def test_an_export_that_fails_or_stops_reporting_marks_the_run_failed_at_once(
    teststate: StateCaller, error: str
) -> None:
    # When the wait runs out (no heartbeat from the re-checks, or the whole timeout), the export fails, or the
    # message cannot be sent: the state has no Retry
    answer = teststate(MACHINE, "Export", LOCKED, error=error)
    # Then the run is marked failed, the error at $.error
    assert caught(answer) == ("CAUGHT_ERROR", "MarkFailed", error)
    assert output(answer)["error"]["Error"] == error


# --- publication and tally --------------------------------------------------------------------------------------------
def test_published_files_are_tallied(teststate: StateCaller) -> None:
    answer = teststate(MACHINE, "PublishRecords", EXPORTED, result=[{"records": 10}, {"records": 5}])
    assert (answer["status"], answer["nextState"], output(answer)) == ("SUCCEEDED", "Tally", EXPORTED)


# What a file's publication may fail with: the publish function's own TransientAwsError, EventBusThrottledError and
# CheckpointMovedError, Lambda's service errors, the function crashing or timing out. Retried, with IntervalSeconds 2,
# BackoffRate 2, MaxAttempts 3: the retry resumes after the file's checkpoint.
PUBLISH_ERRORS = [
    "TransientAwsError",
    "EventBusThrottledError",
    "CheckpointMovedError",
    *LAMBDA_INVOKE_ERRORS,
    "Lambda.Unknown",
    "Runtime.ExitError",
    "Sandbox.Timedout",
]
# A Map item, as ItemSelector makes it
FILE = {"run": "run-1", "bucket": "exports", "key": "runs/run-1/Patient-1.ndjson"}


def test_a_published_files_count_is_its_result(teststate: StateCaller) -> None:
    # When the publish function answers (its payload, a JSON object: validation NONE, as for every plain invoke)
    answer = teststate(MACHINE, "PublishFile", FILE, result={"Payload": {"records": 10}}, validation="NONE")
    # Then the file's iteration ends with its count
    assert answer["status"] == "SUCCEEDED" and "nextState" not in answer
    assert output(answer) == {"records": 10}


@pytest.mark.parametrize("error", PUBLISH_ERRORS)
def test_a_files_failed_publication_is_retried_three_times_then_fails_the_file(
    teststate: StateCaller, error: str
) -> None:
    spent = retried(teststate, MACHINE, "PublishFile", FILE, error, [2, 4, 8])
    # The file's iteration fails (no Catch inside the Map): PublishRecords' Catch takes it
    assert caught(spent) == ("FAILED", "", error)


def test_a_files_publication_that_cannot_succeed_is_never_retried(teststate: StateCaller) -> None:
    # When the function cannot be invoked at all (it is gone)
    answer = teststate(MACHINE, "PublishFile", FILE, error="Lambda.ResourceNotFoundException")
    assert caught(answer) == ("FAILED", "", "Lambda.ResourceNotFoundException")
    assert "errorDetails" not in answer["inspectionData"]


def test_a_publication_that_fails_marks_the_run_failed(teststate: StateCaller) -> None:
    answer = teststate(MACHINE, "PublishRecords", EXPORTED, error="States.TaskFailed", caused_by="PublishFile")
    assert caught(answer) == ("CAUGHT_ERROR", "MarkFailed", "States.TaskFailed")


@pytest.mark.parametrize("error", LAMBDA_INVOKE_ERRORS)
def test_a_failed_tally_is_retried_then_marks_the_run_failed(teststate: StateCaller, error: str) -> None:
    spent = retried(teststate, MACHINE, "Tally", EXPORTED, error, LAMBDA_INVOKE_BACKOFFS, jitter=True)
    assert caught(spent) == ("CAUGHT_ERROR", "MarkFailed", error)


@pytest.mark.parametrize(
    ("tally", "then"),
    [
        ({"filesUnfinished": 0, "accounted": 15, "records": 15}, "MarkCompleted"),
        ({"filesUnfinished": 1, "accounted": 15, "records": 15}, "RecordsUnaccounted"),
        ({"filesUnfinished": 0, "accounted": 14, "records": 15}, "RecordsUnaccounted"),
    ],
)
def test_a_run_completes_only_with_every_record_accounted_for(
    teststate: StateCaller, tally: dict[str, int], then: str
) -> None:
    answer = teststate(MACHINE, "AllAccountedFor", {**EXPORTED, "tally": tally})
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", then)


def test_a_completion_that_cannot_be_recorded_marks_the_run_failed(teststate: StateCaller) -> None:
    tallied = {**EXPORTED, "tally": {"status": "COMPLETED"}}
    answer = teststate(MACHINE, "MarkCompleted", tallied, error="DynamoDB.ConditionalCheckFailedException")
    assert caught(answer) == ("CAUGHT_ERROR", "MarkFailed", "DynamoDB.ConditionalCheckFailedException")


# --- the failure's name -----------------------------------------------------------------------------------------------
def test_marking_the_run_failed_keeps_the_error_even_when_the_mark_fails(teststate: StateCaller) -> None:
    # When the lock is no longer this run's (ConditionalCheckFailed), or is marked
    refused = teststate(
        MACHINE, "MarkFailed", failed("States.Timeout"), error="DynamoDB.ConditionalCheckFailedException"
    )
    marked = teststate(MACHINE, "MarkFailed", failed("States.Timeout"), result={})
    # Then either way WhyFailed names the run's own error (ResultPath null keeps $.error)
    assert caught(refused) == ("CAUGHT_ERROR", "WhyFailed", "DynamoDB.ConditionalCheckFailedException")
    assert output(refused)["error"]["Error"] == output(marked)["error"]["Error"] == "States.Timeout"
    assert (marked["status"], marked["nextState"]) == ("SUCCEEDED", "WhyFailed")


@pytest.mark.parametrize(
    ("error", "then"),
    [
        ("States.Timeout", "ExportTimedOut"),
        ("States.HeartbeatTimeout", "ExportTimedOut"),
        ("States.Runtime", "ExportBroke"),
        ("Export.RecordsUnaccounted", "ExportFailed"),
    ],
)
def test_why_failed_names_the_runs_failure(teststate: StateCaller, error: str, then: str) -> None:
    answer = teststate(MACHINE, "WhyFailed", failed(error))
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", then)
