"""boto3 clients and resources, created once per container and only when first used (cold start matters)."""

from functools import cache
from typing import Any

import boto3


@cache
def client(service: str) -> Any:
    return boto3.client(service)


@cache
def table(name: str) -> Any:
    return boto3.resource("dynamodb").Table(name)


@cache
def account_id() -> str:
    return str(client("sts").get_caller_identity()["Account"])
