"""Releases the export run lock held by an execution that ended without its own bookkeeping (Step Functions
Execution Status Change: FAILED, TIMED_OUT, ABORTED). Releasing a lock this execution does not hold changes nothing;
an event with a status that is not terminal fails the invocation (ExecutionNotEndedError) and changes nothing."""

from typing import Any

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.export.runlock import RunLock
from shared.observability import instrumented, logger
from shared.settings import export_settings


@instrumented
@event_source(data_class=EventBridgeEvent)
def handler(event: EventBridgeEvent, context: LambdaContext) -> dict[str, Any]:
    execution_arn = event.detail["executionArn"]
    released = RunLock(export_settings().table_name).release(execution_arn, event.detail["status"])
    logger.info("export lock release", extra={"executionArn": execution_arn, "released": released})
    return {"released": released}
