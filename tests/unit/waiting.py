"""Real waiting tasks on moto's Step Functions: an execution parked on `.waitForTaskToken`, with its token.

`Workflows.start()` starts an execution whose one task hands its token over an SQS queue and waits, so
SendTaskSuccess / SendTaskFailure act on a real task and DescribeExecution shows what the workflow saw.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3

from tests.unit.support import ACCOUNT, REGION, STACK, WAIT_S

ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/{STACK}-workflow"
POLL_S = 0.01


def wait_until(check: Callable[[], Any], what: str = "the signal") -> Any:
    """Poll `check` until it gives something truthy (a positive signal), within WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not (found := check()):
        assert time.monotonic() < deadline, f"no {what} within {WAIT_S} s"
        time.sleep(POLL_S)
    return found


@dataclass
class WaitingTask:
    """An execution parked on a `.waitForTaskToken` task."""

    execution_arn: str
    token: str
    sfn: Any = field(repr=False)

    def describe(self) -> dict[str, Any]:
        return dict(self.sfn.describe_execution(executionArn=self.execution_arn))

    def status(self) -> str:
        return str(self.describe()["status"])

    def wait_until_closed(self) -> dict[str, Any]:
        """Poll DescribeExecution until the execution has ended; return it."""
        deadline = time.monotonic() + WAIT_S
        while (execution := self.describe())["status"] == "RUNNING":
            assert time.monotonic() < deadline, f"{self.execution_arn} still RUNNING after {WAIT_S} s"
            time.sleep(POLL_S)
        return execution

    def stop(self) -> None:
        """StopExecution, then wait until it is ABORTED (the callback wait is over)."""
        self.sfn.stop_execution(executionArn=self.execution_arn)
        assert self.wait_until_closed()["status"] == "ABORTED"


class Workflows:
    """Starts executions that wait for a task token and fetches each token from the queue the task sends it to."""

    def __init__(self) -> None:
        self.sfn = boto3.client("stepfunctions", region_name=REGION)
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.queue_url = self.sqs.create_queue(QueueName=f"{STACK}-task-tokens")["QueueUrl"]
        self._machines: dict[tuple[int | None, int | None], str] = {}
        self._tokens: dict[str, str] = {}  # execution ARN -> token, for messages received while waiting for another

    def _state_machine(self, timeout_seconds: int | None, heartbeat_seconds: int | None) -> str:
        if (timeout_seconds, heartbeat_seconds) not in self._machines:
            task: dict[str, Any] = {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                "Parameters": {
                    "QueueUrl": self.queue_url,
                    "MessageBody": {"executionArn.$": "$$.Execution.Id", "taskToken.$": "$$.Task.Token"},
                },
                "End": True,
            }
            if timeout_seconds is not None:
                task["TimeoutSeconds"] = timeout_seconds
            if heartbeat_seconds is not None:
                task["HeartbeatSeconds"] = heartbeat_seconds
            definition = {"StartAt": "WaitForJob", "States": {"WaitForJob": task}}
            self._machines[(timeout_seconds, heartbeat_seconds)] = self.sfn.create_state_machine(
                name=f"{STACK}-wait-{timeout_seconds or 'forever'}-heartbeat-{heartbeat_seconds or 'none'}",
                definition=json.dumps(definition),
                roleArn=ROLE_ARN,
            )["stateMachineArn"]
        return self._machines[(timeout_seconds, heartbeat_seconds)]

    def start(self, timeout_seconds: int | None = None, heartbeat_seconds: int | None = None) -> WaitingTask:
        """Start an execution and return it once its task is waiting, with the task's token. With
        `heartbeat_seconds` the task has HeartbeatSeconds, as the workflows' waiting tasks do (moto answers
        SendTaskHeartbeat for a task without it with InvalidToken)."""
        execution_arn = self.sfn.start_execution(
            stateMachineArn=self._state_machine(timeout_seconds, heartbeat_seconds),
            name=f"wait-{uuid.uuid4()}",
            input="{}",
        )["executionArn"]
        deadline = time.monotonic() + WAIT_S
        while execution_arn not in self._tokens:
            assert time.monotonic() < deadline, f"no task token from {execution_arn} within {WAIT_S} s"
            for message in self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get(
                "Messages", []
            ):
                body = json.loads(message["Body"])
                self._tokens[body["executionArn"]] = body["taskToken"]
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
            if execution_arn not in self._tokens:
                time.sleep(POLL_S)
        return WaitingTask(execution_arn, self._tokens.pop(execution_arn), self.sfn)

    def stop_all(self) -> None:
        """Stop every execution still waiting, so no interpreter thread outlives the test."""
        for machine in self._machines.values():
            for execution in self.sfn.list_executions(stateMachineArn=machine, statusFilter="RUNNING")["executions"]:
                task = WaitingTask(execution["executionArn"], "", self.sfn)
                self.sfn.stop_execution(executionArn=task.execution_arn)
                task.wait_until_closed()  # ABORTED, or whatever it ended with an instant before the stop
