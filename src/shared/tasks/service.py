"""Tasks of the async request/reply API: long-running workflows behind a status log (no HTTP here).

A task is accepted by writing the head of its log, then its workflow is started with the task id as the execution
name, so no retry can start it twice: a Step Functions execution (StartExecution), or a Lambda durable execution (an
asynchronous Invoke with the task id as DurableExecutionName). Everything a client reads comes from the log, scoped
to the task's owner. Terminal statuses are appended once per task (a conditional write on the end key), by whoever
gets there first: the execution's end (a Step Functions status-change event, or the durable function itself, both
through shared.tasks.recorder), a cancellation, or a failed start.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from shared.aws import client, error_code
from shared.exceptions import (
    IdempotencyKeyReusedError,
    NoResultError,
    ResultNotReadyError,
    TaskAlreadyEndedError,
    TaskNotFoundError,
    TransientAwsError,
    UnknownTaskTypeError,
)
from shared.observability import logger
from shared.settings import TaskApiSettings, TaskLogSettings, task_api_settings
from shared.tasks.statuslog import (
    CANCELLED,
    END_SEQ,
    HEAD_SEQ,
    RUNNING,
    SUBMITTED,
    SUCCEEDED,
    TERMINAL,
    Entry,
    ResultStore,
    StatusLog,
    timestamp,
)
from shared.tasks.types import task_type_names, workflow_input

# Idempotency keys map to task ids deterministically, per caller: a duplicate request meets the same log head.
_IDEMPOTENCY_NAMESPACE = uuid.UUID("6b1d3c8e-2f41-4a0e-9c57-8a4f0d2e7b13")


@dataclass(frozen=True)
class Task:
    """A task as its log shows it: the head for what was asked, the newest entry for where it is."""

    id: str
    type: str
    status: str
    created_at: str
    updated_at: str
    detail: dict[str, Any]
    error: str | None = None
    cause: str | None = None

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL

    @property
    def succeeded(self) -> bool:
        return self.status == SUCCEEDED


def task_of(task_id: str, entries: list[Entry]) -> Task:
    head, newest = entries[0], entries[-1]
    return Task(
        id=task_id,
        type=str(head.type),
        status=newest.status,
        created_at=head.at,
        updated_at=newest.at,
        detail=newest.detail,
        error=newest.detail.get("error") if newest.terminal else None,
        cause=newest.detail.get("cause") if newest.terminal else None,
    )


class Tasks:
    def __init__(
        self,
        log: StatusLog,
        results: ResultStore,
        settings: TaskLogSettings,
        state_machines: dict[str, str] | None = None,
        start_grace_seconds: int = 60,
        durable_functions: dict[str, str] | None = None,
    ) -> None:
        self.log = log
        self.results = results
        self.settings = settings
        self.state_machines = state_machines or {}
        self.durable_functions = durable_functions or {}  # task type -> the durable function (unqualified ARN)
        self.start_grace_seconds = start_grace_seconds

    @property
    def offered(self) -> list[str]:
        """The task types this deployment runs."""
        return sorted(self.state_machines.keys() | self.durable_functions.keys())

    def _workflow(self, task_type: str) -> str:
        """The ARN of what runs the type: a state machine's, or a durable function's."""
        if task_type in self.durable_functions:
            return self.durable_functions[task_type]
        if task_type not in self.state_machines:
            raise UnknownTaskTypeError(self.offered)
        return self.state_machines[task_type]

    # --- reading ------------------------------------------------------------------------------------------------
    def entries(self, owner: str, task_id: str) -> list[Entry]:
        """The task's log, oldest first; TaskNotFoundError unless the task exists and belongs to `owner`."""
        entries = self.log.entries(task_id)
        if not entries or entries[0].seq != HEAD_SEQ or entries[0].owner != owner:
            raise TaskNotFoundError(task_id)
        return entries

    def get(self, owner: str, task_id: str) -> Task:
        return task_of(task_id, self.entries(owner, task_id))

    def result(self, owner: str, task_id: str) -> str:
        """The workflow's output (JSON text) once the task succeeded; ResultNotReadyError before, NoResultError if
        it ended otherwise."""
        entries = self.entries(owner, task_id)
        end = entries[-1]
        if not end.terminal:
            raise ResultNotReadyError(task_id, end.status)
        if end.status != SUCCEEDED:
            raise NoResultError(task_id, end.status)
        if end.output_location:
            return self.results.get(end.output_location)
        return end.output or "null"

    # --- submitting ---------------------------------------------------------------------------------------------
    def submit(self, owner: str, request: Any, idempotency_key: str | None = None) -> Task:
        """Accept a task and start its workflow. With an idempotency key, a repeated request returns the task the
        first one created (and starts nothing); the same key with another request is refused."""
        payload = workflow_input(request)
        request_hash = hashlib.sha256(
            json.dumps({"type": request.type, "input": payload}, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()
        task_id = str(uuid.uuid5(_IDEMPOTENCY_NAMESPACE, f"{owner}\n{idempotency_key}")) if idempotency_key else None
        task_id = task_id or str(uuid.uuid4())
        workflow = self._workflow(request.type)
        now = datetime.now(UTC)
        expires_at = int(now.timestamp()) + self.settings.retention_days * 86400
        head = Entry(
            seq=HEAD_SEQ,
            status=SUBMITTED,
            at=timestamp(now),
            detail={"idempotencyKey": idempotency_key} if idempotency_key else {},
            expires_at=expires_at,
            owner=owner,
            type=request.type,
            input=payload,
            request_hash=request_hash,
            execution_arn=_execution_arn(workflow, task_id),
        )
        if not self.log.create(task_id, head):
            return self._resubmitted(owner, task_id, request_hash)
        logger.info("task accepted", extra={"taskId": task_id, "type": request.type})
        return self._start(task_id, head, workflow)

    def _resubmitted(self, owner: str, task_id: str, request_hash: str) -> Task:
        entries = self.entries(owner, task_id)
        head = entries[0]
        if head.request_hash != request_hash:
            raise IdempotencyKeyReusedError(
                "this Idempotency-Key was already used for a different request; use a new key for a new task"
            )
        logger.info("idempotent resubmission", extra={"taskId": task_id})
        accepted_at = datetime.fromisoformat(head.at).timestamp()
        if len(entries) == 1 and time.time() - accepted_at > self.start_grace_seconds:
            # The request that accepted it never got to start it (it timed out or crashed in between).
            return self._start(task_id, head, self._workflow(str(head.type)))
        return task_of(task_id, entries)

    def _start(self, task_id: str, head: Entry, workflow: str) -> Task:
        execution_input = {**head.input, "task": {"id": task_id, "expiresAt": head.expires_at}}
        if _is_durable(workflow):
            return self._start_durable(task_id, head, workflow, execution_input)
        state_machine = workflow
        try:
            started = client("stepfunctions").start_execution(
                stateMachineArn=state_machine, name=task_id, input=json.dumps(execution_input)
            )
        except ClientError as exc:
            if error_code(exc) == "ExecutionAlreadyExists":  # started by an earlier attempt
                return self.get(str(head.owner), task_id)
            return self._failed_to_start(task_id, head, error_code(exc), str(exc))
        except BotoCoreError as exc:  # no answer: the execution may or may not have started; ask
            execution_arn = f"{state_machine.replace(':stateMachine:', ':execution:')}:{task_id}"
            try:
                started = client("stepfunctions").describe_execution(executionArn=execution_arn)
            except ClientError as missing:
                if error_code(missing) != "ExecutionDoesNotExist":
                    raise
                return self._failed_to_start(task_id, head, type(exc).__name__, str(exc))
        return self._running(task_id, head, started["executionArn"], started["startDate"])

    def _start_durable(self, task_id: str, head: Entry, function: str, execution_input: dict[str, Any]) -> Task:
        """Invoke the durable function asynchronously, the task id as the execution's name: Lambda refuses a second
        start of a name that runs (DurableExecutionAlreadyStartedException), so a retried start starts nothing. No
        answer at all (the call may or may not have started it) is TransientAwsError: the task stays SUBMITTED, and
        the client's retry with its Idempotency-Key starts it (or finds it started)."""
        try:
            invoked = client("lambda").invoke(
                FunctionName=function,
                Qualifier=LATEST,  # Lambda refuses to start a durable execution of an unqualified function
                InvocationType="Event",
                DurableExecutionName=task_id,
                Payload=json.dumps(execution_input).encode(),
            )
        except ClientError as exc:
            if error_code(exc) == "DurableExecutionAlreadyStartedException":  # started by an earlier attempt
                return self.get(str(head.owner), task_id)
            return self._failed_to_start(task_id, head, error_code(exc), str(exc), "Invoke")
        except BotoCoreError as exc:
            raise TransientAwsError(f"the durable function was not reached: {exc}") from exc
        return self._running(task_id, head, invoked["DurableExecutionArn"], datetime.now(UTC))

    def _running(self, task_id: str, head: Entry, execution_arn: str, started: datetime) -> Task:
        running = Entry(
            seq=f"{timestamp(started)}#{RUNNING}",
            status=RUNNING,
            at=timestamp(started),
            detail={"executionArn": execution_arn},
            expires_at=head.expires_at,
        )
        self.log.append(task_id, running)
        return task_of(task_id, [head])  # SUBMITTED: the client follows the status resource from here

    def _failed_to_start(
        self, task_id: str, head: Entry, code: str, message: str, call: str = "StartExecution"
    ) -> Task:
        logger.error("workflow not started", extra={"taskId": task_id, "error": code})
        failed = Entry(
            seq=END_SEQ,
            status="FAILED",
            at=timestamp(),
            detail={"error": f"{call}.{code}", "cause": message},
            expires_at=head.expires_at,
        )
        self.log.end(task_id, failed)
        return self.get(str(head.owner), task_id)

    # --- cancelling ---------------------------------------------------------------------------------------------
    def cancel(self, owner: str, task_id: str) -> Task:
        """Record CANCELLED and stop the workflow. Cancelling a cancelled task again only repeats the stop; a task
        that ended otherwise raises TaskAlreadyEndedError."""
        entries = self.entries(owner, task_id)
        task = task_of(task_id, entries)
        if not task.ended:
            cancelled = Entry(
                seq=END_SEQ,
                status=CANCELLED,
                at=timestamp(),
                detail={"error": "Task.Cancelled", "cause": "The task was cancelled by its owner."},
                expires_at=entries[0].expires_at,
            )
            if self.log.end(task_id, cancelled):
                logger.info("task cancelled", extra={"taskId": task_id})
            task = self.get(owner, task_id)
        if task.status != CANCELLED:
            raise TaskAlreadyEndedError(task_id, task.status)
        if _is_durable(str(entries[0].execution_arn)):
            self._stop_durable(entries)
        else:
            self._stop(str(entries[0].execution_arn))
        return task

    @staticmethod
    def _stop_durable(entries: list[Entry]) -> None:
        """StopDurableExecution of the execution the task's RUNNING entry names (none: it never started)."""
        started = [e.detail["executionArn"] for e in entries if e.status == RUNNING and "executionArn" in e.detail]
        for execution_arn in started:
            try:
                client("lambda").stop_durable_execution(
                    DurableExecutionArn=execution_arn,
                    Error={"ErrorType": "Task.Cancelled", "ErrorMessage": "The task was cancelled by its owner."},
                )
            except ClientError as exc:
                # Which of its documented errors Lambda answers for an execution that has already ended is not
                # documented (the offline cloud answers it as a stop); either only says there is nothing to stop
                if error_code(exc) not in {"ResourceNotFoundException", "InvalidParameterValueException"}:
                    raise

    @staticmethod
    def _stop(execution_arn: str) -> None:
        try:
            client("stepfunctions").stop_execution(
                executionArn=execution_arn, error="Task.Cancelled", cause="The task was cancelled by its owner."
            )
        except ClientError as exc:
            if error_code(exc) != "ExecutionDoesNotExist":  # it never started
                raise


LATEST = "$LATEST"  # the version a durable task runs: the stack publishes none (a durable execution names its version)


def _is_durable(arn: str) -> bool:
    """Whether the ARN is a Lambda function's (a durable function runs the task) rather than a state machine's."""
    return ":lambda:" in arn


def _execution_arn(workflow: str, task_id: str) -> str:
    """The task's execution, as far as it is known before the start: a Step Functions execution's ARN, or a durable
    execution's without its final id (Lambda's `<function>:$LATEST/durable-execution/<name>/<id>`), as the durable
    function records its end (shared.documents.durable)."""
    if _is_durable(workflow):
        return f"{workflow}:{LATEST}/durable-execution/{task_id}"
    return workflow.replace(":stateMachine:", ":execution:", 1) + f":{task_id}"


@cache
def task_api() -> Tasks:
    """The Tasks of the API function, configured from its environment (once per container)."""
    settings: TaskApiSettings = task_api_settings()
    unknown = (settings.state_machines.keys() | settings.durable_functions.keys()) - task_type_names()
    if unknown:  # the template names a type this code has no model for: a packaging mistake, not a request's
        raise ValueError(f"the template names task types without a model: {sorted(unknown)}")
    return Tasks(
        StatusLog(settings.task_table),
        ResultStore(settings.result_bucket),
        settings,
        settings.state_machines,
        settings.start_grace_seconds,
        settings.durable_functions,
    )
