"""The chaos run's wire faults (localcloud/runtime/lambda_faults.py): what the SDK sees when each one is drawn, and a
bad configuration refused before any worker starts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.endpoint import Endpoint
from botocore.exceptions import ClientError, ReadTimeoutError

from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.runtime.lambda_faults import PROBABILITIES, Injector, parse

ANSWER = b'{"Table": {"TableName": "t", "TableStatus": "ACTIVE"}}'


class Raw:
    def stream(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
        yield ANSWER


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Requests that reached the wire (a stand-in for the network, answering every call with 200); the real
    Endpoint._send is restored after the test."""
    requests: list[str] = []

    def send(endpoint: Any, request: Any) -> AWSResponse:
        requests.append(request.url)
        return AWSResponse(request.url, 200, {"Content-Type": "application/x-amz-json-1.0"}, Raw())

    monkeypatch.setattr(Endpoint, "_send", send)
    return requests


def dynamodb() -> Any:
    return boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="k",
        aws_secret_access_key="s",
        config=Config(retries={"mode": "standard", "total_max_attempts": 2}),
    )


def injector(**probabilities: float) -> Injector:
    return Injector(parse(f'{{"seed": 1, {", ".join(f'"{k}": {v}' for k, v in probabilities.items())}}}'), "fn")


def test_a_throttle_reaches_the_sdk_as_dynamodbs_own_throttling_error_and_is_retried(sent: list[str]) -> None:
    # Given every call throttled
    injector(throttle=1).install()
    # When a DynamoDB call is made
    with pytest.raises(ClientError) as raised:
        dynamodb().describe_table(TableName="t")
    # Then the SDK read DynamoDB's throttling error, retried it, and nothing reached the wire
    assert raised.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert raised.value.response["ResponseMetadata"]["RetryAttempts"] == 1
    assert sent == []


def test_a_lost_answer_is_a_read_timeout_after_the_request_was_sent(sent: list[str]) -> None:
    # Given every answer lost
    injector(lost_answer=1).install()
    # When a call is made, then it times out for the caller, though each attempt reached the wire
    with pytest.raises(ReadTimeoutError):
        dynamodb().describe_table(TableName="t")
    assert len(sent) == 2


def test_without_faults_drawn_the_call_goes_through(sent: list[str]) -> None:
    injector(throttle=0, reset=0).install()
    assert dynamodb().describe_table(TableName="t")["Table"]["TableName"] == "t"
    assert len(sent) == 1


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ('{"throttle": 1.5}', "throttle"),
        ('{"crash": -0.1}', "crash"),
        ('{"drop": 0.1}', "drop"),
        ('{"seed": "x"}', "seed"),
    ],
)
def test_a_bad_configuration_is_refused_with_what_is_wrong(config: str, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        parse(config)


def test_every_probability_is_known() -> None:
    assert parse("{}") == {"seed": 0, **dict.fromkeys(PROBABILITIES, 0.0)}


def test_a_cloud_with_a_bad_fault_configuration_is_refused_before_it_starts() -> None:
    with pytest.raises(ValueError, match="throttle"):
        LocalCloud(CloudConfig(faults='{"throttle": 2}'))
