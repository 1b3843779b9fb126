"""The offline cloud end to end: the fixture app (fixtures/app/template.yaml) deployed into LocalCloud, and each
capability proved through the APIs and endpoints a user of the app would touch."""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import EndpointConnectionError
from moto.dynamodb.models.table import Table

from localcloud import simulators
from localcloud.account import ACCOUNT_ID
from localcloud.cloud import DEFAULT_CREDENTIAL, LocalCloud
from localcloud.deploy import TemplateError, UnsupportedResourceError, deploy
from localcloud.fixes import logs
from localcloud.fixes.events import next_fire, render_input_template
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator

ACCOUNT = ACCOUNT_ID
REGION = "us-east-1"
PHYSICAL_NAME = r"[A-Z0-9]{12}"  # the random suffix CloudFormation appends: stack-LogicalId-SUFFIX
FIXTURES = Path(__file__).parent / "fixtures"
STACK_NAME = "fixture"  # as conftest.cloud deploys it


# --- helpers ----------------------------------------------------------------------------------------------------------
def wait_for[T](probe: Callable[[], T | None], timeout: float = 5.0, interval: float = 0.05, what: str = "") -> T:
    """Call `probe` until it returns something truthy and return that; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or probe.__name__}")
        time.sleep(interval)


def physical_id(cloud: LocalCloud, logical_id: str) -> str:
    """The physical ID (queue URL, function name, table name, ...) of a resource of the deployed stack."""
    return next(r.physical_id for r in cloud.stack.resources if r.logical_id == logical_id)


def queue_arn(cloud: LocalCloud, queue_url: str) -> str:
    attributes = cloud.client("sqs").get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
    return str(attributes["Attributes"]["QueueArn"])


def receive_all(cloud: LocalCloud, queue_url: str) -> list[dict[str, Any]]:
    """Receive (and delete) whatever the queue holds right now."""
    sqs = cloud.client("sqs")
    messages: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
        ).get("Messages", [])
        if not batch:
            return messages
        messages.extend(batch)
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)]
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)


def records(cloud: LocalCloud) -> list[dict[str, Any]]:
    """Everything the RecorderFunction has written to the RecordTable."""
    table = boto3.resource("dynamodb", region_name=REGION).Table(cloud.stack.outputs["RecordTableName"])
    return list(table.scan()["Items"])


def sqs_records_of(cloud: LocalCloud, message_id: str) -> list[dict[str, Any]]:
    return [r for r in records(cloud) if r["pk"].startswith(f"sqs#{message_id}#")]


def event_records_with(cloud: LocalCloud, marker: str) -> list[dict[str, Any]]:
    return [r for r in records(cloud) if r["pk"].startswith("event#") and marker in r["body"]]


def finished(cloud: LocalCloud, execution_arn: str) -> dict[str, Any]:
    sfn = cloud.client("stepfunctions")
    return wait_for(
        lambda: (d := sfn.describe_execution(executionArn=execution_arn))["status"] != "RUNNING" and d,
        what=f"execution {execution_arn}",
    )


def queue_is_empty(cloud: LocalCloud, queue_url: str) -> bool:
    attributes = cloud.client("sqs").get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return all(value == "0" for value in attributes.values())


def put_event(cloud: LocalCloud, detail_type: str, detail: dict[str, Any], source: str = "fixture.app") -> None:
    response = cloud.client("events").put_events(
        Entries=[{"Source": source, "DetailType": detail_type, "Detail": json.dumps(detail)}]
    )
    assert response["FailedEntryCount"] == 0


def invoke(cloud: LocalCloud, logical_id: str, event: Any) -> dict[str, Any]:
    response = cloud.client("lambda").invoke(FunctionName=physical_id(cloud, logical_id), Payload=json.dumps(event))
    response["Payload"] = json.loads(response["Payload"].read())
    return response  # type: ignore[no-any-return]


# --- 1. deploy --------------------------------------------------------------------------------------------------------
def test_deploy_outputs_have_cloudformation_style_physical_names(cloud: LocalCloud) -> None:
    # Given the fixture app deployed as stack "fixture"
    outputs = cloud.stack.outputs
    # Then every Output is there, resolved to a physical name of the form <stack>-<LogicalId>-<SUFFIX>
    assert set(outputs) == {"EchoMachineArn", "RecordTableName", "WorkQueueUrl"}
    assert re.fullmatch(
        rf"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{STACK_NAME}-EchoMachine-{PHYSICAL_NAME}",
        outputs["EchoMachineArn"],
    )
    assert re.fullmatch(rf"{STACK_NAME}-RecordTable-{PHYSICAL_NAME}", outputs["RecordTableName"])
    assert re.fullmatch(
        rf"https://sqs\.{REGION}\.amazonaws\.com/{ACCOUNT}/{STACK_NAME}-WorkQueue-{PHYSICAL_NAME}",
        outputs["WorkQueueUrl"],
    )
    # And the functions SAM generated from the template exist under the same kind of name
    functions = {f["FunctionName"] for f in cloud.client("lambda").list_functions()["Functions"]}
    assert any(re.fullmatch(rf"{STACK_NAME}-EchoFunction-{PHYSICAL_NAME}", name) for name in functions)


def test_deployed_state_machine_is_listed_and_executes(cloud: LocalCloud) -> None:
    # Given the EchoMachine from the template
    arn = cloud.stack.outputs["EchoMachineArn"]
    sfn = cloud.client("stepfunctions")
    # Then ListStateMachines shows it (it lives in the backend that executes)
    assert arn in [m["stateMachineArn"] for m in sfn.list_state_machines()["stateMachines"]]
    # When it is started
    execution = sfn.start_execution(stateMachineArn=arn, input=json.dumps({"hello": "world"}))
    # Then it runs the real EchoFunction and succeeds with its output
    result = finished(cloud, execution["executionArn"])
    assert result["status"] == "SUCCEEDED"
    output = json.loads(result["output"])
    assert output["event"] == {"hello": "world"}
    assert output["only"] == "echo"


def test_definition_substitutions_are_applied(cloud: LocalCloud) -> None:
    # Given the EchoMachine whose ASL file says "${EchoFunctionArn}"
    definition = cloud.client("stepfunctions").describe_state_machine(
        stateMachineArn=cloud.stack.outputs["EchoMachineArn"]
    )["definition"]
    # Then the deployed definition names the deployed EchoFunction's ARN and no placeholder is left
    echo_arn = cloud.client("lambda").get_function(FunctionName=physical_id(cloud, "EchoFunction"))["Configuration"][
        "FunctionArn"
    ]
    assert json.loads(definition)["States"]["Echo"]["Parameters"]["FunctionName"] == echo_arn
    assert "${" not in definition


def test_unsupported_resource_type_stops_the_deploy(cloud: LocalCloud) -> None:
    # Given a template with an AppSync API, which the offline cloud cannot emulate
    template = FIXTURES / "broken" / "unsupported.yaml"
    # When it is deployed
    with pytest.raises(UnsupportedResourceError) as raised:
        deploy(template, "unsupported", {}, REGION, "unsupported-artifacts")
    # Then the error names the logical ID and the type, and no stack was created
    assert "GraphApi: resource type AWS::AppSync::GraphQLApi is not supported offline" in str(raised.value)
    stacks = cloud.client("cloudformation").list_stacks()["StackSummaries"]
    assert "unsupported" not in [s["StackName"] for s in stacks]


def test_template_error_fails_with_sams_message(cloud: LocalCloud) -> None:
    # Given a template whose SQS event names no queue
    template = FIXTURES / "broken" / "invalid.yaml"
    # When it is deployed
    with pytest.raises(TemplateError) as raised:
        deploy(template, "invalid", {}, REGION, "invalid-artifacts")
    # Then the deploy fails with the message `sam deploy` would print
    assert str(raised.value) == "Resource with id [ConsumerWork] is invalid. Missing required property 'Queue'."


# --- 2. Lambda (workers) ------------------------------------------------------------------------------------------
def test_invoke_applies_each_functions_own_environment_and_context(cloud: LocalCloud) -> None:
    # Given EchoFunction and OtherFunction: the same code, different ONLY_ECHO, GREETING from Globals
    # When each is invoked through the Lambda Invoke API
    echo = invoke(cloud, "EchoFunction", {"n": 1})
    other = invoke(cloud, "OtherFunction", {"n": 2})
    # Then each ran with its own environment (seen at import time and at call time)
    assert echo["StatusCode"] == 200 and "FunctionError" not in echo
    assert (echo["Payload"]["only"], echo["Payload"]["greeting"]) == ("echo", "hello")
    assert (other["Payload"]["only"], other["Payload"]["greeting"]) == ("other", "hello")
    assert echo["Payload"]["event"] == {"n": 1}
    # And the context object describes the function that ran
    name = physical_id(cloud, "EchoFunction")
    context = echo["Payload"]
    assert context["function"] == name
    assert context["function_arn"] == f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
    assert int(context["memory_mb"]) == 128  # the runtime passes AWS_LAMBDA_FUNCTION_MEMORY_SIZE as it is
    assert 0 < context["remaining_ms"] <= 10_000  # Timeout: 10 from Globals
    assert uuid.UUID(context["request_id"]) != uuid.UUID(other["Payload"]["request_id"])
    # And the test process's own environment is untouched
    assert "ONLY_ECHO" not in os.environ


def test_handler_exception_is_reported_as_lambda_does(cloud: LocalCloud) -> None:
    # Given EchoFunction, which raises EchoFailed when asked to
    # When it is invoked with {"fail": ...}
    response = invoke(cloud, "EchoFunction", {"fail": "boom"})
    # Then the Invoke API reports an unhandled function error with the exception's class name and message
    assert response["StatusCode"] == 200
    assert response["FunctionError"] == "Unhandled"
    assert response["Payload"]["errorType"] == "EchoFailed"
    assert response["Payload"]["errorMessage"] == "boom"
    # And the stack trace is the handler's own frame, at the package's path on Lambda, formatted as the runtime does
    # (none of the offline runtime's frames, no path of this machine)
    source = (FIXTURES / "app" / "src" / "handlers" / "echo.py").read_text(encoding="utf-8").splitlines()
    line = next(number for number, text in enumerate(source, 1) if "raise EchoFailed" in text)
    assert response["Payload"]["stackTrace"] == [
        f'  File "/var/task/handlers/echo.py", line {line}, in handler\n    raise EchoFailed(event["fail"])\n'
    ]


def test_asl_catch_matches_the_exception_class_name(cloud: LocalCloud) -> None:
    # Given the EchoMachine, whose Catch names EchoFailed
    sfn = cloud.client("stepfunctions")
    # When it runs with an input that makes the function raise
    execution = sfn.start_execution(stateMachineArn=cloud.stack.outputs["EchoMachineArn"], input='{"fail": "x"}')
    # Then the Catch took the error: the execution succeeds through the "Failed" Pass state
    result = finished(cloud, execution["executionArn"])
    assert result["status"] == "SUCCEEDED"
    output = json.loads(result["output"])
    assert output["outcome"] == "caught"
    assert output["error"]["Error"] == "EchoFailed"


# --- 3. SQS event-source mapping --------------------------------------------------------------------------------------
def test_sqs_message_is_processed_and_deleted(cloud: LocalCloud) -> None:
    # Given the WorkQueue -> RecorderFunction mapping
    queue = cloud.stack.outputs["WorkQueueUrl"]
    # When a message is sent
    message_id = cloud.client("sqs").send_message(QueueUrl=queue, MessageBody=f"hello {uuid.uuid4()}")["MessageId"]
    # Then the function receives it once, and the queue is left empty
    wait_for(lambda: sqs_records_of(cloud, message_id), what="the message to be processed")
    wait_for(lambda: queue_is_empty(cloud, queue), what="the message to be deleted")
    assert [r["receiveCount"] for r in sqs_records_of(cloud, message_id)] == ["1"]


def test_sqs_delay_seconds_is_honoured(cloud: LocalCloud) -> None:
    # Given the WorkQueue -> RecorderFunction mapping
    queue = cloud.stack.outputs["WorkQueueUrl"]
    # When a message is sent with a 2 s delay
    sent = time.monotonic()
    message_id = cloud.client("sqs").send_message(QueueUrl=queue, MessageBody="later", DelaySeconds=2)["MessageId"]
    # Then it is processed, but not before the delay has passed
    wait_for(lambda: sqs_records_of(cloud, message_id), timeout=5, what="the delayed message")
    assert time.monotonic() - sent >= 2.0


def test_sqs_batch_item_failures_retry_only_the_failed_message_then_dead_letter_it(cloud: LocalCloud) -> None:
    # Given the WorkQueue (visibility timeout 2 s, maxReceiveCount 2 -> WorkDeadLetterQueue) and a mapping with
    # ReportBatchItemFailures
    queue = cloud.stack.outputs["WorkQueueUrl"]
    dlq = physical_id(cloud, "WorkDeadLetterQueue")
    # When one batch holds two good messages and one the function reports as failed
    sent = cloud.client("sqs").send_message_batch(
        QueueUrl=queue,
        Entries=[
            {"Id": "a", "MessageBody": "good a"},
            {"Id": "f", "MessageBody": "fail"},
            {"Id": "b", "MessageBody": "good b"},
        ],
    )["Successful"]
    ids = {entry["Id"]: entry["MessageId"] for entry in sent}
    # Then the failed message is received again after the visibility timeout ...
    wait_for(lambda: len(sqs_records_of(cloud, ids["f"])) == 2, timeout=6, what="the retry of the failed message")
    # ... and after maxReceiveCount receives it is in the dead-letter queue, with nothing left on the work queue
    dead = wait_for(lambda: receive_all(cloud, dlq), timeout=6, what="the failed message in the DLQ")
    assert [(m["MessageId"], m["Body"]) for m in dead] == [(ids["f"], "fail")]
    assert queue_is_empty(cloud, queue)
    # And the good messages were deleted after their first, successful delivery
    assert [r["receiveCount"] for r in sqs_records_of(cloud, ids["a"])] == ["1"]
    assert [r["receiveCount"] for r in sqs_records_of(cloud, ids["b"])] == ["1"]
    assert sorted(r["receiveCount"] for r in sqs_records_of(cloud, ids["f"])) == ["1", "2"]


def test_sqs_handler_exception_leaves_the_message_for_retry(cloud: LocalCloud) -> None:
    # Given the WorkQueue -> RecorderFunction mapping (visibility timeout 2 s)
    queue = cloud.stack.outputs["WorkQueueUrl"]
    # When the function raises while handling a message
    message_id = cloud.client("sqs").send_message(QueueUrl=queue, MessageBody="raise")["MessageId"]
    # Then the message is not deleted: it is delivered again after the visibility timeout
    wait_for(lambda: len(sqs_records_of(cloud, message_id)) == 2, timeout=6, what="the redelivery")
    assert sorted(r["receiveCount"] for r in sqs_records_of(cloud, message_id)) == ["1", "2"]
    wait_for(lambda: receive_all(cloud, physical_id(cloud, "WorkDeadLetterQueue")), timeout=6, what="the DLQ")


# --- 4. EventBridge ---------------------------------------------------------------------------------------------------
def test_event_reaches_a_lambda_target(cloud: LocalCloud) -> None:
    # Given RecorderFunction's EventBridgeRule on source fixture.app / detail-type "Record Me"
    marker = str(uuid.uuid4())
    # When a matching event is put on the default bus
    put_event(cloud, "Record Me", {"marker": marker})
    # Then the function receives the event, as EventBridge sends it
    record = wait_for(lambda: event_records_with(cloud, marker), what="the recorded event")
    event = json.loads(record[0]["body"])
    assert (event["source"], event["detail-type"], event["detail"]) == ("fixture.app", "Record Me", {"marker": marker})
    assert event["account"] == ACCOUNT
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", event["time"])


def test_event_starts_a_state_machine_target_with_input_path(cloud: LocalCloud) -> None:
    # Given TransformRule, which targets the EchoMachine with InputPath $.detail
    machine = cloud.stack.outputs["EchoMachineArn"]
    detail = {"jobId": str(uuid.uuid4())}
    # When a matching event is put
    put_event(cloud, "Transform Me", detail)
    # Then an execution starts with the detail as its input and runs the echo function on it
    sfn = cloud.client("stepfunctions")

    def started() -> list[dict[str, Any]]:
        executions = sfn.list_executions(stateMachineArn=machine)["executions"]
        described = [sfn.describe_execution(executionArn=e["executionArn"]) for e in executions]
        return [d for d in described if json.loads(d["input"]) == detail]

    execution = wait_for(started, what="the execution")[0]
    result = finished(cloud, execution["executionArn"])
    assert result["status"] == "SUCCEEDED"
    assert json.loads(result["output"])["event"] == detail


def test_sqs_targets_get_whole_event_input_input_path_and_input_transformer(cloud: LocalCloud) -> None:
    # Given TransformRule's four targets on the EventCaptureQueue
    queue = physical_id(cloud, "EventCaptureQueue")
    receive_all(cloud, queue)
    job = str(uuid.uuid4())
    # When a matching event is put
    put_event(cloud, "Transform Me", {"jobId": job})
    # Then the queue receives one body per target, each shaped as the target asks
    bodies: list[Any] = []

    def four_bodies() -> bool:
        bodies.extend(json.loads(m["Body"]) for m in receive_all(cloud, queue))
        ours = [b for b in bodies if b == {"constant": True} or job in json.dumps(b)]
        return len(ours) >= 4

    wait_for(four_bodies, what="four bodies")
    whole = [b for b in bodies if isinstance(b, dict) and b.get("detail-type") == "Transform Me"]
    assert len(whole) == 1
    assert whole[0]["detail"] == {"jobId": job}
    assert (whole[0]["source"], whole[0]["account"], whole[0]["region"]) == ("fixture.app", ACCOUNT, REGION)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", whole[0]["time"])
    assert {"constant": True} in bodies  # Input
    assert {"jobId": job} in bodies  # InputPath $.detail
    assert {"job": job, "kind": "transformed"} in bodies  # InputTransformer


def test_lambda_async_failure_is_retried_then_sent_to_on_failure_destination(cloud: LocalCloud) -> None:
    # Given RecorderFunction's EventInvokeConfig: MaximumRetryAttempts 1, OnFailure -> FailureQueue
    failure_queue = physical_id(cloud, "FailureQueue")
    marker = str(uuid.uuid4())
    # When an event makes the function raise
    put_event(cloud, "Record Me", {"marker": marker, "fail": True})
    # Then the failure lands in the FailureQueue as Lambda's on-failure record ...
    messages = wait_for(lambda: receive_all(cloud, failure_queue), what="the on-failure record")
    record = json.loads(messages[0]["Body"])
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 2
    assert record["requestPayload"]["detail"] == {"marker": marker, "fail": True}
    assert record["responsePayload"]["errorType"] == "RuntimeError"
    # ... after the function ran twice (the first attempt and one retry)
    assert len(event_records_with(cloud, marker)) == 2


def test_undeliverable_rule_target_goes_to_its_dead_letter_queue(cloud: LocalCloud) -> None:
    # Given a rule whose target is a function that does not exist, with a dead-letter queue
    sqs, events = cloud.client("sqs"), cloud.client("events")
    dlq = sqs.create_queue(QueueName="undeliverable-dlq")["QueueUrl"]
    events.put_rule(Name="to-missing-function", EventPattern=json.dumps({"detail-type": ["Undeliverable"]}))
    events.put_targets(
        Rule="to-missing-function",
        Targets=[
            {
                "Id": "missing",
                "Arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:does-not-exist",
                "RetryPolicy": {"MaximumRetryAttempts": 1},
                "DeadLetterConfig": {"Arn": queue_arn(cloud, dlq)},
            }
        ],
    )
    marker = str(uuid.uuid4())
    # When a matching event is put
    put_event(cloud, "Undeliverable", {"marker": marker})
    # Then the event ends in the dead-letter queue
    dead = wait_for(lambda: receive_all(cloud, dlq), what="the dead-lettered event")
    event = json.loads(dead[0]["Body"])
    assert (event["detail-type"], event["detail"]) == ("Undeliverable", {"marker": marker})
    # With the attributes EventBridge sets, which name the rule and the target a redrive replays it to
    attributes = {k: v["StringValue"] for k, v in dead[0]["MessageAttributes"].items()}
    assert attributes["RULE_ARN"].endswith(":rule/to-missing-function")
    assert attributes["TARGET_ARN"] == f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:does-not-exist"
    assert {"ERROR_CODE", "ERROR_MESSAGE"} <= set(attributes)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", event["time"])
    assert "ingestion-time" not in event


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (
            '{"instance": <instance>, "state": [9, <state>, true]}',
            '{"instance": "i-0123", "state": [9, "RUNNING", true]}',
        ),
        ('{"count": <count>, "missing": <missing>}', '{"count": 3, "missing": null}'),
        ('{"status": "<instance> is in state \\"<state>\\""}', '{"status": "i-0123 is in state \\"RUNNING\\""}'),
        (
            "The EC2 instance <instance> has changed state to <state>.",
            "The EC2 instance i-0123 has changed state to RUNNING.",
        ),
        ('"<instance> triggered"', '"i-0123 triggered"'),
        ('{"unknown": "<not-a-variable>"}', '{"unknown": "<not-a-variable>"}'),
    ],
)
def test_input_transformer_template(template: str, expected: str) -> None:
    # Given InputPathsMap values taken from an event
    values = {"instance": "i-0123", "state": "RUNNING", "count": 3, "missing": None}
    # When an InputTemplate is filled
    # Then JSON templates get JSON values (strings quoted) and strings and text templates get the bare values
    assert render_input_template(template, values) == expected


# --- 5. schedules -----------------------------------------------------------------------------------------------------
def test_rate_schedule_fires_with_the_speedup(cloud: LocalCloud) -> None:
    # Given TickRule, rate(1 minute) -> EventCaptureQueue, in a cloud running 60x faster than real time
    queue = physical_id(cloud, "EventCaptureQueue")
    tick_rule = cloud.client("events").describe_rule(Name=physical_id(cloud, "TickRule"))["Arn"]
    receive_all(cloud, queue)
    # When a couple of real seconds pass
    # Then a "Scheduled Event" from the rule arrives
    bodies = wait_for(
        lambda: [
            b for m in receive_all(cloud, queue) if (b := json.loads(m["Body"])).get("detail-type") == "Scheduled Event"
        ],
        timeout=3,
        what="a scheduled event",
    )
    assert (bodies[0]["source"], bodies[0]["resources"], bodies[0]["detail"]) == ("aws.events", [tick_rule], {})
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", bodies[0]["time"])


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("rate(1 minute)", "2026-11-21T10:00:30", "2026-11-21T10:01:30"),
        ("rate(5 minutes)", "2026-11-21T10:00:00", "2026-11-21T10:05:00"),
        ("rate(2 hours)", "2026-11-21T23:00:00", "2026-11-22T01:00:00"),
        ("rate(1 day)", "2026-11-21T10:00:00", "2026-11-22T10:00:00"),
        ("cron(0/15 * * * ? *)", "2026-11-21T10:07:00", "2026-11-21T10:15:00"),
        ("cron(0 12 * * ? *)", "2026-11-21T12:00:00", "2026-11-22T12:00:00"),  # strictly after
        ("cron(0 12 ? * 2 *)", "2026-11-21T13:00:00", "2026-11-23T12:00:00"),  # 2 = Monday; Nov 21 is a Saturday
        ("cron(0 12 ? * 1 *)", "2026-11-21T13:00:00", "2026-11-22T12:00:00"),  # 1 = Sunday
        ("cron(0 12 ? * 7 *)", "2026-11-20T13:00:00", "2026-11-21T12:00:00"),  # 7 = Saturday
        ("cron(30 8 ? * MON-FRI *)", "2026-11-21T09:00:00", "2026-11-23T08:30:00"),
        ("cron(0 12 ? * 2-6 *)", "2026-11-21T09:00:00", "2026-11-23T12:00:00"),  # Monday to Friday
        ("cron(0 12 ? * 2#1 *)", "2026-11-21T09:00:00", "2026-12-07T12:00:00"),  # the first Monday of the month
        ("cron(0 12 ? * 6L *)", "2026-11-21T09:00:00", "2026-11-27T12:00:00"),  # the last Friday of the month
        ("cron(0 0 1 * ? *)", "2026-11-21T00:00:00", "2026-12-01T00:00:00"),
    ],
)
def test_next_fire(expression: str, after: str, expected: str) -> None:
    # Given an EventBridge schedule expression and a moment
    moment = datetime.fromisoformat(after).replace(tzinfo=UTC)
    # When the next fire time is computed
    # Then it is the first time strictly after that moment, with EventBridge's weekday numbering (1 = Sunday)
    assert next_fire(expression, moment) == datetime.fromisoformat(expected).replace(tzinfo=UTC)


# --- 6. TTL -----------------------------------------------------------------------------------------------------------
def test_ttl_deletes_expired_items_and_keeps_live_ones(cloud: LocalCloud) -> None:
    # Given the RecordTable, with TTL on expiresAt, and one expired and one live item
    ddb = cloud.client("dynamodb")
    table = cloud.stack.outputs["RecordTableName"]
    assert ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "ENABLED",
        "AttributeName": "expiresAt",
    }
    expired, live = f"ttl#{uuid.uuid4()}", f"ttl#{uuid.uuid4()}"
    now = int(time.time())
    ddb.put_item(TableName=table, Item={"pk": {"S": expired}, "expiresAt": {"N": str(now - 60)}})
    ddb.put_item(TableName=table, Item={"pk": {"S": live}, "expiresAt": {"N": str(now + 3600)}})
    # When the offline cloud's TTL sweeper has run
    # Then the expired item is gone and the live one stays
    wait_for(
        lambda: "Item" not in ddb.get_item(TableName=table, Key={"pk": {"S": expired}}),
        timeout=30,
        what="the expired item to be deleted",
    )
    assert "Item" in ddb.get_item(TableName=table, Key={"pk": {"S": live}})


def test_ttl_follows_update_item_and_reads_only_the_items_due(
    cloud: LocalCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the RecordTable (TTL on expiresAt), swept at least once (an expired item put is gone), and the
    # sweeper's reads of whole tables counted from then on
    ddb = cloud.client("dynamodb")
    table = cloud.stack.outputs["RecordTableName"]

    def gone(key: str) -> bool:
        return "Item" not in ddb.get_item(TableName=table, Key={"pk": {"S": key}})

    primer = f"ttl#{uuid.uuid4()}"
    ddb.put_item(TableName=table, Item={"pk": {"S": primer}, "expiresAt": {"N": str(int(time.time()) - 60)}})
    wait_for(lambda: gone(primer), timeout=30, what="a first sweep")
    whole_table_reads = []
    all_items = Table.all_items

    def counted(self: Table) -> Any:
        if threading.current_thread().name == "localcloud-ttl":
            whole_table_reads.append(self.name)
        return all_items(self)

    monkeypatch.setattr(Table, "all_items", counted)
    soon = str(int(time.time()) + 4)  # time enough to put it off first, on a busy machine
    # When an UpdateItem gives a new item a past expiry, another's expiry is put off by an hour before it came due,
    # and a marker put after both comes due with the second one's first expiry
    updated, put_off, marker = (f"ttl#{uuid.uuid4()}" for _ in range(3))
    ddb.update_item(
        TableName=table,
        Key={"pk": {"S": updated}},
        UpdateExpression="SET expiresAt = :t",
        ExpressionAttributeValues={":t": {"N": str(int(time.time()) - 60)}},
    )
    ddb.put_item(TableName=table, Item={"pk": {"S": put_off}, "expiresAt": {"N": soon}})
    ddb.update_item(
        TableName=table,
        Key={"pk": {"S": put_off}},
        UpdateExpression="SET expiresAt = :t",
        ExpressionAttributeValues={":t": {"N": str(int(time.time()) + 3600)}},
    )
    ddb.put_item(TableName=table, Item={"pk": {"S": marker}, "expiresAt": {"N": soon}})

    # Then the updated item and the marker are deleted, the item put off stays, and no sweep read a whole table
    wait_for(lambda: gone(updated) and gone(marker), timeout=30, what="the updated item and the marker to expire")
    assert not gone(put_off)
    assert whole_table_reads == []


def test_ttl_turned_on_later_expires_the_items_written_before(cloud: LocalCloud) -> None:
    # Given a table without TTL holding an item whose expiresAt has passed
    ddb = cloud.client("dynamodb")
    table = f"late-ttl-{uuid.uuid4().hex[:8]}"
    ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(TableName=table, Item={"pk": {"S": "old"}, "expiresAt": {"N": str(int(time.time()) - 60)}})
    # When TTL is turned on for expiresAt
    ddb.update_time_to_live(TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"})
    # Then the item is deleted
    wait_for(
        lambda: "Item" not in ddb.get_item(TableName=table, Key={"pk": {"S": "old"}}),
        timeout=30,
        what="the item written before TTL was on to expire",
    )
    ddb.delete_table(TableName=table)


# --- 7. Logs subscription ---------------------------------------------------------------------------------------------
def test_log_subscription_delivers_only_matching_events(cloud: LocalCloud) -> None:
    # Given RecorderFunction subscribed to its stack's /fixture/<stack>/jobs with a JSON filter on eventType
    group = f"/fixture/{cloud.stack.name}/jobs"
    client = cloud.client("logs")
    stream = f"test-{uuid.uuid4()}"
    client.create_log_stream(logGroupName=group, logStreamName=stream)
    job = str(uuid.uuid4())
    matching = json.dumps({"eventType": "JOB_COMPLETED", "jobId": job})
    unrelated = json.dumps({"eventType": "JOB_STARTED", "jobId": job})
    # When a matching and an unrelated event are logged
    now = int(time.time() * 1000)
    client.put_log_events(
        logGroupName=group,
        logStreamName=stream,
        logEvents=[
            {"timestamp": now, "message": matching},
            {"timestamp": now + 1, "message": unrelated},
        ],
    )
    # Then the function receives an awslogs payload holding the matching event only
    record = wait_for(
        lambda: (
            event_records_with(cloud, "awslogs")
            and [r for r in event_records_with(cloud, "awslogs") if job in _awslogs(r)]
        ),
        what="the subscription delivery",
    )
    data = json.loads(_awslogs(record[0]))
    assert (data["messageType"], data["logGroup"], data["logStream"]) == ("DATA_MESSAGE", group, stream)
    assert [e["message"] for e in data["logEvents"]] == [matching]


def _awslogs(record: dict[str, Any]) -> str:
    payload = json.loads(record["body"])
    return gzip.decompress(base64.b64decode(payload["awslogs"]["data"])).decode()


@pytest.mark.parametrize(
    ("pattern", "message", "expected"),
    [
        ("", "anything", True),
        ("ERROR", "2026-11-21 ERROR disk full", True),
        ("ERROR", "all good", False),
        ('{ $.eventType = "JOB_COMPLETED" }', '{"eventType": "JOB_COMPLETED"}', True),
        ('{ $.eventType = "JOB_COMPLETED" }', '{"eventType": "JOB_STARTED"}', False),
        (
            '{ $.eventType = "JOB_COMPLETED" || $.eventType = "BUCKET_ACCESS_DENIED" }',
            '{"eventType": "BUCKET_ACCESS_DENIED"}',
            True,
        ),
        ('{ $.eventType = "JOB_*" }', '{"eventType": "JOB_FAILED"}', True),
        ('{ $.eventType != "JOB_COMPLETED" }', '{"eventType": "JOB_STARTED"}', True),
        ('{ $.job.state = "DONE" && $.job.count = 3 }', '{"job": {"state": "DONE", "count": 3}}', True),
        ('{ $.job.state = "DONE" && $.job.count = 3 }', '{"job": {"state": "DONE", "count": 4}}', False),
        ('{ $.eventType = "JOB_COMPLETED" }', "JOB_COMPLETED but not JSON", False),
        ('{ $.missing = "x" }', '{"eventType": "JOB_COMPLETED"}', False),
    ],
)
def test_log_filter_pattern_matching(pattern: str, message: str, expected: bool) -> None:
    # Given a subscription filter pattern and a log message
    # When they are matched
    # Then the result is what CloudWatch Logs would decide
    assert logs.matches(pattern, message) is expected


def test_log_filter_pattern_the_offline_cloud_cannot_evaluate_is_refused() -> None:
    # Given a parenthesised JSON pattern, which the offline matcher does not implement
    # When it is matched
    # Then it fails loudly rather than silently matching or dropping events
    with pytest.raises(ValueError, match="not supported offline"):
        logs.matches('{ ($.a = "1") && $.b = "2" }', '{"a": "1", "b": "2"}')


# --- 8. AWS CLI and boto3 over HTTP -----------------------------------------------------------------------------------
def test_boto3_over_http_sees_the_state_machine_and_its_executions(cloud: LocalCloud) -> None:
    # Given the printed endpoint and an execution of the EchoMachine
    machine = cloud.stack.outputs["EchoMachineArn"]
    execution = cloud.client("stepfunctions").start_execution(stateMachineArn=machine, input="{}")["executionArn"]
    finished(cloud, execution)
    # When a boto3 client talks to the endpoint over HTTP
    sfn = boto3.client(
        "stepfunctions",
        endpoint_url=cloud.aws_endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    # Then it lists the state machine and the execution, answered by the cloud's HTTP server (not in-process moto)
    listed = sfn.list_state_machines()
    assert "Werkzeug" in listed["ResponseMetadata"]["HTTPHeaders"]["server"]
    assert machine in [m["stateMachineArn"] for m in listed["stateMachines"]]
    assert execution in [e["executionArn"] for e in sfn.list_executions(stateMachineArn=machine)["executions"]]


def test_the_endpoint_keeps_a_connection_open_from_request_to_request(cloud: LocalCloud) -> None:
    # Given one HTTP/1.1 connection to the cloud's AWS endpoint, as boto3 keeps in its pool
    host, port = cloud.aws_endpoint.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    dynamodb_scope = f"Credential=testing/20260101/{REGION}/dynamodb/aws4_request, SignedHeaders=host, Signature=0"
    headers = {"Content-Type": "application/x-amz-json-1.0", "Authorization": f"AWS4-HMAC-SHA256 {dynamodb_scope}"}
    list_tables = {**headers, "X-Amz-Target": "DynamoDB_20120810.ListTables"}
    tables = sorted(cloud.client("dynamodb").list_tables()["TableNames"])

    def call(method: str, request_headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        connection.request(method, "/", body=body, headers=request_headers)
        response = connection.getresponse()
        return response.status, response.read()

    # When an AWS call, a request whose 100 KB body no service reads, and another AWS call go over it
    first = call("POST", list_tables, b"{}")
    socket_ = connection.sock
    unread = call("GET", headers, b"x" * 100_000)
    last = call("POST", list_tables, b"{}")

    # Then each gets its own answer, on the one connection, which is still open
    assert first[0] == 200 and sorted(json.loads(first[1])["TableNames"]) == tables
    assert unread[0] >= 400
    assert last == first
    assert connection.sock is socket_ is not None
    connection.close()


def test_a_service_has_no_endpoint_in_a_region_without_it(cloud: LocalCloud) -> None:
    # Given Amazon Translate, simulated by the cloud, which sa-east-1 lacks (botocore's endpoint data)
    translate = TranslateSimulator(cloud.config.region)
    cloud.add_simulator(translate)
    once = Config(retries={"total_max_attempts": 1})  # botocore retries a connection error; once shows it

    def over_http(region: str) -> requests.Response:
        """ListTextTranslationJobs signed for `region`, sent to the cloud's endpoint as a worker's SDK sends it."""
        headers = {
            "X-Amz-Target": "AWSShineFrontendService_20170701.ListTextTranslationJobs",
            "Content-Type": "application/x-amz-json-1.1",
        }
        request = AWSRequest(method="POST", url=cloud.aws_endpoint, data=b"{}", headers=headers)
        SigV4Auth(Credentials("testing", "testing"), "translate", region).add_auth(request)
        return requests.post(cloud.aws_endpoint, data=b"{}", headers=dict(request.headers), timeout=10)

    # When a client signed for sa-east-1 calls it, at the cloud's endpoint and in-process
    # Then neither call is answered, as on AWS, where translate.sa-east-1.amazonaws.com does not resolve: at the
    # endpoint the connection is closed unanswered, in-process the endpoint cannot be reached
    with pytest.raises(requests.ConnectionError):
        over_http("sa-east-1")
    in_process = boto3.client("translate", region_name="sa-east-1", config=once)
    with pytest.raises(EndpointConnectionError, match=r"https://translate\.sa-east-1\.amazonaws\.com/"):
        in_process.list_text_translation_jobs()
    # And signed for the cloud's Region both are answered, as is a service of every Region signed for sa-east-1
    assert over_http(REGION).json() == {"TextTranslationJobPropertiesList": []}
    assert cloud.client("translate").list_text_translation_jobs()["TextTranslationJobPropertiesList"] == []
    sqs = boto3.client("sqs", region_name="sa-east-1", endpoint_url=cloud.aws_endpoint)
    assert "QueueUrls" not in sqs.list_queues()
    simulators.unregister(translate)


def _aws_cli() -> str | None:
    beside_python = Path(sys.executable).parent / "aws"
    return str(beside_python) if beside_python.exists() else shutil.which("aws")


@pytest.mark.skipif(_aws_cli() is None, reason="the AWS CLI is not installed")
def test_aws_cli_lists_the_state_machine(cloud: LocalCloud) -> None:
    # Given the printed endpoint
    env = {
        **dict(os.environ),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_PAGER": "",
    }
    # When the stock AWS CLI asks it for the state machines
    done = subprocess.run(
        [
            str(_aws_cli()),
            "--endpoint-url",
            cloud.aws_endpoint,
            "stepfunctions",
            "list-state-machines",
            "--output",
            "json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Then it lists the deployed EchoMachine
    assert done.returncode == 0, done.stderr
    arns = [m["stateMachineArn"] for m in json.loads(done.stdout)["stateMachines"]]
    assert cloud.stack.outputs["EchoMachineArn"] in arns


# --- 9. HTTP API ------------------------------------------------------------------------------------------------------
def test_http_api_open_route_needs_no_signature(cloud: LocalCloud) -> None:
    # Given the HttpApi's /health route with Auth: NONE
    assert cloud.http is not None
    # When it is called without a signature
    response = requests.get(f"{cloud.http.url}/health?probe=1", timeout=10)
    # Then the ApiFunction answers with the payload-format-2.0 event it received
    assert response.status_code == 200
    event = response.json()
    assert (event["version"], event["routeKey"], event["rawPath"]) == ("2.0", "GET /health", "/health")
    assert event["queryStringParameters"] == {"probe": "1"}


def test_http_api_iam_route_refuses_unsigned_requests(cloud: LocalCloud) -> None:
    # Given the /things/{id} route, protected by the API's default AWS_IAM authorizer
    assert cloud.http is not None
    # When it is called without a signature
    response = requests.get(f"{cloud.http.url}/things/abc", timeout=10)
    # Then API Gateway's 403 comes back and the function is not called
    assert response.status_code == 403
    assert response.json() == {"message": "Forbidden"}


def test_http_api_iam_route_accepts_a_sigv4_signed_request(cloud: LocalCloud) -> None:
    # Given the /things/{id} route and the offline cloud's default credential
    assert cloud.http is not None
    url = f"{cloud.http.url}/things/abc"
    request = AWSRequest(method="GET", url=url)
    credentials = Credentials(DEFAULT_CREDENTIAL.access_key_id, DEFAULT_CREDENTIAL.secret_access_key)
    # When the request is signed for execute-api with that credential
    SigV4Auth(credentials, "execute-api", REGION).add_auth(request)
    response = requests.get(url, headers=dict(request.headers), timeout=10)
    # Then the function is called, and the event names the caller
    assert response.status_code == 200, response.text
    event = response.json()
    assert event["pathParameters"] == {"id": "abc"}
    assert event["requestContext"]["authorizer"]["iam"]["userArn"] == DEFAULT_CREDENTIAL.user_arn


def test_a_cloud_started_and_stopped_inside_another_leaves_the_outer_clouds_simulators_answering(
    cloud: LocalCloud,
) -> None:
    # Given the cloud answering Translate with its simulator
    translate = TranslateSimulator(cloud.config.region)
    cloud.add_simulator(translate)

    # When another cloud (a test's own stack, say) starts inside it, adds a simulator of its own, and stops
    config = replace(cloud.config, stack_name="nested", aws_port=0, http_port=0)
    with LocalCloud(config) as nested:
        macie = MacieSimulator(cloud.config.region)
        nested.add_simulator(macie)
    # Then only the nested cloud's simulator is gone: the outer cloud's Translate still answers
    assert simulators.active("macie2") is None
    assert simulators.active("translate") is translate
    assert cloud.client("translate").list_text_translation_jobs()["TextTranslationJobPropertiesList"] == []
    simulators.unregister(translate)
