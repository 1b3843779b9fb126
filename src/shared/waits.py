"""Closing a wait with a job's Outcome, whichever engine waits: a Step Functions task (its task token: SendTask*) or a
Lambda durable execution (its callback id: SendDurableExecutionCallback*).

Below every feature: the callback feature resumes waits with it, the export checker ends its own waiting task. A wait
that is already closed is acknowledged and counted, never retried: a task that timed out, was resumed or whose
execution ended (`TaskTimedOut`, `InvalidToken`, `TaskDoesNotExist`); a callback that timed out or was closed
(`CallbackTimeoutException`) or whose execution is gone (`ResourceNotFoundException`).
"""

from __future__ import annotations

import json
from enum import StrEnum

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import ClientError

from shared.aws import client, error_code
from shared.observability import logger, metrics, token_ref
from shared.outcome import Outcome

TOLERATED_CALLBACK_ERRORS = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})
TOLERATED_DURABLE_ERRORS = frozenset({"CallbackTimeoutException", "ResourceNotFoundException"})
MAX_CAUSE = 32768  # SendTaskFailure's cause; a durable callback's ErrorMessage is kept to the same


class Kind(StrEnum):
    """What waits for a job, and so which calls close its wait."""

    TASK_TOKEN = "taskToken"  # noqa: S105 - a kind's name, not a token: a Step Functions Task state's wait
    CALLBACK_ID = "callbackId"  # a Lambda durable execution's callback (`create_callback`, `wait_for_callback`)


class Sent(StrEnum):
    RESUMED = "RESUMED"  # the outcome was delivered
    ALREADY_CLOSED = "ALREADY_CLOSED"  # the wait had timed out or was already resumed


def _tolerated(exc: ClientError, kind: Kind, token: str, job_id: str) -> bool:
    """Whether the error only says the wait is already closed (timed out, resumed, or its execution ended)."""
    code = error_code(exc)
    if code not in (TOLERATED_DURABLE_ERRORS if kind is Kind.CALLBACK_ID else TOLERATED_CALLBACK_ERRORS):
        return False
    logger.info("wait already closed", extra={"error": code, "token": token_ref(token), "jobId": job_id})
    metrics.add_metric(name="CallbackAlreadyClosed", unit=MetricUnit.Count, value=1)
    return True


def send_outcome(token: str, outcome: Outcome, kind: Kind = Kind.TASK_TOKEN) -> Sent:
    """Success with the outcome as output, or failure with `<Service>.<Status>` and its cause: SendTaskSuccess/Failure
    for a task token, SendDurableExecutionCallbackSuccess/Failure for a callback id."""
    try:
        if kind is Kind.CALLBACK_ID:
            _send_durable(token, outcome)
        elif outcome.succeeded:
            client("stepfunctions").send_task_success(taskToken=token, output=json.dumps(outcome.output(), default=str))
        else:
            client("stepfunctions").send_task_failure(
                taskToken=token, error=outcome.error, cause=outcome.cause[:MAX_CAUSE]
            )
    except ClientError as exc:
        if not _tolerated(exc, kind, token, outcome.job_id):
            raise
        return Sent.ALREADY_CLOSED
    logger.info("wait resumed", extra={"token": token_ref(token), "jobId": outcome.job_id, "status": outcome.status})
    metrics.add_metric(name="TaskResumed", unit=MetricUnit.Count, value=1)
    return Sent.RESUMED


def _send_durable(callback_id: str, outcome: Outcome) -> None:
    """The callback's result is the outcome's JSON (a task's output); a failure's ErrorType is the error a task's Catch
    would match, and its ErrorMessage opens with it too (`Translate.FAILED: <cause>`): the durable execution SDK hands
    the function a CallbackError that carries the message alone."""
    durable = client("lambda")
    if outcome.succeeded:
        result = json.dumps(outcome.output(), default=str).encode()
        durable.send_durable_execution_callback_success(CallbackId=callback_id, Result=result)
    else:
        error = {"ErrorType": outcome.error, "ErrorMessage": f"{outcome.error}: {outcome.cause}"[:MAX_CAUSE]}
        durable.send_durable_execution_callback_failure(CallbackId=callback_id, Error=error)


def send_heartbeat(token: str, job_id: str, kind: Kind = Kind.TASK_TOKEN) -> bool:
    """SendTaskHeartbeat or SendDurableExecutionCallbackHeartbeat; False if the wait is already closed. `job_id` is
    what it waits for (logs only)."""
    try:
        if kind is Kind.CALLBACK_ID:
            client("lambda").send_durable_execution_callback_heartbeat(CallbackId=token)
        else:
            client("stepfunctions").send_task_heartbeat(taskToken=token)
    except ClientError as exc:
        if not _tolerated(exc, kind, token, job_id):
            raise
        return False
    return True
