"""Fixtures for the unit tests: moto with the token table and the functions' environment from template.yaml.

moto's fixes from localcloud.sfn are installed so that StopExecution ends a callback wait at once, as on AWS (gap 4 in
../shared/notes/offline-cloud.md); without them a stopped execution waits on and a late SendTaskSuccess is accepted.
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

from localcloud import sfn as sfn_fixes
from tests.unit.support import (
    MOTO_CONFIG,
    REGION,
    Aws,
    ClientSpy,
    EventBus,
    WaitingTask,
    Workflows,
    check_observability,
    clear_caches,
    create_table,
    function_environment,
    rule_patterns,
    use_project_sources,
)


@pytest.fixture(scope="session", autouse=True)
def _moto_fixes() -> None:
    sfn_fixes.install()


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

    monkeypatch.setattr(importlib.import_module("shared.callback"), "client", client)
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
