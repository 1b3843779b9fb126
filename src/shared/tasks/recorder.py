"""The end of a task: the terminal entry appended to its status log when its execution's status-change event comes
(a duplicate event, or an end the task already has, changes nothing)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field

from shared.aws import client, require_ended
from shared.observability import logger, metrics
from shared.settings import TaskLogSettings, task_log_settings
from shared.tasks.statuslog import END_SEQ, HEAD_SEQ, SUCCEEDED, Entry, ResultStore, StatusLog, timestamp


class StatusChange(BaseModel):
    """The detail of a `Step Functions Execution Status Change` event (the fields used here)."""

    model_config = ConfigDict(populate_by_name=True)

    execution_arn: str = Field(alias="executionArn")
    name: str
    status: str
    stop_date: int | None = Field(default=None, alias="stopDate")
    output: str | None = None
    error: str | None = None
    cause: str | None = None


class Recorder:
    def __init__(self, log: StatusLog, results: ResultStore, settings: TaskLogSettings) -> None:
        self.log = log
        self.results = results
        self.settings = settings

    def record_end(self, change: StatusChange) -> bool:
        """Append the terminal entry for a task's execution that ended; False if it is not a task's execution or
        its task already has one (a duplicate event, or the task was cancelled first). A status that is not an end
        raises ExecutionNotEndedError before anything is read or written."""
        require_ended(change.execution_arn, change.status)
        entries = self.log.entries(change.name)
        if not entries or entries[0].seq != HEAD_SEQ or entries[0].execution_arn != change.execution_arn:
            logger.info("not a task's execution", extra={"executionArn": change.execution_arn})
            return False
        if entries[-1].terminal:
            return False
        status, output, error, cause = change.status, change.output, change.error, change.cause
        failed = status in {"FAILED", "TIMED_OUT"}
        if (status == SUCCEEDED and output is None) or (failed and error is None and cause is None):
            # The event leaves out an output over 256 KB; DescribeExecution has it (and moto drops a failure's cause
            # there, so the event's error and cause come first).
            described = client("stepfunctions").describe_execution(executionArn=change.execution_arn)
            output = output if output is not None else described.get("output")
            error, cause = error or described.get("error"), cause or described.get("cause")
        stopped = datetime.fromtimestamp(change.stop_date / 1000, UTC) if change.stop_date else None
        end = Entry(
            seq=END_SEQ,
            status=status,
            at=timestamp(stopped),
            detail={k: v for k, v in {"error": error, "cause": cause}.items() if v is not None},
            expires_at=entries[0].expires_at,
        )
        if status == SUCCEEDED:
            output = output if output is not None else "null"
            if len(output.encode()) > self.settings.inline_result_max_bytes:
                end = _with(end, output_location=self.results.put(change.name, output))
            else:
                end = _with(end, output=output)
        recorded = self.log.end(change.name, end)
        if recorded:
            logger.info("task ended", extra={"taskId": change.name, "status": status})
            metrics.add_metric(name=f"Task{status.title().replace('_', '')}", unit=MetricUnit.Count, value=1)
        return recorded


def _with(entry: Entry, **changes: Any) -> Entry:
    return Entry(**{**entry.__dict__, **changes})


@cache
def task_recorder() -> Recorder:
    """The Recorder of the status-change function, configured from its environment (once per container)."""
    settings = task_log_settings()
    return Recorder(StatusLog(settings.task_table), ResultStore(settings.result_bucket), settings)
