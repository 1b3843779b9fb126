"""Admission queue: execution requests wait in an SQS FIFO queue; a scheduled starter starts at most
MAX - RUNNING of them, oldest first, so no more than MAX executions of the admitted state machine run at once.

At-least-once safe: an execution's name is its request id, so a redelivered request cannot start a second
execution (ExecutionAlreadyExists means it was started); a message is deleted only once its execution exists.
A message that cannot be started stays in the queue: it comes back after the visibility timeout and reaches the
dead-letter queue after maxReceiveCount, blocking only its own message group meanwhile (FIFO).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.aws import client, error_code
from shared.concurrency.gate import running_executions
from shared.observability import logger
from shared.settings import AdmissionSettings


class AdmissionRequest(BaseModel):
    """A message body on the admission queue: the request id (also the execution's name, and the message's
    MessageDeduplicationId) and the execution's input."""

    model_config = ConfigDict(populate_by_name=True)

    request_id: str = Field(alias="requestId", pattern=r"^[A-Za-z0-9_-]{1,80}$")  # a valid execution name
    input: dict[str, Any] = Field(default_factory=dict)


@dataclass
class Admission:
    """What one run of the starter did."""

    running: int  # RUNNING executions when it looked
    started: list[str] = field(default_factory=list)  # request ids started now
    already_started: list[str] = field(default_factory=list)  # redelivered requests whose execution existed
    left: list[str] = field(default_factory=list)  # message ids left in the queue (bad or not startable)

    def as_dict(self) -> dict[str, Any]:
        return {
            "running": self.running,
            "started": self.started,
            "alreadyStarted": self.already_started,
            "left": self.left,
        }


def admit(settings: AdmissionSettings) -> Admission:
    """Start queued requests in FIFO order while fewer than `max_running` executions run. Messages are received
    one at a time: a message left in flight locks its group, so the next receive goes on with another group, and
    the messages behind it are not received (nor counted towards their own redrive) meanwhile."""
    admission = Admission(running=len(running_executions(settings.state_machine_arn)))
    sqs = client("sqs")
    while admission.running + len(admission.started) < settings.max_running:
        messages = sqs.receive_message(QueueUrl=settings.queue_url, MaxNumberOfMessages=1).get("Messages", [])
        if not messages:
            break
        message = messages[0]
        outcome = _start(settings.state_machine_arn, message)
        if outcome is None:
            admission.left.append(message["MessageId"])
            continue
        request_id, started = outcome
        sqs.delete_message(QueueUrl=settings.queue_url, ReceiptHandle=message["ReceiptHandle"])
        (admission.started if started else admission.already_started).append(request_id)
    return admission


def _start(state_machine_arn: str, message: dict[str, Any]) -> tuple[str, bool] | None:
    """Start the message's execution: (request id, started now) or, if it existed already, (request id, False);
    None if it cannot be started (the message stays for a retry, then the dead-letter queue)."""
    try:
        request = AdmissionRequest.model_validate_json(message["Body"])
    except ValidationError as exc:
        # the errors' types and places only: a body may carry secrets
        problems = [{"type": e["type"], "loc": e["loc"]} for e in exc.errors()]
        logger.warning("admission request refused", extra={"messageId": message["MessageId"], "errors": problems})
        return None
    try:
        client("stepfunctions").start_execution(
            stateMachineArn=state_machine_arn, name=request.request_id, input=json.dumps(request.input)
        )
    except ClientError as exc:
        if error_code(exc) == "ExecutionAlreadyExists":
            return request.request_id, False
        logger.warning(
            "admission request not started",
            extra={"requestId": request.request_id, "error": error_code(exc), "messageId": message["MessageId"]},
        )
        return None
    return request.request_id, True
