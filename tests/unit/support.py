"""Helpers for the unit tests (fixtures live in conftest.py): template.yaml, the functions, real waiting tasks.

Nothing here retypes the template: the table's key schema, attribute definitions and TTL attribute, and the
functions' environment variables (Globals), are read from template.yaml, so a template change reaches the tests.

Step Functions runs for real on moto (`execute_state_machine`): `Workflows.start()` starts an execution whose one task
waits with `.waitForTaskToken` and hands its token over an SQS queue, so SendTaskSuccess / SendTaskFailure act on
a real task and DescribeExecution shows what the workflow saw.

For what moto lacks (Translate, Macie classification jobs and findings, Bedrock Data Automation, HealthLake), the
helpers at the end build what those services write and answer, in their documented shapes: describe responses,
Translate's batch output layout, Macie findings and job log events, CloudWatch Logs subscription payloads.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib
import json
import re
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from samtranslator.yaml_helper import yaml_parse

from localcloud.deploy import ACCOUNT_ID

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
TEMPLATE = REPO / "template.yaml"
EVENTS = REPO / "events"
REGION = "us-east-1"
ACCOUNT = ACCOUNT_ID
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


# Parameters the unit tests deploy with instead of their defaults: the export workflow's resources have
# `Condition: ExportEnabled`, which holds only with a data store to export (tests that talk to a simulated HealthLake
# point HEALTHLAKE_DATASTORE_ID at its data store instead).
TEST_PARAMETERS = {"HealthLakeDatastoreId": "0123456789abcdef0123456789abcdef"}
PSEUDO_PARAMETERS = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
}
SUB_VARIABLE = re.compile(r"\$\{(?P<name>[^}!][^}]*)\}")


def _ref(name: str, stack: str) -> str:
    """What `!Ref name` gives: a parameter's value, a pseudo parameter, or the resource's physical id."""
    parameters = template().get("Parameters", {})
    if name == "AWS::StackName":
        return stack
    if name in PSEUDO_PARAMETERS:
        return PSEUDO_PARAMETERS[name]
    if name in parameters:
        return str(TEST_PARAMETERS.get(name, parameters[name].get("Default", "")))
    resources = template()["Resources"]
    if name not in resources:
        raise KeyError(f"template.yaml: !Ref {name} names neither a parameter nor a resource")
    kind, properties = resources[name]["Type"], resources[name].get("Properties", {})
    if kind == "AWS::SQS::Queue":
        return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{physical_name(name)}"
    if kind == "AWS::S3::Bucket":
        return physical_name(name).lower()  # bucket names are lower case
    if kind == "AWS::Events::EventBus":
        return _resolve(properties["Name"], stack)
    if kind == "AWS::Serverless::StateMachine":  # its ARN, under its Name
        machine = _resolve(properties["Name"], stack) if "Name" in properties else physical_name(name)
        return f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{machine}"
    return physical_name(name)


def _get_att(name: str, attribute: str, stack: str) -> str:
    """What `!GetAtt name.attribute` gives, for the attributes the template uses."""
    kind = template()["Resources"][name]["Type"]
    if attribute == "QueueName" and kind == "AWS::SQS::Queue":
        return physical_name(name)
    if attribute != "Arn":
        raise TypeError(f"template.yaml: the unit tests cannot resolve !GetAtt {name}.{attribute}")
    arns = {
        "AWS::KMS::Key": f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{uuid.uuid5(uuid.NAMESPACE_URL, name)}",
        "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{physical_name(name)}",
        "AWS::SQS::Queue": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{physical_name(name)}",
        "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{physical_name(name)}",
        "AWS::S3::Bucket": f"arn:aws:s3:::{_ref(name, stack)}",
        "AWS::Serverless::Function": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{physical_name(name)}",
    }
    if kind == "AWS::Events::EventBus":
        return f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{_ref(name, stack)}"
    if kind not in arns:
        raise TypeError(f"template.yaml: the unit tests cannot resolve !GetAtt {name}.Arn ({kind})")
    return arns[kind]


def _resolve(value: Any, stack: str = STACK) -> str:
    """A value as the function sees it: `!Ref` to a parameter gives its default (or TEST_PARAMETERS), to a resource
    its physical id; `!GetAtt` its ARN; `!Sub` (string form) both; `!If` its first branch (TEST_PARAMETERS make
    every condition of the template true)."""
    if isinstance(value, dict) and set(value) == {"Fn::If"}:
        return _resolve(value["Fn::If"][1], stack)
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return _ref(value["Ref"], stack)
    if isinstance(value, dict) and set(value) == {"Fn::GetAtt"}:
        target = value["Fn::GetAtt"]
        name, attribute = target if isinstance(target, list) else target.split(".", 1)
        return _get_att(name, attribute, stack)
    if isinstance(value, dict) and set(value) == {"Fn::Sub"} and isinstance(value["Fn::Sub"], str):

        def variable(match: re.Match[str]) -> str:
            name, _, attribute = match["name"].partition(".")
            return _get_att(name, attribute, stack) if attribute else _ref(name, stack)

        return SUB_VARIABLE.sub(variable, value["Fn::Sub"])
    if isinstance(value, dict | list):
        raise TypeError(f"template.yaml: the unit tests cannot resolve {value!r}")
    return str(value)


def resolve_all(value: Any, stack: str = STACK) -> Any:
    """A template fragment (e.g. an EventBridge rule pattern) with its intrinsic functions resolved for `stack`."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in {"Ref", "Fn::GetAtt", "Fn::Sub", "Fn::If"}:
        return _resolve(value, stack)
    if isinstance(value, dict):
        return {key: resolve_all(item, stack) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve_all(item, stack) for item in value]
    return value


def function_variables(logical_id: str) -> dict[str, str]:
    """One function's own Environment.Variables from template.yaml, resolved as `_resolve` does."""
    variables = template()["Resources"][logical_id]["Properties"].get("Environment", {}).get("Variables", {})
    return {name: _resolve(value) for name, value in variables.items()}


def function_environment() -> dict[str, str]:
    """The functions' environment from template.yaml, resolved with the parameters' defaults (and TEST_PARAMETERS):
    Globals.Function.Environment.Variables, plus each function's own Environment.Variables (e.g. the export
    functions' `*ExportEnvironment` anchor, which the YAML parser has already expanded). A function's own variable
    the tests cannot resolve is left out (a test that needs it sets it)."""
    variables = template()["Globals"]["Function"]["Environment"]["Variables"]
    resolved = {name: _resolve(value) for name, value in variables.items()}
    missing = REQUIRED_VARIABLES - set(resolved)
    assert not missing, f"template.yaml Globals no longer gives the functions {sorted(missing)}"
    for resource in template()["Resources"].values():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        own = resource["Properties"].get("Environment", {}).get("Variables", {})
        for name, value in own.items():
            try:
                resolved.setdefault(name, _resolve(value))
            except (TypeError, KeyError):
                continue
    return resolved


def template_handlers() -> set[str]:
    """The `Handler` of every function in template.yaml (`handlers.<module>.handler`)."""
    return {
        resource["Properties"]["Handler"]
        for resource in template()["Resources"].values()
        if resource.get("Type") == "AWS::Serverless::Function"
    }


def rule_patterns(handler: str) -> dict[str, dict[str, Any]]:
    """The EventBridge rule patterns that invoke the function with this handler, by their event's name."""
    return {
        name: event["Properties"]["Pattern"]
        for resource in template()["Resources"].values()
        if resource.get("Type") == "AWS::Serverless::Function"
        and resource["Properties"]["Handler"] == f"handlers.{handler}.handler"
        for name, event in resource["Properties"].get("Events", {}).items()
        if event["Type"] == "EventBridgeRule"
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
    settings = importlib.import_module("shared.settings")
    settings.callback_settings.cache_clear()
    settings.export_settings.cache_clear()
    importlib.import_module("shared.callback.service").callbacks.cache_clear()
    aws = importlib.import_module("shared.aws")
    aws.client.cache_clear()
    aws.table.cache_clear()
    aws.account_id.cache_clear()
    reconcile_jobs = sys.modules.get("handlers.reconcile_jobs")  # its Reconciler holds the Callbacks of its cold start
    if reconcile_jobs is not None:
        reconcile_jobs.reconciler.cache_clear()


def check_observability(environment: dict[str, str]) -> None:
    """Powertools reads its environment when shared.observability is imported, as in a Lambda cold start. A test
    module that imports the handlers (or shared.callback.service) at its top would import it before the fixture sets the
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
        self._machines: dict[tuple[int | None, int | None], str] = {}
        self._tokens: dict[str, str] = {}  # execution ARN -> token, for messages received while waiting for another

    def _state_machine(self, timeout_seconds: int | None, heartbeat_seconds: int | None) -> str:
        if (timeout_seconds, heartbeat_seconds) not in self._machines:
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
            if heartbeat_seconds is not None:
                task["HeartbeatSeconds"] = heartbeat_seconds
            definition = {"StartAt": "WaitForJob", "States": {"WaitForJob": task}}
            self._machines[(timeout_seconds, heartbeat_seconds)] = self.sfn.create_state_machine(
                name=f"{STACK}-wait-{timeout_seconds or 'forever'}-heartbeat-{heartbeat_seconds or 'none'}",
                definition=json.dumps(definition),
                roleArn=ROLE_ARN,
            )["stateMachineArn"]
        return self._machines[(timeout_seconds, heartbeat_seconds)]

    def start(self, timeout_seconds: int | None = None, heartbeat_seconds: int | None = None) -> WaitingTask:
        """Start an execution and return it once its task is waiting, with the task's token. With
        `heartbeat_seconds` the task has HeartbeatSeconds, as the workflows' waiting tasks do (moto answers
        SendTaskHeartbeat for a task without it with InvalidToken)."""
        execution_arn = self.sfn.start_execution(
            stateMachineArn=self._state_machine(timeout_seconds, heartbeat_seconds),
            name=f"wait-{uuid.uuid4()}",
            input="{}",
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
                task = WaitingTask(execution["executionArn"], "", self.sfn)
                self.sfn.stop_execution(executionArn=task.execution_arn)
                task.wait_until_closed()  # ABORTED, or whatever it ended with an instant before the stop


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


# ----------------------------------------------------------------------------------------------------------------
# EventBridge
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class EventBus:
    """The default event bus with the resume function's rules from template.yaml; an SQS queue stands in for the
    function as their target, so what the rules would deliver can be read back."""

    sqs: Any
    queue_url: str

    def delivered(self) -> list[dict[str, Any]]:
        """Every event the rules delivered since the last call, once each (the queue is emptied)."""
        events: list[dict[str, Any]] = []
        while messages := self._receive():
            for message in messages:
                events.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
        return events

    def _receive(self) -> list[dict[str, Any]]:
        return list(self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get("Messages", []))


# ----------------------------------------------------------------------------------------------------------------
# The token table: time passing
# ----------------------------------------------------------------------------------------------------------------
def backdate_registration(aws: Aws, job_key: str, seconds: int) -> None:
    """Make a registered token look `seconds` older (the reconciler only looks at tasks waiting long enough)."""
    item = aws.item(job_key)
    assert item is not None and "token" in item, f"no registered token under {job_key}"
    aws.table.update_item(
        Key={"jobKey": job_key},
        UpdateExpression="SET registeredAt = :at",
        ExpressionAttributeValues={":at": int(item["registeredAt"]) - seconds},
    )


# ----------------------------------------------------------------------------------------------------------------
# CloudWatch Logs subscription events
# ----------------------------------------------------------------------------------------------------------------
MACIE_LOG_GROUP = "/aws/macie/classificationjobs"


def logs_subscription_event(
    log_events: list[dict[str, Any]],
    log_stream: str,
    log_group: str = MACIE_LOG_GROUP,
    subscription_filter: str = f"{STACK}-ForwardMacieLogsFunctionMacieJobLog-UNITTEST",
) -> dict[str, Any]:
    """What a CloudWatch Logs subscription hands a Lambda function: `awslogs.data` = base64(gzip(JSON))."""
    payload = {
        "messageType": "DATA_MESSAGE",
        "owner": ACCOUNT,
        "logGroup": log_group,
        "logStream": log_stream,
        "subscriptionFilters": [subscription_filter],
        "logEvents": log_events,
    }
    data = base64.b64encode(gzip.compress(json.dumps(payload).encode(), mtime=0)).decode()
    return {"awslogs": {"data": data}}


def logs_data(event: dict[str, Any]) -> dict[str, Any]:
    """The decoded payload of a CloudWatch Logs subscription event."""
    return dict(json.loads(gzip.decompress(base64.b64decode(event["awslogs"]["data"]))))


def macie_log_events(job_id: str, event_types: list[str], start_ms: int = 1_768_473_600_000) -> list[dict[str, Any]]:
    """Log events of a Macie classification job as Macie writes them (one JSON message per event)."""
    events = []
    for n, event_type in enumerate(event_types):
        message: dict[str, Any] = {
            "adminAccountId": ACCOUNT,
            "jobId": job_id,
            "eventType": event_type,
            "occurredAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime((start_ms + n * 1000) / 1000)),
            "description": f"Macie logged {event_type} for the job.",
            "jobName": f"documents-{job_id[:8]}",
        }
        if event_type.startswith("BUCKET_"):
            message |= {
                "operation": "ListObjectsV2",
                "affectedAccount": ACCOUNT,
                "affectedResource": {"type": "S3_BUCKET_NAME", "value": f"bucket-{n}"},
            }
        events.append({"id": f"{start_ms + n:056d}", "timestamp": start_ms + n * 1000, "message": json.dumps(message)})
    return events


# ----------------------------------------------------------------------------------------------------------------
# Documents, their translations (as Amazon Translate writes them) and Macie findings
# ----------------------------------------------------------------------------------------------------------------
def translation_output(
    s3: Any,
    bucket: str,
    input_prefix: str,
    output_prefix: str,
    job_id: str,
    languages: list[str],
    failed: frozenset[str] = frozenset(),
) -> dict[str, list[str]]:
    """Write what a finished Translate batch job writes for the documents under `input_prefix`: one translated file
    per document and language under `<output prefix><account>-TranslateText-<job id>/`, and one auxiliary
    translation details file per language under its `details/`. Documents in `failed` get an error entry instead of
    a translation. Returns source key -> translated keys."""
    sources = [
        o["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=input_prefix)
        for o in page.get("Contents", [])
        if not o["Key"].endswith("/")
    ]
    job_prefix = f"{output_prefix}{ACCOUNT}-TranslateText-{job_id}/"
    translated: dict[str, list[str]] = {source: [] for source in sources}
    for language in languages:
        details = []
        for source in sources:
            source_file = source.removeprefix(input_prefix)
            if source in failed:
                details.append({"sourceFile": source_file, "errorMessage": "The document could not be translated."})
                continue
            folder, _, name = source_file.rpartition("/")
            target_file = f"{folder}/{language}.{name}" if folder else f"{language}.{name}"
            s3.put_object(Bucket=bucket, Key=job_prefix + target_file, Body=f"[{language}] {source}".encode())
            details.append({"sourceFile": source_file, "targetFile": target_file, "auxiliaryData": {}})
            translated[source].append(job_prefix + target_file)
        auxiliary = {
            "sourceLanguageCode": "en",
            "targetLanguageCode": language,
            "charactersTranslated": "1024",
            "documentCountWithCustomerError": str(len(failed)),
            "documentCountWithServerError": "0",
            "inputDataPrefix": f"s3://{bucket}/{input_prefix}",
            "outputDataPrefix": f"s3://{bucket}/{job_prefix}",
            "details": details,
        }
        s3.put_object(
            Bucket=bucket,
            Key=f"{job_prefix}details/{language}.auxiliary-translation-details.json",
            Body=json.dumps(auxiliary).encode(),
        )
    return translated


def macie_finding(bucket: str, key: str, classification_job_id: str) -> dict[str, Any]:
    """A Macie sensitive-data finding for one S3 object (GetFindings response shape, the fields that matter)."""
    return {
        "id": uuid.uuid5(uuid.NAMESPACE_URL, f"s3://{bucket}/{key}#{classification_job_id}").hex,
        "accountId": ACCOUNT,
        "region": REGION,
        "type": "SensitiveData:S3Object/Personal",
        "category": "CLASSIFICATION",
        "count": 1,
        "severity": {"description": "High", "score": 3},
        "classificationDetails": {
            "jobId": classification_job_id,
            "jobArn": f"arn:aws:macie2:{REGION}:{ACCOUNT}:classification-job/{classification_job_id}",
            "originType": "SENSITIVE_DATA_DISCOVERY_JOB",
            "result": {
                "status": {"code": "COMPLETE"},
                "sensitiveData": [
                    {"category": "PERSONAL_INFORMATION", "detections": [{"type": "NAME", "count": 2}], "totalCount": 2}
                ],
            },
        },
        "resourcesAffected": {
            "s3Bucket": {"arn": f"arn:aws:s3:::{bucket}", "name": bucket},
            "s3Object": {"bucketArn": f"arn:aws:s3:::{bucket}", "key": key, "path": f"{bucket}/{key}"},
        },
    }


def tags_of(s3: Any, bucket: str, key: str) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]}


# ----------------------------------------------------------------------------------------------------------------
# What the services' describe calls answer (full response shapes; Stubber validates them against the models)
# ----------------------------------------------------------------------------------------------------------------
SUBMITTED_AT = datetime(2026, 1, 15, 10, 30, 5, tzinfo=UTC)
ENDED_AT = datetime(2026, 1, 15, 10, 42, 7, tzinfo=UTC)


def translate_job(job_id: str, status: str, message: str | None = None) -> dict[str, Any]:
    """DescribeTextTranslationJob's answer."""
    properties: dict[str, Any] = {
        "JobId": job_id,
        "JobName": f"documents-{job_id[:8]}",
        "JobStatus": status,
        "JobDetails": {"TranslatedDocumentsCount": 3, "DocumentsWithErrorsCount": 0, "InputDocumentsCount": 3},
        "SourceLanguageCode": "en",
        "TargetLanguageCodes": ["fr", "de"],
        "SubmittedTime": SUBMITTED_AT,
        "InputDataConfig": {"S3Uri": "s3://documents/incoming/", "ContentType": "text/plain"},
        "OutputDataConfig": {"S3Uri": "s3://documents/translated/"},
        "DataAccessRoleArn": f"arn:aws:iam::{ACCOUNT}:role/{STACK}-TranslateDataAccessRole",
    }
    if status not in {"SUBMITTED", "IN_PROGRESS"}:
        properties["EndTime"] = ENDED_AT
    if message:
        properties["Message"] = message
    return {"TextTranslationJobProperties": properties}


def macie_job(job_id: str, status: str, last_run_error: str = "NONE") -> dict[str, Any]:
    """DescribeClassificationJob's answer for a one-time job (`status` as the API spells it: COMPLETE, ...)."""
    return {
        "jobArn": f"arn:aws:macie2:{REGION}:{ACCOUNT}:classification-job/{job_id}",
        "jobId": job_id,
        "jobStatus": status,
        "jobType": "ONE_TIME",
        "name": f"documents-{job_id[:8]}",
        "clientToken": f"documents-{job_id[:8]}",
        "createdAt": SUBMITTED_AT,
        "initialRun": False,
        "lastRunTime": SUBMITTED_AT,
        "lastRunErrorStatus": {"code": last_run_error},
        "managedDataIdentifierSelector": "RECOMMENDED",
        "s3JobDefinition": {"bucketDefinitions": [{"accountId": ACCOUNT, "buckets": ["documents"]}]},
        "samplingPercentage": 100,
        "statistics": {"approximateNumberOfObjectsToProcess": 3.0, "numberOfRuns": 1.0},
        "tags": {},
    }


def bda_status(status: str, error_type: str | None = None, error_message: str | None = None) -> dict[str, Any]:
    """GetDataAutomationStatus's answer."""
    response: dict[str, Any] = {"status": status, "jobSubmissionTime": SUBMITTED_AT}
    if status in {"Success", "ClientError", "ServiceError"}:
        response |= {"jobCompletionTime": ENDED_AT, "jobDurationInSeconds": 14}
    if status == "Success":
        response["outputConfiguration"] = {"s3Uri": "s3://documents/bda-output/job_metadata.json"}
    if error_type:
        response |= {"errorType": error_type, "errorMessage": error_message or "The job failed."}
    return response


def healthlake_export(datastore_id: str, job_id: str, status: str, message: str | None = None) -> dict[str, Any]:
    """DescribeFHIRExportJob's answer."""
    properties: dict[str, Any] = {
        "JobId": job_id,
        "JobName": "nightly-export",
        "JobStatus": status,
        "SubmitTime": SUBMITTED_AT,
        "DatastoreId": datastore_id,
        "OutputDataConfig": {"S3Configuration": {"S3Uri": "s3://exports/fhir/", "KmsKeyId": "alias/exports"}},
        "DataAccessRoleArn": f"arn:aws:iam::{ACCOUNT}:role/{STACK}-HealthLakeExport",
    }
    if status in {"COMPLETED", "COMPLETED_WITH_ERRORS", "FAILED", "CANCEL_COMPLETED"}:
        properties["EndTime"] = ENDED_AT
    if message:
        properties["Message"] = message
    return {"ExportJobProperties": properties}


def invocation_arn(job_id: str) -> str:
    """The Bedrock Data Automation invocation ARN whose last part is the job id its events carry."""
    return f"arn:aws:bedrock:{REGION}:{ACCOUNT}:data-automation-invocation/{job_id}"


# ----------------------------------------------------------------------------------------------------------------
# The HealthLake export workflow's resources
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class ExportAccount:
    """The export workflow's resources from template.yaml on moto (the state table, the queue, the bucket and the
    export bus), as the functions' environment names them. Every event put on the bus is copied to `published`;
    `sqs` records the functions' SQS calls (a re-queued check carries DelaySeconds, so it is not receivable yet)."""

    environment: dict[str, str]
    table: Any  # boto3 DynamoDB Table of the export state table
    s3: Any
    published: EventBus
    sqs: ClientSpy  # the functions' SQS client

    @property
    def bucket(self) -> str:
        return self.environment["EXPORT_BUCKET"]

    def lock(self) -> dict[str, Any] | None:
        item = self.table.get_item(Key={"pk": "RUN"}, ConsistentRead=True).get("Item")
        return dict(item) if item else None

    def hold(self, execution_arn: str, run_status: str = "RUNNING", last_run_time: str | None = None) -> None:
        """The lock as an earlier execution left it."""
        item = {
            "pk": "RUN",
            "runStatus": run_status,
            "executionArn": execution_arn,
            "triggerTime": "2026-01-15T10:00:00Z",
        }
        if last_run_time is not None:
            item["lastRunTime"] = last_run_time
        self.table.put_item(Item=item)

    def started_exports(self) -> dict[str, str]:
        """executionArn -> the export job id it started (the state table's EXPORT# items)."""
        items = self.table.scan(ConsistentRead=True)["Items"]
        return {
            str(item["pk"]).removeprefix("EXPORT#"): str(item["jobId"])
            for item in items
            if str(item["pk"]).startswith("EXPORT#")
        }

    def checks_queued(self) -> list[tuple[dict[str, Any], int]]:
        """The check messages the functions sent to the export queue: (body, DelaySeconds)."""
        queue_url = self.environment["EXPORT_QUEUE_URL"]
        return [
            (json.loads(call["MessageBody"]), int(call.get("DelaySeconds", 0)))
            for call in self.sqs.calls_to("send_message")
            if call["QueueUrl"] == queue_url
        ]

    def manifest(self, key: str) -> list[dict[str, str]]:
        return list(json.loads(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()))


def sqs_event(bodies: list[dict[str, Any] | str], queue_logical_id: str = "ExportQueue") -> dict[str, Any]:
    """What Lambda's SQS event source mapping hands the function: one record per message body."""
    records = []
    for n, body in enumerate(bodies):
        text = body if isinstance(body, str) else json.dumps(body)
        records.append(
            {
                "messageId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{n}:{text}")),
                "receiptHandle": f"AQEB{uuid.uuid4().hex}",
                "body": text,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "1768473000123",
                    "SenderId": "AROAEXAMPLEROLEID:unittest",
                    "ApproximateFirstReceiveTimestamp": "1768473000456",
                },
                "messageAttributes": {},
                "md5OfBody": hashlib.md5(text.encode()).hexdigest(),  # noqa: S324 - what SQS sends
                "eventSource": "aws:sqs",
                "eventSourceARN": _get_att(queue_logical_id, "Arn", STACK),
                "awsRegion": REGION,
            }
        )
    return {"Records": records}


def with_bodies(event: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """An SQS event sample whose message bodies carry `changes` (e.g. this test's task token), md5OfBody to match."""
    copy = json.loads(json.dumps(event))
    for record in copy["Records"]:
        record["body"] = json.dumps({**json.loads(record["body"]), **changes})
        record["md5OfBody"] = hashlib.md5(record["body"].encode()).hexdigest()  # noqa: S324 - what SQS sends
    return copy


def ndjson(records: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(record, separators=(",", ":")).encode() + b"\n" for record in records)


def fhir_patients(count: int, start: int = 0) -> list[dict[str, Any]]:
    """FHIR Patient resources as a HealthLake export writes them (one per NDJSON line)."""
    return [
        {
            "resourceType": "Patient",
            "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"patient-{n}")),
            "meta": {"versionId": "1", "lastUpdated": "2026-01-15T10:20:00.000Z"},
            "name": [{"family": f"Family{n}", "given": [f"Given{n}"]}],
            "gender": "unknown",
        }
        for n in range(start, start + count)
    ]


def asl_states(workflow: str) -> list[dict[str, Any]]:
    """Every state of statemachines/<workflow>.asl.json, those of Parallel branches and Map processors included."""

    def states(definition: dict[str, Any]) -> list[dict[str, Any]]:
        found = []
        for state in definition.get("States", {}).values():
            found.append(state)
            for inner in [*state.get("Branches", []), state.get("ItemProcessor") or state.get("Iterator") or {}]:
                found += states(inner)
        return found

    return states(json.loads((REPO / "statemachines" / f"{workflow}.asl.json").read_text()))
