"""statemachines/extract.asl.json, state by state: the batch's documents (a list given, or an S3 listing) and its
bounds, the wait for each document's own execution (`states:startExecution.sync:2`, a state inside the
ExtractDocuments Map), and the task's progress entries and count, which never stop the work."""

from __future__ import annotations

import json

import pytest

from tests.statemachines.conftest import StateCaller, caught, output, retried

MACHINE = "extract"
ITEM = {
    "document": "docs/in/invoice.pdf",
    "outputPrefix": "extract/batch-1",
    "projectArn": "arn:aws:bedrock:us-east-1:aws:data-automation-project/public-default",
    "profileArn": "arn:aws:bedrock:us-east-1:123456789012:data-automation-profile/us.data-automation-v1",
    "index": 0,
    "total": 1,
    "task": None,
}
RESULT = {"document": "docs/in/invoice.pdf", "status": "SUCCEEDED", "jobId": "4f7c2d9e", "output": "s3://x/y.json"}
TASK = {"id": "t-1", "expiresAt": 1924992000}
REQUEST = {
    "projectArn": ITEM["projectArn"],
    "profileArn": ITEM["profileArn"],
    "task": None,
    "prefix": "docs/in/",
}
CONFIGURED = {"request": REQUEST, "outputPrefix": "extract/batch-1"}  # what Configure hands on
SELECTED = {**CONFIGURED, "request": {**REQUEST, "task": TASK}, "documents": ["docs/in/invoice.pdf"]}  # a task's batch
FINISHED = {**ITEM, "task": TASK, "outcome": {"result": RESULT}}  # a task's document, its execution ended
COUNTED = {**FINISHED, "progress": {"done": 1}}
# A progress write's transient failures, retried with IntervalSeconds 1, BackoffRate 2, MaxAttempts 3
DYNAMODB_ERRORS = ["DynamoDB.ProvisionedThroughputExceededException", "DynamoDB.InternalServerErrorException"]


def test_the_documents_execution_output_is_its_result(teststate: StateCaller) -> None:
    # When the child execution succeeds: `.sync:2` answers DescribeExecution's fields with Output as JSON (the model
    # has Output as a string, which STRICT would refuse for an object)
    execution = {
        "ExecutionArn": "arn:aws:states:us-east-1:123456789012:execution:ExtractDocument:1f2e",
        "StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:ExtractDocument",
        "Status": "SUCCEEDED",
        "StartDate": "2026-11-20T02:00:00.000Z",
        "Output": RESULT,
    }
    answer = teststate(MACHINE, "ExtractDocument", ITEM, result=execution, validation="NONE")
    # Then its output is the document's result
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", "IsTaskDocument")
    assert output(answer)["outcome"] == {"result": RESULT}


def test_the_documents_execution_is_checked_as_describe_execution_answers(teststate: StateCaller) -> None:
    # When a result lacking DescribeExecution's required fields is mocked (STRICT): refused, as AWS refuses it
    with pytest.raises(teststate.client.exceptions.ValidationException):
        teststate(MACHINE, "ExtractDocument", ITEM, result={"Status": "SUCCEEDED", "Output": json.dumps(RESULT)})


@pytest.mark.parametrize("error", ["StepFunctions.ExecutionLimitExceededException", "StepFunctions.SdkClientException"])
def test_a_start_over_the_executions_limit_is_retried_then_fails_the_document(
    teststate: StateCaller, error: str
) -> None:
    spent = retried(teststate, MACHINE, "ExtractDocument", ITEM, error, [2, 4, 8, 16, 32])
    assert caught(spent) == ("CAUGHT_ERROR", "DocumentFailed", error)


@pytest.mark.parametrize("error", ["States.TaskFailed", "States.Timeout"])
def test_a_failed_or_stopped_document_is_that_documents_failure_only(teststate: StateCaller, error: str) -> None:
    # When the child execution fails, times out or is stopped
    answer = teststate(MACHINE, "ExtractDocument", ITEM, error=error)
    # Then the document's failure goes into the batch's results (DocumentFailed), not the batch's
    assert caught(answer) == ("CAUGHT_ERROR", "DocumentFailed", error)
    assert output(answer)["error"]["Error"] == error


@pytest.mark.parametrize(
    ("task", "then"), [({"id": "t-1", "expiresAt": 1924992000}, "CountDocument"), (None, "DocumentDone")]
)
def test_only_the_task_apis_documents_are_counted(teststate: StateCaller, task: object, then: str) -> None:
    answer = teststate(MACHINE, "IsTaskDocument", {**ITEM, "task": task, "outcome": {"result": RESULT}})
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", then)


# --- the batch's documents and its bounds -----------------------------------------------------------------------------
@pytest.mark.parametrize(("documents", "then"), [(["docs/in/a.pdf"], "UseDocumentList"), (None, "ListDocuments")])
def test_a_batch_lists_its_prefix_only_without_a_document_list(
    teststate: StateCaller, documents: list[str] | None, then: str
) -> None:
    request = REQUEST if documents is None else {**REQUEST, "documents": documents}
    answer = teststate(MACHINE, "HasDocumentList", {**CONFIGURED, "request": request})
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", then)


@pytest.mark.parametrize(
    ("count", "then"), [(501, "TooManyDocuments"), (500, "IsTask"), (1, "IsTask"), (0, "NoDocuments")]
)
def test_a_document_list_takes_one_to_five_hundred_documents(teststate: StateCaller, count: int, then: str) -> None:
    listed = {**CONFIGURED, "documents": [f"docs/in/{n}.pdf" for n in range(count)], "count": count}
    answer = teststate(MACHINE, "ListSize", listed)
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", then)


def test_the_prefixs_listing_is_kept_for_the_choice(teststate: StateCaller) -> None:
    # When ListObjectsV2 answers one page (checked against its API: STRICT)
    listing = {"IsTruncated": False, "KeyCount": 1, "Contents": [{"Key": "docs/in/invoice.pdf"}]}
    answer = teststate(MACHINE, "ListDocuments", CONFIGURED, result=listing)
    # Then it is kept at $.listing and AnyDocuments decides
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", "AnyDocuments")
    assert output(answer)["listing"] == listing


@pytest.mark.parametrize("error", ["S3.S3Exception", "S3.SdkClientException"])
def test_a_failed_listing_is_retried_three_times_then_fails_the_batch(teststate: StateCaller, error: str) -> None:
    spent = retried(teststate, MACHINE, "ListDocuments", CONFIGURED, error, [1, 2, 4])
    assert caught(spent) == ("FAILED", "", error)


def test_a_listing_s3_refuses_is_never_retried(teststate: StateCaller) -> None:
    answer = teststate(MACHINE, "ListDocuments", CONFIGURED, error="S3.NoSuchBucketException")
    assert caught(answer) == ("FAILED", "", "S3.NoSuchBucketException")
    assert "errorDetails" not in answer["inspectionData"]


@pytest.mark.parametrize(
    ("listing", "then"),
    [
        ({"IsTruncated": True, "KeyCount": 500}, "TooManyDocuments"),
        ({"IsTruncated": False, "KeyCount": 500}, "SelectKeys"),
        ({"IsTruncated": False, "KeyCount": 0}, "NoDocuments"),
    ],
)
def test_a_listing_takes_one_page_of_documents(teststate: StateCaller, listing: dict[str, object], then: str) -> None:
    answer = teststate(MACHINE, "AnyDocuments", {**CONFIGURED, "listing": listing})
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", then)


@pytest.mark.parametrize(("task", "then"), [(TASK, "LogExtracting"), (None, "ExtractDocuments")])
def test_progress_is_logged_only_for_the_task_apis_batches(teststate: StateCaller, task: object, then: str) -> None:
    answer = teststate(MACHINE, "IsTask", {**SELECTED, "request": {**REQUEST, "task": task}})
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", then)


# --- the task's progress: best effort ---------------------------------------------------------------------------------
PROGRESS_WRITES = [
    ("LogExtracting", SELECTED, "ExtractDocuments"),
    ("CountDocument", FINISHED, "DocumentDone"),
    ("LogDocumentDone", COUNTED, "DocumentDone"),
]


@pytest.mark.parametrize(("state", "state_input", "then"), PROGRESS_WRITES)
@pytest.mark.parametrize("error", DYNAMODB_ERRORS)
def test_a_progress_write_that_keeps_failing_is_retried_then_never_stops_the_work(
    teststate: StateCaller, state: str, state_input: dict[str, object], then: str, error: str
) -> None:
    spent = retried(teststate, MACHINE, state, state_input, error, [1, 2, 4])
    assert caught(spent) == ("CAUGHT_ERROR", then, error)
    # The Catch's ResultPath is null: the state's input goes on unchanged
    assert output(spent) == state_input


@pytest.mark.parametrize(("state", "state_input", "then"), PROGRESS_WRITES)
def test_a_refused_progress_write_is_not_retried_and_never_stops_the_work(
    teststate: StateCaller, state: str, state_input: dict[str, object], then: str
) -> None:
    answer = teststate(MACHINE, state, state_input, error="DynamoDB.ConditionalCheckFailedException")
    assert caught(answer) == ("CAUGHT_ERROR", then, "DynamoDB.ConditionalCheckFailedException")
    assert "retryIndex" not in answer["inspectionData"]["errorDetails"]
    assert output(answer) == state_input


def test_a_written_progress_entry_goes_on(teststate: StateCaller) -> None:
    started = teststate(MACHINE, "LogExtracting", SELECTED, result={})  # PutItem's answer
    done = teststate(MACHINE, "LogDocumentDone", COUNTED, result={})
    assert (started["status"], started["nextState"]) == ("SUCCEEDED", "ExtractDocuments")
    assert (done["status"], done["nextState"]) == ("SUCCEEDED", "DocumentDone")


def test_a_counted_document_is_logged_with_the_count_so_far(teststate: StateCaller) -> None:
    # When UpdateItem answers the set of done item indexes (ReturnValues UPDATED_NEW)
    updated = {"Attributes": {"done": {"NS": ["0", "3"]}}}
    answer = teststate(MACHINE, "CountDocument", FINISHED, result=updated)
    # Then the count is the set's size, and the progress entry comes next
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", "LogDocumentDone")
    assert output(answer)["progress"] == {"done": 2}
