"""The export workflow's run lock: one item, `RUN {runStatus, lastRunTime, executionArn, triggerTime}`, taken with one
conditional write. A holder that is no longer running (timed out, aborted, crashed) is replaced on take-over; the
status-change rule also releases it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.aws import conditionally, is_running, require_ended, table
from shared.observability import logger

RUN = "RUN"
RUNNING, FAILED = "RUNNING", "FAILED"


@dataclass(frozen=True)
class Lock:
    acquired: bool
    last_run_time: str | None  # the previous successful run's trigger time: the export's `_since`
    holder: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"acquired": self.acquired, "lastRunTime": self.last_run_time, "holder": self.holder}


class RunLock:
    def __init__(self, table_name: str) -> None:
        self._table = table(table_name)

    def take(self, execution_arn: str, trigger_time: str) -> Lock:
        """Take the lock unless a running execution holds it; a retried take by the same execution succeeds."""
        claimed = self._claim(execution_arn, trigger_time, "attribute_not_exists(pk) OR runStatus <> :running", {})
        if claimed is not None:
            return Lock(True, claimed.get("lastRunTime"))
        holder = self._table.get_item(Key={"pk": RUN}, ConsistentRead=True).get("Item", {})
        holder_arn = str(holder.get("executionArn", ""))
        if holder_arn == execution_arn:
            return Lock(True, holder.get("lastRunTime"))
        if holder_arn and not is_running(holder_arn):
            logger.warning("stale export lock taken over", extra={"holder": holder_arn})
            claimed = self._claim(execution_arn, trigger_time, "executionArn = :holder", {":holder": holder_arn})
            if claimed is not None:
                return Lock(True, claimed.get("lastRunTime"))
        return Lock(False, holder.get("lastRunTime"), holder_arn or None)

    def release(self, execution_arn: str, status: str) -> bool:
        """Mark this ended execution's run FAILED if it still holds the lock (lastRunTime stays, so the next run
        re-exports the gap). The workflow's own bookkeeping (MarkCompleted / MarkFailed) covers normal ends; this is
        for executions that died without it. A status that is not terminal (RUNNING, PENDING_REDRIVE) raises
        ExecutionNotEndedError and leaves the lock alone: its holder may still be working."""
        require_ended(execution_arn, status)
        released = conditionally(
            lambda: self._table.update_item(
                Key={"pk": RUN},
                UpdateExpression="SET runStatus = :failed",
                ConditionExpression="executionArn = :me AND runStatus = :running",
                ExpressionAttributeValues={":failed": FAILED, ":me": execution_arn, ":running": RUNNING},
            )
        )
        return released is not None  # None: not (or no longer) the holder, nothing to release

    def _claim(
        self, execution_arn: str, trigger_time: str, condition: str, values: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The RUN item after taking it for this execution, or None if `condition` (nor "it is ours") held."""
        claimed = conditionally(
            lambda: self._table.update_item(
                Key={"pk": RUN},
                UpdateExpression="SET runStatus = :running, executionArn = :me, triggerTime = :trigger",
                ConditionExpression=f"({condition}) OR executionArn = :me",
                ExpressionAttributeValues={
                    ":running": RUNNING,
                    ":me": execution_arn,
                    ":trigger": trigger_time,
                    **values,
                },
                ReturnValues="ALL_NEW",
            )
        )
        return None if claimed is None else dict(claimed["Attributes"])
