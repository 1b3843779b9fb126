"""Acquires a permit of a named resource for the execution whose task waits (lambda:invoke.waitForTaskToken): the
task is resumed when the permit is its own, at once if one is free and nobody queued earlier. No polling."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from shared.concurrency import ResourceName
from shared.concurrency.semaphore import Semaphore
from shared.observability import instrumented, logger
from shared.settings import semaphore_settings


class Acquire(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    resource: ResourceName
    limit: int = Field(ge=1, le=1000)
    execution_arn: str = Field(alias="executionArn", min_length=1, max_length=2048)
    task_token: str = Field(alias="taskToken", min_length=1, max_length=8192)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = Acquire.model_validate(event)
    settings = semaphore_settings()
    acquired = Semaphore(settings.table_name, settings.wait_ttl_seconds).acquire(
        request.resource, request.limit, request.execution_arn, request.task_token
    )
    logger.info("permit acquire", extra={"resource": request.resource, "acquired": acquired})
    return {"resource": request.resource, "acquired": acquired}
