"""The session-wide guard (tests/aws_guard.py, from tests/conftest.py): nothing a test starts reaches AWS, and the
one run let through on purpose (the state tier on AWS) is that tier alone, never in CI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

from tests import aws_guard
from tests.aws_guard import AwsEndpointRefusedError


def test_a_thread_without_a_mock_cannot_reach_aws() -> None:
    # Given a thread that calls AWS with no moto mock active (as a simulator thread outliving its test would)
    errors: list[BaseException] = []

    def call_sts() -> None:
        client = boto3.client("sts", region_name="us-east-1", config=Config(retries={"total_max_attempts": 1}))
        try:
            client.get_caller_identity()
        except BaseException as exc:  # noqa: BLE001 - the thread reports whatever it got
            errors.append(exc)

    # When it runs
    thread = threading.Thread(target=call_sts)
    thread.start()
    thread.join()
    # Then the call fails before any connection: the endpoint's name is refused
    assert len(errors) == 1 and isinstance(errors[0], EndpointConnectionError), errors
    with pytest.raises(AwsEndpointRefusedError):
        socket.getaddrinfo("sts.us-east-1.amazonaws.com", 443)


def test_local_endpoints_still_resolve() -> None:
    assert socket.getaddrinfo("127.0.0.1", 80)
    assert socket.getaddrinfo("localhost", 80)


def test_credentials_are_fake() -> None:
    credentials = boto3.Session().get_credentials()
    assert credentials is not None and credentials.access_key == "testing"


ROOT = Path(__file__).resolve().parents[1]


def pytest_run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """pytest in a process of its own, with `env` over this one's environment (a value "" removes the variable)."""
    environment = {key: value for key, value in {**os.environ, **env}.items() if value}
    command = [sys.executable, "-m", "pytest", "-q", *args]
    return subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ("args", "ci", "refusal"),
    [
        (["tests/test_no_aws.py"], "", "run the state tier alone: pytest tests/statemachines"),
        ([], "", "run the state tier alone: pytest tests/statemachines"),
        (["tests/statemachines"], "true", "is set in CI: the tests never reach AWS there"),
    ],
)
def test_the_state_tiers_run_on_aws_is_that_tier_alone_and_never_in_ci(args: list[str], ci: str, refusal: str) -> None:
    # Given the state tier's switch to AWS (a role there), when pytest runs anything else, or runs in CI
    done = pytest_run(*args, **{aws_guard.ON_AWS: "arn:aws:iam::123456789012:role/TestState", "CI": ci})
    # Then it stops before collecting anything: a usage error saying why
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert refusal in done.stderr
