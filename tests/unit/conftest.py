"""Fixtures for the unit tests: moto with the token table and the functions' environment from template.yaml.

moto's fixes from localcloud.sfn are installed so that StopExecution ends a callback wait at once, as on AWS (gap 4 in
../shared/notes/offline-cloud.md); without them a stopped execution waits on and a late SendTaskSuccess is accepted.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from moto import mock_aws

from localcloud import sfn as sfn_fixes
from tests.unit.support import (
    MOTO_CONFIG,
    REGION,
    Aws,
    ClientSpy,
    WaitingTask,
    Workflows,
    check_observability,
    clear_caches,
    create_table,
    function_environment,
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
    `waiting_task(timeout_seconds=1)` gives the task a timeout."""
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
