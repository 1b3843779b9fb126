"""Closing a waiting task with a job's Outcome: the task-token calls of Step Functions.

Below every feature: the callback feature resumes tasks with it, the export checker ends its own waiting task.
A task that is already closed (`TaskTimedOut`, `InvalidToken`, `TaskDoesNotExist`: it timed out, was resumed, or
its execution ended) is acknowledged and counted, never retried.
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


class Sent(StrEnum):
    RESUMED = "RESUMED"  # SendTaskSuccess/Failure delivered
    ALREADY_CLOSED = "ALREADY_CLOSED"  # the task had timed out or was already resumed


def _tolerated(exc: ClientError, task_token: str, job_id: str) -> bool:
    """Whether the error only says the task is already closed (timed out, resumed, or its execution ended)."""
    code = error_code(exc)
    if code not in TOLERATED_CALLBACK_ERRORS:
        return False
    logger.info("task already closed", extra={"error": code, "token": token_ref(task_token), "jobId": job_id})
    metrics.add_metric(name="CallbackAlreadyClosed", unit=MetricUnit.Count, value=1)
    return True


def send_outcome(task_token: str, outcome: Outcome) -> Sent:
    """SendTaskSuccess with the outcome as output, or SendTaskFailure with `<Service>.<Status>`."""
    sfn = client("stepfunctions")
    try:
        if outcome.succeeded:
            sfn.send_task_success(taskToken=task_token, output=json.dumps(outcome.output(), default=str))
        else:
            sfn.send_task_failure(taskToken=task_token, error=outcome.error, cause=outcome.cause[:32768])
    except ClientError as exc:
        if not _tolerated(exc, task_token, outcome.job_id):
            raise
        return Sent.ALREADY_CLOSED
    logger.info(
        "task resumed", extra={"token": token_ref(task_token), "jobId": outcome.job_id, "status": outcome.status}
    )
    metrics.add_metric(name="TaskResumed", unit=MetricUnit.Count, value=1)
    return Sent.RESUMED


def send_heartbeat(task_token: str, job_id: str) -> bool:
    """SendTaskHeartbeat; False if the task is already closed. `job_id` is what the task waits for (logs only)."""
    try:
        client("stepfunctions").send_task_heartbeat(taskToken=task_token)
    except ClientError as exc:
        if not _tolerated(exc, task_token, job_id):
            raise
        return False
    return True
