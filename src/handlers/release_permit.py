"""Releases permits: a workflow's own release task (`{resource, executionArn}`, after its critical section or in its
Catch), and every permit or place in a queue of an execution that ended FAILED, TIMED_OUT or ABORTED (Step Functions
Execution Status Change). Either way the freed permits go to the oldest waiters. A retried release changes nothing."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from shared.concurrency import ResourceName
from shared.concurrency.semaphore import Semaphore
from shared.observability import instrumented, logger
from shared.settings import semaphore_settings


class Release(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    resource: ResourceName
    execution_arn: str = Field(alias="executionArn", min_length=1, max_length=2048)


class ExecutionEnded(BaseModel):
    detail: dict[str, Any]  # Step Functions Execution Status Change: executionArn, status, ...


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = semaphore_settings()
    semaphore = Semaphore(settings.table_name, settings.wait_ttl_seconds)
    if "detail-type" in event:
        execution_arn = str(ExecutionEnded.model_validate(event).detail["executionArn"])
        entries = semaphore.forget(execution_arn)
        logger.info("permits of an ended execution", extra={"executionArn": execution_arn, "entries": len(entries)})
        return {"executionArn": execution_arn, "released": len(entries)}
    request = Release.model_validate(event)
    released = semaphore.release(request.resource, request.execution_arn)
    logger.info("permit release", extra={"resource": request.resource, "released": released})
    return {"resource": request.resource, "released": released}
