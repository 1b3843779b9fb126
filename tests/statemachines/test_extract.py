"""statemachines/extract.asl.json: the wait for each document's own execution (`states:startExecution.sync:2`, a
state inside the ExtractDocuments Map), and the Choice that sends its result to the task's progress count."""

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
