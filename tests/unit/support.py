"""Helpers for the unit tests (fixtures live in conftest.py): template.yaml deployed on moto, and the functions.

Nothing here retypes the template: `localcloud.deploy` stands it up on moto as `sam deploy` would (the same code the
offline cloud deploys with), so every table, queue, bucket, bus, rule and state machine is the template's, under the
name CloudFormation gives it, and `invoke` runs a handler with exactly its function's Environment.

Real waiting tasks live in waiting.py; what the services answer and what Lambda hands the functions (built by
localcloud's shapes, as the simulators build them) in payloads.py; the task API's account in task_support.py.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from samtranslator.yaml_helper import yaml_parse

from localcloud.account import ACCOUNT_ID
from localcloud.deploy import Resource, Stack, deploy
from localcloud.runtime.lambda_bootstrap import LambdaContext

if TYPE_CHECKING:
    from tests.unit.waiting import Workflows

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
TEMPLATE = REPO / "template.yaml"
EVENTS = REPO / "events"
REGION = "us-east-1"
ACCOUNT = ACCOUNT_ID
STACK = "callback-kit"  # the stack the samples under events/ were taken from, so they name its resources
MOTO_CONFIG: Any = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
# The export workflow's resources have `Condition: ExportEnabled`, which holds only with a data store to export
# (tests that talk to a simulated HealthLake point HEALTHLAKE_DATASTORE_ID at its data store instead).
TEST_PARAMETERS = {"HealthLakeDatastoreId": "a1b2c3d4e5f60718293a4b5c6d7e8f90"}  # the samples' data store
WAIT_S = 10.0  # deadline for anything asynchronous (an execution starting or ending); normally well under 0.1 s


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

    def of_this_stack(self, event: dict[str, Any]) -> dict[str, Any]:
        """A job event sample as this stack's job sends it: a BDA job writes to the stack's document bucket (extract's
        jobs do), which the resume rule matches. A copy: the sample stays as it is."""
        event = copy.deepcopy(event)
        if event["source"] == "aws.bedrock":
            event["detail"]["output_s3_location"]["s3_bucket"] = self.physical_id("DocumentBucket")
        return event

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
        deadline_ms = int(time.time() * 1000) + 30_000
        context = LambdaContext({"requestId": str(uuid.uuid4()), "functionArn": arn, "deadlineMs": deadline_ms})
        return handler(json.loads(json.dumps(event)), context)


# ----------------------------------------------------------------------------------------------------------------
# The account a test runs in: its clients, tables, buckets and rule deliveries
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


def tags_of(s3: Any, bucket: str, key: str) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]}


def empty_bucket(s3: Any, bucket: str) -> None:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for listed in page.get("Contents", []):
            s3.delete_object(Bucket=bucket, Key=listed["Key"])


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
