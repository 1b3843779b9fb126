"""boto3 clients (one per container) and DynamoDB Table resources (one per thread), each created when first used (cold
start matters)."""

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from shared.exceptions import ExecutionNotEndedError, TransientAwsError

# Error codes that mean "too many requests, try again later" (botocore's standard retry mode treats the same ones as
# throttling); a 5xx status is transient whatever its code.
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)


# boto3's default session is not thread-safe while it creates clients (the reconciler's threads may each create the
# first client of a service at once): creations take turns; the clients themselves are thread-safe.
_CREATING = threading.Lock()


@cache
def client(service: str) -> Any:
    with _CREATING:
        return boto3.client(service)


def table(name: str) -> Any:
    """The DynamoDB Table resource of this thread: boto3's resources, unlike its clients, must not be shared across
    threads (the reconciler's workers each get their own; a function's one thread gets one)."""
    return _table(name, threading.get_ident())


@cache
def _table(name: str, thread: int) -> Any:  # a thread's ident is reused only once that thread has ended
    with _CREATING:
        return boto3.resource("dynamodb").Table(name)


@cache
def account_id() -> str:
    return str(client("sts").get_caller_identity()["Account"])


def error_code(exc: ClientError) -> str:
    return str(exc.response["Error"]["Code"])


def is_transient(exc: BaseException) -> bool:
    """Whether an AWS call's error is throttling, a server error (5xx) or a lost connection: worth retrying."""
    if isinstance(exc, ClientError):
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        return error_code(exc) in THROTTLING_CODES or status >= 500
    return isinstance(exc, BotoConnectionError | HTTPClientError)


@contextmanager
def transient_errors() -> Iterator[None]:
    """Raise a transient AWS error (see is_transient) as TransientAwsError, the one name every Retry matches; any
    other error is raised unchanged."""
    try:
        yield
    except (BotoCoreError, ClientError) as exc:
        if is_transient(exc):
            raise TransientAwsError(f"{type(exc).__name__}: {exc}") from exc
        raise


def conditionally[T](write: Callable[[], T]) -> T | None:
    """Run a conditional DynamoDB write or delete: its response, or None if it was refused because its condition did
    not hold (ConditionalCheckFailedException). Any other error is raised."""
    try:
        return write()
    except ClientError as exc:
        if error_code(exc) == "ConditionalCheckFailedException":
            return None
        raise


# How a Step Functions execution can end (its other statuses, RUNNING and PENDING_REDRIVE, are not an end).
EXECUTION_ENDS = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})


def require_ended(execution_arn: str, status: str) -> None:
    """ExecutionNotEndedError unless `status` ends an execution: what acts on an execution's end (the task log's
    recorder, the export lock's release) refuses any other status before it reads or writes anything."""
    if status not in EXECUTION_ENDS:
        raise ExecutionNotEndedError(f"execution {execution_arn} is {status}, which is not an end")


def is_running(execution_arn: str) -> bool:
    """Whether a Step Functions execution is RUNNING (one that does not exist is not)."""
    try:
        status = client("stepfunctions").describe_execution(executionArn=execution_arn)["status"]
    except ClientError as exc:
        if error_code(exc) == "ExecutionDoesNotExist":
            return False
        raise
    return bool(status == "RUNNING")
