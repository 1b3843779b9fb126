"""boto3 clients and resources, created once per container and only when first used (cold start matters)."""

from collections.abc import Callable
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


def conditionally[T](write: Callable[[], T]) -> T | None:
    """Run a conditional DynamoDB write or delete: its response, or None if it was refused because its condition did
    not hold (ConditionalCheckFailedException). Any other error is raised."""
    try:
        return write()
    except ClientError as exc:
        if error_code(exc) == "ConditionalCheckFailedException":
            return None
        raise


def is_running(execution_arn: str) -> bool:
    """Whether a Step Functions execution is RUNNING (one that does not exist is not)."""
    try:
        status = client("stepfunctions").describe_execution(executionArn=execution_arn)["status"]
    except ClientError as exc:
        if error_code(exc) == "ExecutionDoesNotExist":
            return False
        raise
    return bool(status == "RUNNING")
