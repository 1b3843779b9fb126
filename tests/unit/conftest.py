"""Fixtures for the unit tests: moto with the token table and the functions' environment from template.yaml.

moto's fixes from localcloud.sfn are installed so that StopExecution ends a callback wait at once, as on AWS (gap 4 in
docs/offline-cloud.md); without them a stopped execution waits on and a late SendTaskSuccess is accepted.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from localcloud import patches
from localcloud.simulators import register, unregister_all
from localcloud.simulators.healthlake import HealthLakeSimulator
from tests.unit.support import (
    ACCOUNT,
    MOTO_CONFIG,
    REGION,
    Aws,
    ClientSpy,
    EventBus,
    ExportAccount,
    WaitingTask,
    Workflows,
    check_observability,
    clear_caches,
    create_table,
    function_environment,
    physical_name,
    rule_patterns,
    use_project_sources,
)
from tests.unit.task_support import TaskAccount, task_account


@pytest.fixture(scope="session", autouse=True)
def _moto_fixes() -> Iterator[None]:
    with patches.Patches(patches.step_functions()):
        yield


@pytest.fixture(scope="module")
def offline_account() -> Iterator[tuple[Any, Workflows]]:
    """moto, with the token table the template declares and the waiting-task workflows, once per test module (the
    `aws` fixture empties them between tests)."""
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
        with mock_aws(config=MOTO_CONFIG):
            yield create_table("TokenTable"), Workflows()


@pytest.fixture
def aws(offline_account: tuple[Any, Workflows], monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    """The token table (empty) and the functions' environment from template.yaml, with fresh caches of the
    functions' settings, Callbacks and boto3 clients: each test is a cold start."""
    table, workflows = offline_account
    environment = function_environment()
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    assert table.name == environment["TOKEN_TABLE"]
    use_project_sources(monkeypatch)
    check_observability(environment)
    clear_caches()
    account = Aws(environment, table, workflows)
    try:
        yield account
    finally:
        workflows.stop_all()
        account.clear()
        clear_caches()
        importlib.import_module("shared.observability").metrics.clear_metrics()


@pytest.fixture
def waiting_task(aws: Aws) -> Callable[..., WaitingTask]:
    """`waiting_task()` starts an execution parked on a `.waitForTaskToken` task and returns it with its token;
    `waiting_task(timeout_seconds=1)` gives the task a timeout, `waiting_task(heartbeat_seconds=60)` a heartbeat."""
    return aws.workflows.start


@pytest.fixture
def sfn_spy(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> ClientSpy:
    """The functions' Step Functions client, wrapped to record SendTaskSuccess / SendTaskFailure calls."""
    shared_aws = importlib.import_module("shared.aws")
    spy = ClientSpy(shared_aws.client("stepfunctions"))
    real_client = shared_aws.client

    def client(service: str) -> Any:
        return spy if service == "stepfunctions" else real_client(service)

    monkeypatch.setattr(importlib.import_module("shared.callback.service"), "client", client)
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
def resume_rules(aws: Aws) -> Iterator[EventBus]:
    """The template's EventBridge rules for the resume function on moto's default bus, targeting a queue."""
    events = boto3.client("events", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url = sqs.create_queue(QueueName="resume-function-stand-in")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    rules = rule_patterns("resume_job")
    assert rules, "template.yaml: the resume function has no EventBridgeRule event"
    for name, pattern in rules.items():
        events.put_rule(Name=name, EventPattern=json.dumps(pattern))
        events.put_targets(Rule=name, Targets=[{"Id": "ResumeJobFunction", "Arn": queue_arn}])
    try:
        yield EventBus(sqs, queue_url)
    finally:
        for name in rules:
            events.remove_targets(Rule=name, Ids=["ResumeJobFunction"])
            events.delete_rule(Name=name)
        sqs.delete_queue(QueueUrl=queue_url)


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
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for listed in page.get("Contents", []):
                s3.delete_object(Bucket=name, Key=listed["Key"])
        s3.delete_bucket(Bucket=name)


@pytest.fixture
def export_account(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[ExportAccount]:
    """The export workflow's state table, queue, bucket and bus as template.yaml declares them (gone after the
    test); a rule on the bus copies every event to a queue, and the functions' SQS client records its calls."""
    environment = aws.environment
    table = create_table("ExportStateTable")
    assert table.name == environment["EXPORT_TABLE"]
    sqs = boto3.client("sqs", region_name=REGION)
    s3 = boto3.client("s3", region_name=REGION)
    events = boto3.client("events", region_name=REGION)
    queue_url = sqs.create_queue(QueueName=physical_name("ExportQueue"))["QueueUrl"]
    assert queue_url == environment["EXPORT_QUEUE_URL"]
    s3.create_bucket(Bucket=environment["EXPORT_BUCKET"])
    bus_name = environment["EXPORT_BUS"].rsplit("/", 1)[-1]
    assert events.create_event_bus(Name=bus_name)["EventBusArn"] == environment["EXPORT_BUS"]
    copies_url = sqs.create_queue(QueueName="export-bus-copies")["QueueUrl"]
    copies_arn = sqs.get_queue_attributes(QueueUrl=copies_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="everything", EventBusName=bus_name, EventPattern=json.dumps({"account": [ACCOUNT]}))
    events.put_targets(Rule="everything", EventBusName=bus_name, Targets=[{"Id": "copies", "Arn": copies_arn}])

    shared_export = importlib.import_module("shared.export.healthlake")
    spy = ClientSpy(shared_export.client("sqs"))
    real_client = shared_export.client
    monkeypatch.setattr(shared_export, "client", lambda service: spy if service == "sqs" else real_client(service))
    try:
        yield ExportAccount(environment, table, s3, EventBus(sqs, copies_url), spy)
    finally:
        events.remove_targets(Rule="everything", EventBusName=bus_name, Ids=["copies"])
        events.delete_rule(Name="everything", EventBusName=bus_name)
        events.delete_event_bus(Name=bus_name)
        for url in (queue_url, copies_url):
            sqs.delete_queue(QueueUrl=url)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=environment["EXPORT_BUCKET"]):
            for listed in page.get("Contents", []):
                s3.delete_object(Bucket=environment["EXPORT_BUCKET"], Key=listed["Key"])
        s3.delete_bucket(Bucket=environment["EXPORT_BUCKET"])
        table.delete()


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
def tasks(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[TaskAccount]:
    """The task API's and status recorder's table, bucket and state machine on moto, with their environment from
    template.yaml and fresh caches (a cold start); emptied after the test."""
    account = task_account()
    for name, value in account.environment.items():
        monkeypatch.setenv(name, value)
    clear_task_caches()
    try:
        yield account
    finally:
        account.clear()
        clear_task_caches()


def clear_task_caches() -> None:
    settings, tasks = importlib.import_module("shared.settings"), importlib.import_module("shared.tasks.service")
    recorder = importlib.import_module("shared.tasks.recorder")
    for cached in (settings.task_api_settings, settings.task_log_settings, tasks.task_api, recorder.task_recorder):
        cached.cache_clear()
