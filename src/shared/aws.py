"""boto3 clients and resources, created once per container and only when first used (cold start matters)."""

from functools import cache
from typing import Any

import boto3
from botocore.exceptions import ClientError


@cache
def client(service: str) -> Any:
    return boto3.client(service)


@cache
def table(name: str) -> Any:
    return boto3.resource("dynamodb").Table(name)


@cache
def account_id() -> str:
    return str(client("sts").get_caller_identity()["Account"])


def error_code(exc: ClientError) -> str:
    return str(exc.response["Error"]["Code"])


def conditional_check_failed(exc: ClientError) -> bool:
    """Whether a conditional write or delete was refused because its condition did not hold."""
    return error_code(exc) == "ConditionalCheckFailedException"
