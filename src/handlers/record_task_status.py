"""Appends a task's terminal status when its workflow's execution ends (EventBridge: Execution Status Change).

The rule delivers only the task state machines' terminal statuses; the log keeps exactly one terminal entry per
task, so duplicates, and the ABORTED that follows a cancellation, change nothing.
"""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.observability import instrumented
from shared.tasks.recorder import StatusChange, task_recorder


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    change = StatusChange.model_validate(event["detail"])
    recorded = task_recorder().record_end(change)
    return {"taskId": change.name, "status": change.status, "recorded": recorded}
