"""Helpers for the unit tests (fixtures live in conftest.py): template.yaml, the functions, real waiting tasks.

Nothing here retypes the template: the table's key schema, attribute definitions and TTL attribute, and the
functions' environment variables (Globals), are read from template.yaml, so a template change reaches the tests.

Step Functions runs for real on moto (`execute_state_machine`): `Workflows.start()` starts an execution whose one task
waits with `.waitForTaskToken` and hands its token over an SQS queue, so SendTaskSuccess / SendTaskFailure act on
a real task and DescribeExecution shows what the workflow saw.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from samtranslator.yaml_helper import yaml_parse

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
TEMPLATE = REPO / "template.yaml"
EVENTS = REPO / "events"
REGION = "us-east-1"
ACCOUNT = "123456789012"
STACK = "callback-kit-test"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/{STACK}-workflow"
MOTO_CONFIG: Any = {"stepfunctions": {"execute_state_machine": True}}
# The variables the functions must get from the template's Globals (the tests rely on each of them).
REQUIRED_VARIABLES = {
    "TOKEN_TABLE",
    "TASK_TIMEOUT_SECONDS",
    "TOKEN_TTL_MARGIN_SECONDS",
    "POWERTOOLS_SERVICE_NAME",
    "POWERTOOLS_METRICS_NAMESPACE",
}
WAIT_S = 10.0  # deadline for anything asynchronous (an execution starting or ending); normally well under 0.1 s
POLL_S = 0.01


# ----------------------------------------------------------------------------------------------------------------
# template.yaml
# ----------------------------------------------------------------------------------------------------------------
@functools.cache
def template() -> dict[str, Any]:
    return dict(yaml_parse(TEMPLATE.read_text()))


def physical_name(logical_id: str) -> str:
    """The name CloudFormation would give the resource (stack-LogicalId-suffix), stable within a test run."""
    return f"{STACK}-{logical_id}-UNITTEST"


def _resolve(value: Any) -> str:
    """A Globals value as the function sees it: `!Ref` to a parameter gives its default, to a resource its name."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        name = value["Ref"]
        parameters = template().get("Parameters", {})
        if name in parameters:
            return str(parameters[name]["Default"])
        if name in template()["Resources"]:
            return physical_name(name)
        raise KeyError(f"template.yaml: !Ref {name} names neither a parameter nor a resource")
    if isinstance(value, dict):
        raise TypeError(f"template.yaml: the unit tests cannot resolve {value!r} in Globals.Function.Environment")
    return str(value)


def function_environment() -> dict[str, str]:
    """Globals.Function.Environment.Variables of template.yaml, resolved with the parameters' defaults."""
    variables = template()["Globals"]["Function"]["Environment"]["Variables"]
    resolved = {name: _resolve(value) for name, value in variables.items()}
    missing = REQUIRED_VARIABLES - set(resolved)
    assert not missing, f"template.yaml Globals no longer gives the functions {sorted(missing)}"
    return resolved


def template_handlers() -> set[str]:
    """The `Handler` of every function in template.yaml (`handlers.<module>.handler`)."""
    return {
        resource["Properties"]["Handler"]
        for resource in template()["Resources"].values()
        if resource.get("Type") == "AWS::Serverless::Function"
    }


def create_table(logical_id: str) -> Any:
    """Create the table the template declares (key schema, attribute definitions, billing mode, TTL)."""
    properties = template()["Resources"][logical_id]["Properties"]
    name = physical_name(logical_id)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    dynamodb.create_table(
        TableName=name,
        KeySchema=properties["KeySchema"],
        AttributeDefinitions=properties["AttributeDefinitions"],
        BillingMode=properties.get("BillingMode", "PROVISIONED"),
    )
    if "TimeToLiveSpecification" in properties:
        dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification=properties["TimeToLiveSpecification"])
    return boto3.resource("dynamodb", region_name=REGION).Table(name)


# ----------------------------------------------------------------------------------------------------------------
# Loading the project's code
# ----------------------------------------------------------------------------------------------------------------
def use_project_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `handlers` and `shared` resolve to src/ even if another app's copies were imported in this process
    (the localcloud tests load a fixture app that also has a `handlers` package)."""
    monkeypatch.syspath_prepend(str(SRC))
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] not in {"handlers", "shared"}:
            continue
        file = getattr(module, "__file__", None)
        if not file or not Path(file).resolve().is_relative_to(SRC):
            del sys.modules[name]


def clear_caches() -> None:
    importlib.import_module("shared.settings").callback_settings.cache_clear()
    importlib.import_module("shared.callback").callbacks.cache_clear()
    aws = importlib.import_module("shared.aws")
    aws.client.cache_clear()
    aws.table.cache_clear()


def check_observability(environment: dict[str, str]) -> None:
    """Powertools reads its environment when shared.observability is imported, as in a Lambda cold start. A test
    module that imports the handlers (or shared.callback) at its top would import it before the fixture sets the
    environment, and metrics would fail for want of a namespace: import them inside the tests."""
    observability = importlib.import_module("shared.observability")
    assert observability.metrics.namespace == environment["POWERTOOLS_METRICS_NAMESPACE"], check_observability.__doc__
    assert observability.logger.service == environment["POWERTOOLS_SERVICE_NAME"], check_observability.__doc__


@dataclass
class LambdaContext:
    """The attributes of the Lambda Python runtime's context object that Powertools reads."""

    function_name: str
    memory_limit_in_mb: int = 256
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return "2026/01/01/[$LATEST]unittest"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def invoke(module: str, event: dict[str, Any]) -> Any:
    """Call `handlers.<module>.handler` the way Lambda does (a copy of the event, a context object)."""
    handler = importlib.import_module(f"handlers.{module}").handler
    return handler(json.loads(json.dumps(event)), LambdaContext(function_name=f"{STACK}-{module}"))


# ----------------------------------------------------------------------------------------------------------------
# Step Functions: real waiting tasks
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class WaitingTask:
    """An execution parked on a `.waitForTaskToken` task."""

    execution_arn: str
    token: str
    sfn: Any = field(repr=False)

    def describe(self) -> dict[str, Any]:
        return dict(self.sfn.describe_execution(executionArn=self.execution_arn))

    def status(self) -> str:
        return str(self.describe()["status"])

    def wait_until_closed(self) -> dict[str, Any]:
        """Poll DescribeExecution until the execution has ended; return it."""
        deadline = time.monotonic() + WAIT_S
        while (execution := self.describe())["status"] == "RUNNING":
            assert time.monotonic() < deadline, f"{self.execution_arn} still RUNNING after {WAIT_S} s"
            time.sleep(POLL_S)
        return execution

    def stop(self) -> None:
        """StopExecution, then wait until it is ABORTED (the callback wait is over)."""
        self.sfn.stop_execution(executionArn=self.execution_arn)
        assert self.wait_until_closed()["status"] == "ABORTED"


class Workflows:
    """Starts executions that wait for a task token and fetches each token from the queue the task sends it to."""

    def __init__(self) -> None:
        self.sfn = boto3.client("stepfunctions", region_name=REGION)
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.queue_url = self.sqs.create_queue(QueueName=f"{STACK}-task-tokens")["QueueUrl"]
        self._machines: dict[int | None, str] = {}
        self._tokens: dict[str, str] = {}  # execution ARN -> token, for messages received while waiting for another

    def _state_machine(self, timeout_seconds: int | None) -> str:
        if timeout_seconds not in self._machines:
            task: dict[str, Any] = {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                "Parameters": {
                    "QueueUrl": self.queue_url,
                    "MessageBody": {"executionArn.$": "$$.Execution.Id", "taskToken.$": "$$.Task.Token"},
                },
                "End": True,
            }
            if timeout_seconds is not None:
                task["TimeoutSeconds"] = timeout_seconds
            definition = {"StartAt": "WaitForJob", "States": {"WaitForJob": task}}
            self._machines[timeout_seconds] = self.sfn.create_state_machine(
                name=f"{STACK}-wait-{timeout_seconds or 'forever'}",
                definition=json.dumps(definition),
                roleArn=ROLE_ARN,
            )["stateMachineArn"]
        return self._machines[timeout_seconds]

    def start(self, timeout_seconds: int | None = None) -> WaitingTask:
        """Start an execution and return it once its task is waiting, with the task's token."""
        execution_arn = self.sfn.start_execution(
            stateMachineArn=self._state_machine(timeout_seconds), name=f"wait-{uuid.uuid4()}", input="{}"
        )["executionArn"]
        deadline = time.monotonic() + WAIT_S
        while execution_arn not in self._tokens:
            assert time.monotonic() < deadline, f"no task token from {execution_arn} within {WAIT_S} s"
            for message in self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get(
                "Messages", []
            ):
                body = json.loads(message["Body"])
                self._tokens[body["executionArn"]] = body["taskToken"]
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
            if execution_arn not in self._tokens:
                time.sleep(POLL_S)
        return WaitingTask(execution_arn, self._tokens.pop(execution_arn), self.sfn)

    def stop_all(self) -> None:
        """Stop every execution still waiting, so no interpreter thread outlives the test."""
        for machine in self._machines.values():
            for execution in self.sfn.list_executions(stateMachineArn=machine, statusFilter="RUNNING")["executions"]:
                WaitingTask(execution["executionArn"], "", self.sfn).stop()


# ----------------------------------------------------------------------------------------------------------------
# The spy on the Step Functions client
# ----------------------------------------------------------------------------------------------------------------
class ClientSpy:
    """Delegates to a boto3 client and records every API call (name and keyword arguments), even one that raises."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return attribute

        def record(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            return attribute(**kwargs)

        return record

    def calls_to(self, name: str) -> list[dict[str, Any]]:
        return [kwargs for called, kwargs in self.calls if called == name]


@dataclass
class Aws:
    """The offline account a test runs in."""

    environment: dict[str, str]
    table: Any  # boto3 DynamoDB Table of the token table
    workflows: Workflows

    def items(self) -> list[dict[str, Any]]:
        return list(self.table.scan(ConsistentRead=True)["Items"])

    def clear(self) -> None:
        """Delete every item (the next test starts from an empty table)."""
        with self.table.batch_writer() as batch:
            for item in self.items():
                batch.delete_item(Key={"jobKey": item["jobKey"]})

    def item(self, job_key: str) -> dict[str, Any] | None:
        item = self.table.get_item(Key={"jobKey": job_key}, ConsistentRead=True).get("Item")
        return dict(item) if item else None
