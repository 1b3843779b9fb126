"""Fixtures for the unit tests: template.yaml deployed on moto once for the package, each test a cold start.

moto's fixes from localcloud.fixes.sfn are installed so that StopExecution ends a callback wait at once, as on AWS (gap
4 in docs/offline-cloud.md); without them a stopped execution waits on and a late SendTaskSuccess is accepted.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from moto.cloudformation import cloudformation_backends

from localcloud.account import MACIE_LOG_GROUP
from localcloud.clock import ManualClock
from localcloud.fixes import patches
from localcloud.simulators import register, unregister_all
from localcloud.simulators.healthlake import HealthLakeSimulator
from tests.unit import support
from tests.unit.support import (
    ACCOUNT,
    MOTO_CONFIG,
    REGION,
    Aws,
    ClientSpy,
    Deliveries,
    Deployed,
    EventBus,
    ExportAccount,
    check_observability,
    cold_start,
    deploy_template,
    empty_bucket,
    use_project_sources,
)
from tests.unit.task_support import TaskAccount, task_account
from tests.unit.waiting import WaitingTask, Workflows


@pytest.fixture(scope="session", autouse=True)
def _moto_fixes() -> Iterator[None]:
    with patches.Patches(patches.step_functions()):
        yield


@pytest.fixture(scope="package")
def deployed() -> Iterator[tuple[Deployed, Workflows]]:
    """moto with template.yaml deployed (as `sam deploy` would) and the waiting-task workflows, once for the unit
    tests; the fixtures empty what a test wrote. The rules' deliveries to functions are recorded, not run."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
        }.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        deliveries = Deliveries()
        fixes = [
            *patches.event_delivery(deliveries.deliver, undeliverable),
            *patches.custom_resources(answered_with_its_properties, lambda: "http://unused"),
        ]
        with mock_aws(config=MOTO_CONFIG), patches.Patches(fixes):
            # Macie's job log group, as an account where Macie ran a job has it: the custom resource that makes it
            # elsewhere is answered without its function here
            logs = boto3.client("logs", region_name=REGION)
            with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):  # a cloud around it made it
                logs.create_log_group(logGroupName=MACIE_LOG_GROUP)
            stack = deploy_template(deliveries)
            support._deployed.append(stack)
            try:
                yield stack, Workflows()
            finally:
                support._deployed.remove(stack)


def answered_with_its_properties(service_token: str, request: dict[str, Any]) -> None:
    """A custom resource's request, answered at once with its properties as its attributes: the unit tests run no
    function (the offline cloud runs the real one: tests/workflows/test_stacks.py)."""
    stack = cloudformation_backends[ACCOUNT][REGION].get_stack(request["StackId"])
    stack.get_custom_resource(request["LogicalResourceId"]).set_data(request["ResourceProperties"])


def undeliverable(arn: str, record: Any, attributes: dict[str, str]) -> None:
    raise AssertionError(f"a rule's delivery failed and went to its dead-letter queue {arn}: {record}")


@pytest.fixture
def stack(deployed: tuple[Deployed, Workflows]) -> Deployed:
    """template.yaml as deployed (resource names, each function's environment, the rules)."""
    return deployed[0]


@pytest.fixture
def aws(deployed: tuple[Deployed, Workflows], monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    """The token table (empty) and the functions' environment, each test a cold start (no cached settings,
    clients or services of an earlier test)."""
    stack, workflows = deployed
    environment = stack.all_environments()
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    use_project_sources(monkeypatch)
    check_observability(environment)
    cold_start()
    stack.deliveries.clear()
    table = boto3.resource("dynamodb", region_name=REGION).Table(stack.physical_id("TokenTable"))
    account = Aws(environment, table, workflows, stack)
    try:
        yield account
    finally:
        workflows.stop_all()
        account.clear()
        cold_start()
        importlib.import_module("shared.observability").metrics.clear_metrics()


@pytest.fixture
def jobs_of_this_stack(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every job the test completes is this stack's: telling another stack's apart has its own tests
    (test_own_jobs.py), which describe the job; here no describe call is spent on it."""
    adapters = importlib.import_module("shared.callback.adapters")
    monkeypatch.setattr(adapters.Adapter, "named", lambda self, job_id, prefix: True)


@pytest.fixture
def translate_described_one_by_one(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reconciler describes Translate's jobs one by one, as every other service's (its listing is tested on its
    own, test_reconcile_pressure.py)."""
    adapters = importlib.import_module("shared.callback.adapters")
    monkeypatch.setitem(adapters.ADAPTERS, "translate", replace(adapters.TRANSLATE, list_jobs=None))


@pytest.fixture
def clock(aws: Aws) -> Iterator[ManualClock]:
    """The Step Functions timers (TimeoutSeconds, HeartbeatSeconds, Wait) on a clock the test moves with
    `clock.advance(seconds)`, for executions started during the test."""
    manual = ManualClock()
    with patches.Patches(patches.step_function_timers(manual)):
        yield manual


@pytest.fixture
def waiting_task(aws: Aws) -> Callable[..., WaitingTask]:
    """`waiting_task()` starts an execution parked on a `.waitForTaskToken` task and returns it with its token;
    `waiting_task(timeout_seconds=3600)` gives the task a timeout, `waiting_task(heartbeat_seconds=60)` a heartbeat
    (with the `clock` fixture, `clock.advance` lets them pass)."""
    return aws.workflows.start


@pytest.fixture
def sfn_spy(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> ClientSpy:
    """The functions' Step Functions client, wrapped to record SendTaskSuccess / SendTaskFailure calls."""
    shared_aws = importlib.import_module("shared.aws")
    spy = ClientSpy(shared_aws.client("stepfunctions"))
    real_client = shared_aws.client

    def client(service: str) -> Any:
        return spy if service == "stepfunctions" else real_client(service)

    monkeypatch.setattr(importlib.import_module("shared.waits"), "client", client)
    return spy


@pytest.fixture
def stubbed(aws: Aws) -> Iterator[Callable[[str], Stubber]]:
    """`stubbed("macie2")`: the functions' own client for a service moto lacks (Macie classification jobs and
    findings, Translate, Bedrock Data Automation, HealthLake), answering from botocore Stubber responses, which are
    validated against the service's model. shared.aws caches one client per service, so every module of the
    functions gets this one."""
    stubbers: dict[str, Stubber] = {}

    def stub(service: str) -> Stubber:
        if service not in stubbers:
            stubbers[service] = Stubber(importlib.import_module("shared.aws").client(service))
            stubbers[service].activate()
        return stubbers[service]

    yield stub
    for stubber in stubbers.values():
        stubber.deactivate()


@pytest.fixture
def resume_rules(aws: Aws) -> EventBus:
    """What the template's EventBridge rules deliver to the resume function."""
    assert aws.stack.rule_patterns("resume_job"), "template.yaml: the resume function has no EventBridgeRule event"
    return EventBus(aws.stack.deliveries, aws.stack.function_arn("resume_job"))


@pytest.fixture
def s3_bucket(aws: Aws) -> Iterator[Callable[[str], Any]]:
    """`s3 = s3_bucket(name)` creates the bucket on moto and returns an S3 client; the bucket goes after the test."""
    s3 = boto3.client("s3", region_name=REGION)
    created: list[str] = []

    def create(name: str) -> Any:
        s3.create_bucket(Bucket=name)
        created.append(name)
        return s3

    yield create
    for name in created:
        empty_bucket(s3, name)
        s3.delete_bucket(Bucket=name)


@pytest.fixture
def export_account(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[ExportAccount]:
    """The export workflow's deployed state table, queue, bucket and bus (emptied after the test); a rule on the bus
    copies every event to a queue, and the functions' SQS client records its calls."""
    environment = aws.environment
    table = boto3.resource("dynamodb", region_name=REGION).Table(environment["EXPORT_TABLE"])
    s3 = boto3.client("s3", region_name=REGION)
    events = boto3.client("events", region_name=REGION)
    bus_name = environment["EXPORT_BUS"].rsplit("/", 1)[-1]
    copies = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:export-bus-copies"  # recorded, never run
    events.put_rule(Name="everything", EventBusName=bus_name, EventPattern=json.dumps({"account": [ACCOUNT]}))
    events.put_targets(Rule="everything", EventBusName=bus_name, Targets=[{"Id": "copies", "Arn": copies}])

    shared_export = importlib.import_module("shared.export.healthlake")
    spy = ClientSpy(shared_export.client("sqs"))
    real_client = shared_export.client
    monkeypatch.setattr(shared_export, "client", lambda service: spy if service == "sqs" else real_client(service))
    try:
        yield ExportAccount(environment, table, s3, EventBus(aws.stack.deliveries, copies), spy)
    finally:
        events.remove_targets(Rule="everything", EventBusName=bus_name, Ids=["copies"])
        events.delete_rule(Name="everything", EventBusName=bus_name)
        empty_bucket(s3, environment["EXPORT_BUCKET"])
        with table.batch_writer() as batch:
            for item in table.scan(ConsistentRead=True)["Items"]:
                batch.delete_item(Key={"pk": item["pk"]})


@pytest.fixture
def healthlake(
    export_account: ExportAccount, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., HealthLakeSimulator]]:
    """`simulator = healthlake(**knobs)`: a simulated HealthLake (its FHIR endpoint over real HTTP, SigV4 checked)
    with one seeded data store, which HEALTHLAKE_DATASTORE_ID then names. Jobs end after `delay_seconds` (0.2 s
    unless given)."""

    def make(**knobs: Any) -> HealthLakeSimulator:
        simulator = HealthLakeSimulator(REGION, **{"delay_seconds": 0.2, **knobs})
        register(simulator)
        datastore_id = simulator.create_datastore()
        monkeypatch.setenv("HEALTHLAKE_DATASTORE_ID", datastore_id)
        export_account.environment["HEALTHLAKE_DATASTORE_ID"] = datastore_id
        importlib.import_module("shared.settings").export_settings.cache_clear()
        return simulator

    try:
        yield make
    finally:
        unregister_all()


@pytest.fixture
def tasks(aws: Aws) -> Iterator[TaskAccount]:
    """The task API's and status recorder's deployed table, bucket and state machines (emptied after the test)."""
    account = task_account(aws.stack)
    try:
        yield account
    finally:
        account.clear()
