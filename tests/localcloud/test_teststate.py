"""Step Functions' TestState on the offline endpoint (localcloud.simulators.teststate), through boto3 and the AWS CLI
as a user calls it. Each answer asserted is AWS's: the API reference (TestState, MockInput, TestStateConfiguration),
the developer guide's examples ("Testing state machines with TestState API": the Choice and Pass examples, "Testing
retry and error handling", "Mocking service integrations"), or an answer recorded on AWS, quoted in the test.

TestState's endpoint carries a host prefix (`sync-`), which a client must not add to a local endpoint's address:
boto3 takes `Config(inject_host_prefix=False)`, the CLI `AWS_DISABLE_HOST_PREFIX_INJECTION=true`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from localcloud.account import ACCOUNT_ID
from localcloud.cloud import CloudConfig, LocalCloud

FIXTURE = Path(__file__).parent / "fixtures" / "account" / "template.yaml"  # one function: the lightest stack
REGION = "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/TestStateRole"
LAMBDA_TASK = {  # the developer guide's Task of its retry and catch examples
    "Type": "Task",
    "Resource": "arn:aws:states:::lambda:invoke",
    "Parameters": {"FunctionName": "MyFunction", "Payload.$": "$"},
}


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    config = CloudConfig(template=FIXTURE, stack_name="teststate", aws_port=0, http_port=0)
    with LocalCloud(config) as running:
        yield running


@pytest.fixture(scope="module")
def sfn(cloud: LocalCloud) -> Any:
    return boto3.client(
        "stepfunctions",
        endpoint_url=cloud.aws_endpoint,
        region_name=REGION,
        config=Config(inject_host_prefix=False),
    )


def run_state(sfn: Any, definition: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """TestState of `definition`, its answer without the response metadata."""
    answer = sfn.test_state(definition=json.dumps(definition), **kwargs)
    answer.pop("ResponseMetadata")
    return dict(answer)


def inspected(answer: dict[str, Any], field: str) -> Any:
    return json.loads(answer["inspectionData"][field])


def refused(sfn: Any, definition: dict[str, Any], **kwargs: Any) -> tuple[str, str]:
    """The error code and message a TestState request is refused with."""
    with pytest.raises(ClientError) as refusal:
        sfn.test_state(definition=json.dumps(definition), **kwargs)
    error = refusal.value.response["Error"]
    return error["Code"], error["Message"]


# --- states that run without a mock -----------------------------------------------------------------------------------
def test_a_choice_state_answers_the_state_it_chooses(sfn: Any) -> None:
    # Given the developer guide's Choice state (Example 1) and the input {"number": 2}
    choice = {
        "Type": "Choice",
        "Choices": [
            {"Variable": "$.number", "NumericEquals": 1, "Next": "Equals 1"},
            {"Variable": "$.number", "NumericEquals": 2, "Next": "Equals 2"},
        ],
        "Default": "No Match",
    }
    # When it is tested at the default inspection level (INFO)
    answer = run_state(sfn, choice, roleArn=ROLE, input=json.dumps({"number": 2}))
    # Then, as documented: the rule's Next, the input as output, no inspection data
    assert answer == {"output": '{"number": 2}', "nextState": "Equals 2", "status": "SUCCEEDED"}


def test_debug_shows_the_data_after_each_processing_step(sfn: Any) -> None:
    # Given the developer guide's Pass state of Example 2: InputPath, Parameters, ResultPath and OutputPath
    pass_state = {
        "Type": "Pass",
        "InputPath": "$.payload",
        "Parameters": {"data": 1},
        "ResultPath": "$.result",
        "OutputPath": "$.result.data",
        "Next": "Another State",
    }
    # When it is tested at the DEBUG level
    answer = run_state(sfn, pass_state, input=json.dumps({"payload": {"foo": "bar"}}), inspectionLevel="DEBUG")
    # Then the answer is the documented one, step by step
    assert (answer["status"], answer["nextState"], json.loads(answer["output"])) == ("SUCCEEDED", "Another State", 1)
    assert inspected(answer, "input") == {"payload": {"foo": "bar"}}
    assert inspected(answer, "afterInputPath") == {"foo": "bar"}
    assert inspected(answer, "afterParameters") == {"data": 1}
    assert inspected(answer, "afterResultSelector") == {"data": 1}
    assert inspected(answer, "afterResultPath") == {"payload": {"foo": "bar"}, "result": {"data": 1}}


def test_a_fail_state_answers_its_error_and_cause(sfn: Any) -> None:
    # Given a Fail state (recorded on AWS: status FAILED with its error and cause, no output)
    fail = {"Type": "Fail", "Error": "SomeFailure", "Cause": "This state machines raises a 'SomeFailure' failure."}
    # When it is tested
    answer = run_state(sfn, fail, input=json.dumps({"Value": "HelloWorld"}))
    # Then
    assert answer == {
        "status": "FAILED",
        "error": "SomeFailure",
        "cause": "This state machines raises a 'SomeFailure' failure.",
    }


def test_state_name_tests_one_state_of_a_state_machine_even_inside_a_map(sfn: Any) -> None:
    # Given a state machine whose Pass state leads to a Map, with a Pass state inside its processor
    machine = {
        "StartAt": "State0",
        "States": {
            "State0": {"Type": "Pass", "Next": "State1"},
            "State1": {
                "Type": "Map",
                "ItemsPath": "$.Values",
                "ItemProcessor": {"StartAt": "HandleItem", "States": {"HandleItem": {"Type": "Pass", "End": True}}},
                "End": True,
            },
        },
    }
    item = json.dumps({"Value": "HelloWorld"})
    # When its first state, and then the state inside the Map, are tested by name
    first = run_state(sfn, machine, stateName="State0", input=item)
    inner = run_state(sfn, machine, stateName="HandleItem", input=item)
    # Then each runs alone (recorded on AWS: State0 goes on to State1; HandleItem ends, its input as output)
    assert first == {"output": item, "nextState": "State1", "status": "SUCCEEDED"}
    assert inner == {"output": item, "status": "SUCCEEDED"}
    # And a name the definition lacks is refused as AWS refuses it
    assert refused(sfn, machine, stateName="dne") == ("ValidationException", "State not found in definition")


def test_an_unmocked_task_calls_the_service_on_the_offline_cloud(cloud: LocalCloud, sfn: Any) -> None:
    # Given a queue, and a Task sending a message to it (without a mock, TestState calls the service)
    queue = cloud.client("sqs").create_queue(QueueName="teststate-unmocked")["QueueUrl"]
    send = {
        "Type": "Task",
        "Resource": "arn:aws:states:::sqs:sendMessage",
        "Parameters": {"QueueUrl": queue, "MessageBody.$": "$.message"},
        "ResultSelector": {"messageId.$": "$.MessageId"},
        "End": True,
    }
    # When it is tested with a role
    answer = run_state(sfn, send, roleArn=ROLE, input=json.dumps({"message": "hello"}))
    # Then the message is in the queue, and the answer carries SQS's message id
    messages = cloud.client("sqs").receive_message(QueueUrl=queue)["Messages"]
    assert [m["Body"] for m in messages] == ["hello"]
    assert answer == {"output": json.dumps({"messageId": messages[0]["MessageId"]}), "status": "SUCCEEDED"}


# --- mocks, retries and catches ---------------------------------------------------------------------------------------
def test_a_mocked_error_a_retrier_matches_is_retriable_with_its_backoff(sfn: Any) -> None:
    # Given the developer guide's Task with a Retry (IntervalSeconds 2, MaxAttempts 3, BackoffRate 2.0)
    task = {
        **LAMBDA_TASK,
        "Retry": [
            {"ErrorEquals": ["Lambda.ServiceException"], "IntervalSeconds": 2, "MaxAttempts": 3, "BackoffRate": 2.0}
        ],
        "End": True,
    }
    error = {"errorOutput": {"error": "Lambda.ServiceException", "cause": "Service error"}}
    # When the error is mocked after one retry (the guide's example), and after the three MaxAttempts allows
    retried_once = run_state(
        sfn,
        task,
        input='{"data": "value"}',
        mock=error,
        stateConfiguration={"retrierRetryCount": 1},
        inspectionLevel="DEBUG",
    )
    spent = run_state(
        sfn,
        task,
        input='{"data": "value"}',
        mock=error,
        stateConfiguration={"retrierRetryCount": 3},
        inspectionLevel="DEBUG",
    )
    # Then the first is RETRIABLE after 2 x 2.0^1 = 4 seconds by the first Retry, as documented
    assert retried_once["status"] == "RETRIABLE"
    assert retried_once["inspectionData"]["errorDetails"] == {"retryBackoffIntervalSeconds": 4, "retryIndex": 0}
    assert (retried_once["error"], retried_once["cause"]) == ("Lambda.ServiceException", "Service error")
    # And the second, with no Catch, FAILED; the Retry that matched still named (recorded on AWS)
    assert (spent["status"], spent["error"]) == ("FAILED", "Lambda.ServiceException")
    assert spent["inspectionData"]["errorDetails"] == {"retryIndex": 0}
    assert "output" not in spent and "nextState" not in spent


@pytest.mark.parametrize(
    "resource",
    [
        "arn:aws:states:::lambda:invoke",
        "arn:aws:states:::dynamodb:putItem",
        "arn:aws:states:::apigateway:invoke",
        "arn:aws:states:::aws-sdk:s3:getObject",
        "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
        "arn:aws:states:::states:startExecution.sync:2",
        f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:f",
    ],
)
def test_a_mocked_error_is_the_tasks_error_whatever_its_integration(sfn: Any, resource: str) -> None:
    # Given a Task of the integration, retrying MockException
    task = {"Type": "Task", "Resource": resource, "Retry": [{"ErrorEquals": ["MockException"]}], "End": True}
    # When MockException is mocked
    answer = run_state(sfn, task, mock={"errorOutput": {"error": "MockException", "cause": "mocked"}})
    # Then the Task fails with it, as mocked, and its Retry takes it
    assert (answer["status"], answer["error"], answer["cause"]) == ("RETRIABLE", "MockException", "mocked")


def test_a_mocked_error_a_catcher_matches_is_caught_into_its_next_state(sfn: Any) -> None:
    # Given the developer guide's Task with a Catch on Lambda.TooManyRequestsException
    task = {
        **LAMBDA_TASK,
        "Catch": [
            {"ErrorEquals": ["Lambda.TooManyRequestsException"], "ResultPath": "$.error", "Next": "HandleThrottling"}
        ],
        "Next": "Success",
    }
    # When the error is mocked, at DEBUG
    answer = run_state(
        sfn,
        task,
        input='{"data": "value"}',
        inspectionLevel="DEBUG",
        mock={"errorOutput": {"error": "Lambda.TooManyRequestsException", "cause": "Rate exceeded"}},
    )
    # Then the documented answer: CAUGHT_ERROR into HandleThrottling, the error at ResultPath, Catch index 0
    assert (answer["status"], answer["nextState"]) == ("CAUGHT_ERROR", "HandleThrottling")
    assert (answer["error"], answer["cause"]) == ("Lambda.TooManyRequestsException", "Rate exceeded")
    assert json.loads(answer["output"]) == {
        "data": "value",
        "error": {"Error": "Lambda.TooManyRequestsException", "Cause": "Rate exceeded"},
    }
    assert answer["inspectionData"]["errorDetails"] == {"catchIndex": 0}


def test_info_answers_without_inspection_data(sfn: Any) -> None:
    # Given a caught error (recorded on AWS at INFO: no inspectionData at all)
    task = {**LAMBDA_TASK, "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Handle"}], "End": True}
    # When it is tested at INFO
    answer = run_state(sfn, task, mock={"errorOutput": {"error": "MockException", "cause": "c"}})
    # Then
    assert answer["status"] == "CAUGHT_ERROR" and "inspectionData" not in answer


def test_a_mocked_states_error_is_that_error_of_the_asl(sfn: Any) -> None:
    # Given catchers on MockException, then States.TaskFailed, then States.Timeout
    task = {
        **LAMBDA_TASK,
        "Catch": [
            {"ErrorEquals": ["MockException"], "Next": "HandleMockError"},
            {"ErrorEquals": ["States.TaskFailed"], "Next": "HandleTaskFailed"},
            {"ErrorEquals": ["States.Timeout"], "Next": "HandleTimeout"},
        ],
        "End": True,
    }

    def caught(error: str) -> tuple[str, int]:
        answer = run_state(sfn, task, mock={"errorOutput": {"error": error}}, inspectionLevel="DEBUG")
        return answer["nextState"], answer["inspectionData"]["errorDetails"]["catchIndex"]

    # When States.TaskFailed, then States.Timeout, are mocked
    # Then the first is caught by the States.TaskFailed catcher (recorded on AWS: catchIndex 1), and a timeout is
    # not: States.TaskFailed "matches any known error name except for States.Timeout" (error handling guide)
    assert caught("States.TaskFailed") == ("HandleTaskFailed", 1)
    assert caught("States.Timeout") == ("HandleTimeout", 2)


def test_a_wait_for_task_token_task_takes_the_mock_as_the_callbacks_outcome(sfn: Any) -> None:
    # Given a .waitForTaskToken task sending its token, and a context object giving the token (recorded on AWS)
    task = {
        "Type": "Task",
        "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
        "Parameters": {
            "QueueUrl": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT_ID}/test-queue",
            "MessageBody": {"Message": "Hello from Step Functions!", "TaskToken.$": "$$.Task.Token"},
        },
        "ResultPath": "$.SQS",
        "Next": "NEXT_STATE",
    }
    outcome = {"pokemon": ["charizard", "pikachu", "bulbasaur"]}
    # When it is tested with the callback's outcome mocked
    answer = run_state(
        sfn,
        task,
        input="{}",
        mock={"result": json.dumps(outcome)},
        context=json.dumps({"Task": {"Token": "abcd123"}}),
        inspectionLevel="DEBUG",
    )
    # Then it does not wait: the outcome is its result, and the token sent is the context's
    assert (answer["status"], answer["nextState"], json.loads(answer["output"])) == (
        "SUCCEEDED",
        "NEXT_STATE",
        {"SQS": outcome},
    )
    assert inspected(answer, "afterParameters")["MessageBody"]["TaskToken"] == "abcd123"
    assert inspected(answer, "result") == outcome


def test_the_context_object_is_made_up_unless_given(sfn: Any) -> None:
    # Given a Task passing the context object on
    task = {**LAMBDA_TASK, "Parameters": {"FunctionName": "f", "Payload": {"context.$": "$$"}}, "End": True}
    mock = {"result": json.dumps({"StatusCode": 200})}
    # When it is tested without a context, then with one giving the execution
    made_up = inspected(run_state(sfn, task, roleArn=ROLE, mock=mock, inspectionLevel="DEBUG"), "afterParameters")
    given = {"Execution": {"Id": "arn:aws:states:us-east-1:123456789012:execution:MyStateMachine:exec-1", "Name": "e"}}
    passed = inspected(
        run_state(sfn, task, mock=mock, context=json.dumps(given), inspectionLevel="DEBUG"), "afterParameters"
    )
    # Then the made-up one is an execution of a state machine of its own (recorded on AWS: an Express execution, the
    # role given, the state named StateName, RetryCount 0)
    context = made_up["Payload"]["context"]
    assert context["Execution"]["Id"].startswith(f"arn:aws:states:{REGION}:{ACCOUNT_ID}:express:")
    assert context["Execution"]["RoleArn"] == ROLE
    assert (context["State"]["Name"], context["State"]["RetryCount"]) == ("StateName", 0)
    # And a given field replaces the made-up one
    assert passed["Payload"]["context"] == given


def test_a_parallel_state_takes_its_mock_as_its_branches_results(sfn: Any) -> None:
    # Given a Parallel state of two branches, its results selected and placed at $.results
    parallel = {
        "Type": "Parallel",
        "Branches": [
            {"StartAt": "B1", "States": {"B1": {"Type": "Pass", "End": True}}},
            {"StartAt": "B2", "States": {"B2": {"Type": "Pass", "End": True}}},
        ],
        "ResultSelector": {"first.$": "$[0]"},
        "ResultPath": "$.results",
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Recover"}],
        "End": True,
    }
    # When its two results are mocked, then an error a branch's state raised
    succeeded = run_state(sfn, parallel, input='{"key": "value"}', mock={"result": '[{"branch1": 1}, {"branch2": 2}]'})
    failed = run_state(
        sfn,
        parallel,
        input='{"key": "value"}',
        mock={"errorOutput": {"error": "States.TaskFailed", "cause": "x"}},
        stateConfiguration={"errorCausedByState": "B2"},
    )
    # Then the results go through the state's own ResultSelector and ResultPath, and the error through its Catch
    assert json.loads(succeeded["output"]) == {"key": "value", "results": {"first": {"branch1": 1}}}
    assert (failed["status"], failed["nextState"]) == ("CAUGHT_ERROR", "Recover")
    # And a mock of another number of results is refused as AWS refuses it
    assert refused(sfn, parallel, mock={"result": "[1]"}) == (
        "ValidationException",
        "Mocked result must contain the same number of items as number of Parallel branches.",
    )


def test_a_map_fails_when_its_failed_iterations_pass_its_tolerance(sfn: Any) -> None:
    # Given a Map tolerating one failed iteration, with a Retry and a Catch on the threshold error
    mapped = {
        "Type": "Map",
        "ItemsPath": "$.Values",
        "ItemProcessor": {"StartAt": "Item", "States": {"Item": {"Type": "Pass", "End": True}}},
        "ToleratedFailureCount": 1,
        "Retry": [{"ErrorEquals": ["States.ExceedToleratedFailureThreshold"], "MaxAttempts": 2}],
        "Catch": [{"ErrorEquals": ["States.ExceedToleratedFailureThreshold"], "Next": "HandleThreshold"}],
        "End": True,
    }
    values = json.dumps({"Values": ["first", "second", "third"]})

    def tested(failures: int, retries: int) -> dict[str, Any]:
        config = {"mapIterationFailureCount": failures, "retrierRetryCount": retries}
        return run_state(
            sfn, mapped, input=values, mock={"result": "[1, 1, 1]"}, stateConfiguration=config, inspectionLevel="DEBUG"
        )

    # When one iteration failed, then two (recorded on AWS: the error, RETRIABLE by the Retry, then caught)
    tolerated, retriable, spent = tested(1, 0), tested(2, 0), tested(2, 2)
    # Then
    assert tolerated["status"] == "SUCCEEDED"
    assert (retriable["status"], retriable["error"]) == ("RETRIABLE", "States.ExceedToleratedFailureThreshold")
    assert spent["cause"] == "The specified tolerated failure threshold was exceeded"
    assert (spent["status"], spent["nextState"]) == ("CAUGHT_ERROR", "HandleThreshold")
    # And the Map's concurrency (0: no limit) and tolerance are inspected, as recorded on AWS
    inspection = tolerated["inspectionData"]
    assert (inspection["maxConcurrency"], inspection["toleratedFailureCount"]) == (0, 1)


def test_variables_are_the_states_and_inspected(sfn: Any) -> None:
    # Given a Pass state reading a variable
    pass_state = {"Type": "Pass", "Parameters": {"greeting.$": "$greeting"}, "End": True}
    # When it is tested with the variable set
    answer = run_state(sfn, pass_state, variables=json.dumps({"greeting": "hello"}), inspectionLevel="DEBUG")
    # Then the state reads it, and the inspection data lists it
    assert json.loads(answer["output"]) == {"greeting": "hello"}
    assert inspected(answer, "variables") == {"greeting": "hello"}


# --- the mock checked against the service's API (fieldValidationMode) -------------------------------------------------
START_EXECUTION = {
    "Type": "Task",
    "Resource": "arn:aws:states:::states:startExecution",
    "Parameters": {"StateMachineArn": f"arn:aws:states:{REGION}:{ACCOUNT_ID}:stateMachine:Target", "Input": {}},
    "End": True,
}


@pytest.mark.parametrize(
    ("mode", "result", "problem"),
    [  # each as recorded on AWS
        ("STRICT", {}, "Required field 'ExecutionArn' is missing"),
        ("STRICT", {"executionArn": "a", "startDate": "s"}, "Required field 'ExecutionArn' is missing"),
        ("STRICT", {"ExecutionArn": "a", "StartDate": True}, "Field 'StartDate' must be a string"),
        ("PRESENT", {}, None),
        ("PRESENT", {"ExecutionArn": 1}, "Field 'ExecutionArn' must be a string"),
        ("NONE", {"ExecutionArn": "a", "StartDate": True}, None),
        ("STRICT", {"random": "json", "ExecutionArn": "a", "StartDate": "s"}, None),  # fields beyond the model: free
    ],
)
def test_a_mocked_result_is_checked_against_the_services_api(
    sfn: Any, mode: str, result: dict[str, Any], problem: str | None
) -> None:
    # When a StartExecution result is mocked in the mode
    mock = {"result": json.dumps(result), "fieldValidationMode": mode}
    if problem is None:
        # Then it is the state's result
        assert json.loads(run_state(sfn, START_EXECUTION, mock=mock)["output"]) == result
    else:
        # Or refused, in AWS's words
        assert refused(sfn, START_EXECUTION, mock=mock) == (
            "ValidationException",
            f"Mock result schema validation error: {problem}",
        )


API_FIELD_PROBLEMS = [  # (resource, mocked result, problem): each as recorded on AWS
    ("arn:aws:states:::lambda:invoke", {"StatusCode": "200"}, "Field 'StatusCode' must be a number"),
    ("arn:aws:states:::aws-sdk:s3:getObject", {"StorageClass": "X"}, "Field 'StorageClass' is not an expected value"),
    ("arn:aws:states:::aws-sdk:s3:getObject", {"ContentLength": "1"}, "Field 'ContentLength' must be a number"),
    (
        "arn:aws:states:::events:putEvents",
        {"Entries": [{"EventId": "1"}, {"EventId": [2]}]},
        "Field 'EventId' must be a string",
    ),
    (
        "arn:aws:states:::aws-sdk:kms:encrypt",
        {"CiphertextBlob": ""},
        "Field 'CiphertextBlob' is smaller than the minimum length",
    ),
    (
        "arn:aws:states:::aws-sdk:lambda:getFunction",
        {"Configuration": {"MemorySize": 1}},
        "Field 'MemorySize' is less than the minimum value",
    ),
    (
        "arn:aws:states:::states:startExecution.sync:2",
        {"ExecutionArn": "a", "StartDate": "s"},
        "Required field 'StateMachineArn' is missing",
    ),
]


@pytest.mark.parametrize(("resource", "result", "problem"), API_FIELD_PROBLEMS)
def test_each_kind_of_api_field_is_checked(sfn: Any, resource: str, result: dict[str, Any], problem: str) -> None:
    # Given a Task of the integration (a .sync one is checked against the API Step Functions polls: DescribeExecution)
    task = {"Type": "Task", "Resource": resource, "End": True}
    # When a result breaking the API's model is mocked (STRICT, the default)
    # Then it is refused in AWS's words
    assert refused(sfn, task, mock={"result": json.dumps(result)}) == (
        "ValidationException",
        f"Mock result schema validation error: {problem}",
    )


# --- requests AWS refuses ---------------------------------------------------------------------------------------------
PASS = {"Type": "Pass", "End": True}
TASK = {**LAMBDA_TASK, "End": True}
MAP = {
    "Type": "Map",
    "ItemProcessor": {"StartAt": "I", "States": {"I": {"Type": "Pass", "End": True}}},
    "End": True,
}
WAIT_FOR_TOKEN = {
    "Type": "Task",
    "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
    "Parameters": {"FunctionName": "f", "Payload": {"token.$": "$$.Task.Token"}},
    "End": True,
}
RESULT = {"result": "{}"}


CONTEXT = "Invalid Context object provided: "
REFUSALS = [  # (definition, request, error code, message): the messages recorded on AWS
    (PASS, {"mock": RESULT}, "ValidationException", "State type 'Pass' is not supported when a mock is specified"),
    (
        TASK,
        {"mock": {**RESULT, "errorOutput": {"error": "E"}}},
        "ValidationException",
        "A test mock should have only one of the following fields: [result, errorOutput].",
    ),
    (
        TASK,
        {"mock": RESULT, "revealSecrets": True},
        "ValidationException",
        "TestState does not support RevealSecrets when a mock is specified.",
    ),
    (TASK, {"mock": {"result": "not json"}}, "ValidationException", "Mocked result must be valid JSON"),
    (TASK, {}, "ValidationException", "RoleArn must be specified when testing a Task state"),
    (
        MAP,
        {"roleArn": ROLE},
        "InvalidDefinition",
        "TestState API does not support Map or Parallel states. Supported state types include: "
        "[Task, Wait, Pass, Succeed, Fail, Choice]",
    ),
    (MAP, {"mock": RESULT}, "ValidationException", "Mocked result must be an array."),
    (
        MAP,
        {"roleArn": ROLE, "stateConfiguration": {"mapIterationFailureCount": 0}},
        "ValidationException",
        "TestState does not support MapIterationFailureCount when a mock is not specified.",
    ),
    (
        MAP,
        {"mock": {"result": "[1]"}, "stateConfiguration": {"mapIterationFailureCount": 2}},
        "ValidationException",
        "Map iteration failure count must be less than or equal to the number of Map iterations",
    ),
    (
        TASK,
        {"mock": RESULT, "context": '{"Pokedex": {}}'},
        "ValidationException",
        CONTEXT + "Field 'Pokedex' is not allowed",
    ),
    (
        TASK,
        {"mock": RESULT, "context": '{"Execution": {"pokemon": 1}}'},
        "ValidationException",
        CONTEXT + "Field 'pokemon' is not allowed",
    ),
    (
        TASK,
        {"mock": RESULT, "context": '{"Map": {}}'},
        "ValidationException",
        CONTEXT + "'Map' field is not supported when mocking a Context object",
    ),
    (
        TASK,
        {"mock": RESULT, "context": '{"Execution": {"Id": 1}}'},
        "ValidationException",
        CONTEXT + "Execution.Id must be a string",
    ),
    (
        TASK,
        {"mock": RESULT, "context": '{"Task": {"Token": "t"}}'},
        "ValidationException",
        CONTEXT + "Context object contains 'Task' when state is not a Task state with a '.sync' or "
        "'.waitForTaskToken' service integration pattern",
    ),
]


@pytest.mark.parametrize(("definition", "request_", "code", "message"), REFUSALS)
def test_a_request_aws_refuses_is_refused_in_its_words(
    sfn: Any, definition: dict[str, Any], request_: dict[str, Any], code: str, message: str
) -> None:
    assert refused(sfn, definition, **request_) == (code, message)


def test_what_aws_runs_only_with_a_mock_is_refused_without_one(sfn: Any) -> None:
    # Given a .waitForTaskToken Task (API_TestState: TestState supports it "only ... when a mock is specified"; the
    # guide: "Without a mock, invoking these states via TestState API will return a validation exception")
    # When it is tested without a mock
    # Then
    assert refused(sfn, WAIT_FOR_TOKEN, roleArn=ROLE)[0] == "ValidationException"


def test_an_invalid_definition_or_input_is_refused(sfn: Any) -> None:
    # A definition that is not JSON, a state of an unknown type, a Next nowhere in a state machine: InvalidDefinition
    assert refused(sfn, {"Type": "Nonsense", "End": True})[0] == "InvalidDefinition"
    machine = {"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "Nowhere"}}}
    assert refused(sfn, machine, stateName="A")[0] == "InvalidDefinition"
    with pytest.raises(ClientError) as not_json:
        sfn.test_state(definition="{", roleArn=ROLE)
    assert not_json.value.response["Error"]["Code"] == "InvalidDefinition"
    # And input that is not JSON: InvalidExecutionInput
    assert refused(sfn, PASS, input="{")[0] == "InvalidExecutionInput"


# --- the AWS CLI ------------------------------------------------------------------------------------------------------
def test_the_aws_cli_tests_a_state_on_the_offline_endpoint(cloud: LocalCloud) -> None:
    # Given the stock AWS CLI beside this Python, told not to prefix the endpoint's host (TestState's `sync-`)
    cli = Path(sys.executable).parent / "aws"
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_DISABLE_HOST_PREFIX_INJECTION": "true",
    }
    command = [str(cli), "--endpoint-url", cloud.aws_endpoint, "stepfunctions", "test-state", "--output", "json"]
    command += ["--definition", json.dumps({**LAMBDA_TASK, "Retry": [{"ErrorEquals": ["States.ALL"]}], "End": True})]
    command += ["--mock", json.dumps({"errorOutput": {"error": "Lambda.ServiceException"}})]
    # When it tests a Task whose mocked error its Retry takes
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    # Then it answers as boto3 does
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "RETRIABLE"


# --- known differences (docs/offline-cloud.md, TestState): each shows what the offline answer is ---------------------
def test_known_gap_a_maps_item_inspection_is_not_served(sfn: Any) -> None:
    # Given a Map with an ItemsPath and an ItemSelector (AWS inspects both: afterItemsPath, afterItemSelector)
    mapped = {**MAP, "ItemsPath": "$.items", "ItemSelector": {"value.$": "$$.Map.Item.Value"}}
    # When it is tested at DEBUG
    answer = run_state(sfn, mapped, input='{"items": [1, 2]}', mock={"result": "[1, 2]"}, inspectionLevel="DEBUG")
    # Then the offline answer has neither: the iterations' inputs are never made
    assert answer["status"] == "SUCCEEDED"
    assert not {"afterItemsPath", "afterItemSelector"} & set(answer["inspectionData"])


def test_known_gap_a_jittered_retry_reports_its_ceiling(sfn: Any) -> None:
    # Given a retrier with JitterStrategy FULL (AWS waits a random time up to the backoff; which it reports is not
    # documented)
    retry = {"ErrorEquals": ["States.ALL"], "IntervalSeconds": 3, "BackoffRate": 2, "JitterStrategy": "FULL"}
    task = {**LAMBDA_TASK, "Retry": [retry], "End": True}
    # When a retry's backoff is asked for
    answer = run_state(
        sfn,
        task,
        mock={"errorOutput": {"error": "E"}},
        stateConfiguration={"retrierRetryCount": 2},
        inspectionLevel="DEBUG",
    )
    # Then offline it is the ceiling, 3 x 2^2
    assert answer["inspectionData"]["errorDetails"]["retryBackoffIntervalSeconds"] == 12


def test_known_gap_a_callbacks_mock_is_not_checked_against_the_service(sfn: Any) -> None:
    # Given a .waitForTaskToken Task, whose result is whatever SendTaskSuccess sent (AWS does not say whether it checks
    # the mock against the integration's API, Lambda's Invoke here)
    # When a result Invoke's model refuses (StatusCode as text) is mocked
    answer = run_state(sfn, WAIT_FOR_TOKEN, mock={"result": '{"StatusCode": "200"}'})
    # Then offline it is the state's result
    assert json.loads(answer["output"]) == {"StatusCode": "200"}


def test_known_gap_a_given_context_is_what_the_parameters_read_only(sfn: Any) -> None:
    # Given a Task reading the execution's name in its Parameters and in its ResultSelector
    task = {
        **LAMBDA_TASK,
        "Parameters": {"FunctionName": "f", "Payload": {"name.$": "$$.Execution.Name"}},
        "ResultSelector": {"name.$": "$$.Execution.Name"},
        "End": True,
    }
    # When a context object naming the execution is given
    answer = run_state(
        sfn,
        task,
        mock={"result": "{}"},
        context=json.dumps({"Execution": {"Name": "given"}}),
        inspectionLevel="DEBUG",
    )
    # Then the Parameters read it, and offline the ResultSelector reads the context TestState made up
    assert inspected(answer, "afterParameters")["Payload"] == {"name": "given"}
    assert json.loads(answer["output"])["name"] != "given"


def test_known_gap_states_task_failed_matches_no_states_error(sfn: Any) -> None:
    # Given a Catch on States.TaskFailed, which on AWS "matches any known error name except for States.Timeout"
    # (error handling guide), so a heartbeat timeout too
    task = {**LAMBDA_TASK, "Catch": [{"ErrorEquals": ["States.TaskFailed"], "Next": "Handle"}], "End": True}
    # When States.HeartbeatTimeout is mocked
    answer = run_state(sfn, task, mock={"errorOutput": {"error": "States.HeartbeatTimeout"}})
    # Then moto's matching, which leaves every States.* error to a catcher naming it, lets it through
    assert (answer["status"], answer["error"]) == ("FAILED", "States.HeartbeatTimeout")
