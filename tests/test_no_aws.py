"""The session-wide guard (tests/aws_guard.py, from tests/conftest.py): nothing a test starts reaches AWS."""

from __future__ import annotations

import socket
import threading

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

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
