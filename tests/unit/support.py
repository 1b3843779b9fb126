"""Helpers for the unit tests (fixtures live in conftest.py): template.yaml deployed on moto, the functions, real
waiting tasks.

Nothing here retypes the template: `localcloud.deploy` stands it up on moto as `sam deploy` would (the same code the
offline cloud deploys with), so every table, queue, bucket, bus, rule and state machine is the template's, under the
name CloudFormation gives it, and `invoke` runs a handler with exactly its function's Environment.

Step Functions runs for real on moto (`execute_state_machine`): `Workflows.start()` starts an execution whose one task
waits with `.waitForTaskToken` and hands its token over an SQS queue, so SendTaskSuccess / SendTaskFailure act on
a real task and DescribeExecution shows what the workflow saw.

What moto lacks (Translate, Macie, Bedrock Data Automation, HealthLake) answers in the documented shapes that
localcloud/shapes.py builds for the simulators too.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib
import json
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from samtranslator.yaml_helper import yaml_parse

from localcloud.deploy import ACCOUNT_ID, Resource, Stack, deploy
from localcloud.lambda_bootstrap import LambdaContext
from localcloud.pollers import sqs_record

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
TEMPLATE = REPO / "template.yaml"
EVENTS = REPO / "events"
REGION = "us-east-1"
ACCOUNT = ACCOUNT_ID
STACK = "callback-kit"  # the stack the samples under events/ were taken from, so they name its resources
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/{STACK}-workflow"
MOTO_CONFIG: Any = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
# The export workflow's resources have `Condition: ExportEnabled`, which holds only with a data store to export
# (tests that talk to a simulated HealthLake point HEALTHLAKE_DATASTORE_ID at its data store instead).
TEST_PARAMETERS = {"HealthLakeDatastoreId": "0123456789abcdef0123456789abcdef"}
WAIT_S = 10.0  # deadline for anything asynchronous (an execution starting or ending); normally well under 0.1 s
POLL_S = 0.01


# ----------------------------------------------------------------------------------------------------------------
# template.yaml, deployed
# ----------------------------------------------------------------------------------------------------------------
@functools.cache
def template() -> dict[str, Any]:
    """template.yaml as written (for checks of the template itself; resolved values come from `Deployed`)."""
    return dict(yaml_parse(TEMPLATE.read_text()))


@dataclass
class Deployed:
    """template.yaml as `localcloud.deploy` stood it up on moto: resources by logical id, intrinsics resolved by
    moto's CloudFormation (the one resolver the offline cloud uses too)."""

    stack: Stack
    deliveries: Deliveries  # what the stack's rules delivered to its functions (recorded, not run)

    def resource(self, logical_id: str) -> Resource:
        return next(r for r in self.stack.resources if r.logical_id == logical_id)

    def physical_id(self, logical_id: str) -> str:
        return self.resource(logical_id).physical_id

    def function(self, module: str) -> Resource:
        """The Lambda function whose Handler is `handlers.<module>.handler`."""
        return next(f for f in self.functions() if f.properties["Handler"] == f"handlers.{module}.handler")

    def function_arn(self, module: str) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function(module).physical_id}"

    def functions(self) -> list[Resource]:
        return self.stack.of_type("AWS::Lambda::Function")

    def environment(self, function: Resource) -> dict[str, str]:
        """The function's own Environment.Variables (Globals merged in by SAM), as Lambda hands them over."""
        variables = function.properties.get("Environment", {}).get("Variables", {})
        return {name: str(value) for name, value in variables.items()}

    def all_environments(self) -> dict[str, str]:
        """Every function's variables in one mapping (the names tests look resources up by)."""
        merged: dict[str, str] = {}
        for function in self.functions():
            merged |= self.environment(function)
        return merged

    def rule_patterns(self, module: str) -> dict[str, dict[str, Any]]:
        """The deployed EventBridge rules that target the function with this handler: rule logical id -> pattern."""
        arn = self.function_arn(module)
        return {
            rule.logical_id: rule.properties["EventPattern"]
            for rule in self.stack.of_type("AWS::Events::Rule")
            if any(target["Arn"] == arn for target in rule.properties.get("Targets", []))
        }


def deploy_template(deliveries: Deliveries) -> Deployed:
    """Deploy template.yaml into the active moto mock as `sam deploy` would (TEST_PARAMETERS for its parameters)."""
    return Deployed(deploy(TEMPLATE, STACK, TEST_PARAMETERS, REGION, f"{STACK}-artifacts"), deliveries)


# ----------------------------------------------------------------------------------------------------------------
# Loading and invoking the project's code
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


def cold_start() -> None:
    """Forget what the functions cache for their lifetime (settings, clients, services): every `functools.cache`
    defined in a loaded module of src/, found rather than listed, so a new cache cannot be missed."""
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] not in {"handlers", "shared"}:
            continue
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", None) == name:
                value.cache_clear()


def check_observability(environment: dict[str, str]) -> None:
    """Powertools reads its environment when shared.observability is imported, as in a Lambda cold start. A test
    module that imports the handlers (or shared.callback.service) at its top would import it before the fixture sets the
    environment, and metrics would fail for want of a namespace: import them inside the tests."""
    observability = importlib.import_module("shared.observability")
    assert observability.metrics.namespace == environment["POWERTOOLS_METRICS_NAMESPACE"], check_observability.__doc__
    assert observability.logger.service == environment["POWERTOOLS_SERVICE_NAME"], check_observability.__doc__


_deployed: list[Deployed] = []  # the stack of the running test package (conftest's `deployed` fixture sets it)


def invoke(module: str, event: dict[str, Any]) -> Any:
    """Call `handlers.<module>.handler` the way Lambda does: a copy of the event, the context object of the offline
    Lambda runtime, and that function's own environment (a variable the template gives another function but not
    this one is missing here as on AWS; one the test set itself stays as the test set it)."""
    deployed = _deployed[-1]
    function = deployed.function(module)
    own, everyone = deployed.environment(function), deployed.all_environments()
    reserved = {
        "AWS_LAMBDA_FUNCTION_NAME": function.physical_id,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.properties.get("MemorySize", 128)),
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function.physical_id}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "2026/01/15/[$LATEST]unittest",
    }
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name in set(everyone) - set(own):
            if os.environ.get(name) == everyone[name]:
                monkeypatch.delenv(name)
        for name, value in (own | reserved).items():
            if os.environ.get(name) in {None, everyone.get(name)}:
                monkeypatch.setenv(name, value)
        handler = importlib.import_module(f"handlers.{module}").handler
        arn = deployed.function_arn(module)
        context = LambdaContext({"requestId": str(uuid.uuid4()), "functionArn": arn, "deadlineMs": _deadline_ms()})
        return handler(json.loads(json.dumps(event)), context)


def _deadline_ms() -> int:
    return int(time.time() * 1000) + 30_000


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
    stack: Deployed

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
class Deliveries:
    """The offline cloud's EventBridge delivery (gap 15 in docs/offline-cloud.md) with each function or state
    machine target recorded instead of run: what the template's rules would hand which target."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, list[Any]] = {}

    def deliver(self, target_arn: str, payload: Any) -> None:
        with self._lock:
            self._events.setdefault(target_arn, []).append(payload)

    def clear(self) -> None:
        with self._lock:
            self._events.clear()

    def take(self, target_arn: str) -> list[Any]:
        with self._lock:
            return self._events.pop(target_arn, [])


@dataclass
class EventBus:
    """What the rules delivered to one target."""

    deliveries: Deliveries
    target_arn: str

    def delivered(self) -> list[dict[str, Any]]:
        """Every event delivered to the target since the last call, once each."""
        return self.deliveries.take(self.target_arn)


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


def empty_bucket(s3: Any, bucket: str) -> None:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for listed in page.get("Contents", []):
            s3.delete_object(Bucket=bucket, Key=listed["Key"])


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
    """What Lambda's SQS event source mapping hands the function (localcloud's records): one per message body."""
    queue_name = _deployed[-1].physical_id(queue_logical_id).rsplit("/", 1)[-1]
    queue_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{queue_name}"
    messages = [
        {
            "MessageId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{n}:{body}")),
            "ReceiptHandle": f"AQEB{uuid.uuid4().hex}",
            "Body": body if isinstance(body, str) else json.dumps(body),
            "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1768473000123"},
        }
        for n, body in enumerate(bodies)
    ]
    return {"Records": [sqs_record(message, queue_arn, REGION) for message in messages]}


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
