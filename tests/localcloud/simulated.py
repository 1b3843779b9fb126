"""Shared by the simulator tests: plain moto with one bucket, boto3 clients, and an SQS queue behind an EventBridge
rule to see the events a simulator puts on the default bus."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from moto import mock_aws

from localcloud.account import ACCOUNT_ID
from localcloud.simulators import settle_all, unregister_all

REGION = "us-east-1"
ACCOUNT = ACCOUNT_ID

_clients: dict[str, Any] = {}


def wait_for[T](probe: Callable[[], T | None], timeout: float = 5.0, what: str = "") -> T:
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
    return value


def client(service: str) -> Any:
    """One client per service and test (creating clients is what makes polling slow)."""
    if service not in _clients:
        make: Any = boto3.client  # typed per service name by boto3-stubs, where installed
        _clients[service] = make(service, region_name=REGION)
    return _clients[service]


@contextmanager
def offline_account(bucket: str) -> Iterator[None]:
    """moto with `bucket`; every simulator registered meanwhile is stopped and unregistered at the end."""
    with mock_aws(config={"lambda": {"use_docker": False}}):
        try:
            _clients.clear()
            client("s3").create_bucket(Bucket=bucket)
            yield
        finally:
            unregister_all()
            _clients.clear()


def event_queue(pattern: dict[str, Any]) -> str:
    """An SQS queue that receives, through an EventBridge rule on the default bus, the events `pattern` matches."""
    sqs, events = client("sqs"), client("events")
    url = sqs.create_queue(QueueName=f"events-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    rule = f"events-{uuid.uuid4().hex[:8]}"
    events.put_rule(Name=rule, EventPattern=json.dumps(pattern))
    events.put_targets(Rule=rule, Targets=[{"Id": "queue", "Arn": arn}])
    return str(url)


def received(url: str) -> list[dict[str, Any]]:
    """The events the queue holds right now (received and deleted)."""
    sqs = client("sqs")
    bodies: list[dict[str, Any]] = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        bodies += [json.loads(m["Body"]) for m in batch]
        for message in batch:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def collect(url: str, count: int) -> list[dict[str, Any]]:
    """Wait until `count` events arrived, then until every simulated job step has run, to catch any surplus."""
    got: list[dict[str, Any]] = []

    def enough() -> bool:
        got.extend(received(url))
        return len(got) >= count

    wait_for(enough, what=f"{count} events")
    settle_all()
    return got + received(url)
