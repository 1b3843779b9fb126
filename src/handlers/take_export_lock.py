"""Takes the export run lock for this execution, or reports who holds it (the workflow then ends as skipped)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from shared.export.runlock import RunLock
from shared.observability import instrumented, logger
from shared.settings import export_settings


class TakeLock(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    execution_arn: str = Field(alias="executionArn", min_length=1)
    trigger_time: str = Field(alias="triggerTime", min_length=1)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = TakeLock.model_validate(event)
    lock = RunLock(export_settings().table_name).take(request.execution_arn, request.trigger_time)
    logger.info("export lock", extra=lock.as_dict())
    return lock.as_dict()
