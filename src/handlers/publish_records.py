"""Distributed Map item processor: streams one exported NDJSON object and publishes each record as an event on the
export bus, resuming after the file's checkpoint in this run. Lines that cannot be published are kept in S3 under the
run's prefix and counted. Returns counts only, never records (a state's output is limited to 256 KB)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, Field

from shared.aws import transient_errors
from shared.export.fanout import publish_records
from shared.observability import instrumented, logger
from shared.settings import export_settings


class ExportedFile(BaseModel):
    run: str = Field(min_length=1)  # the export execution's name: checkpoints and kept lines are per run
    bucket: str = Field(min_length=3)
    key: str = Field(min_length=1)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    item = ExportedFile.model_validate(event)
    with transient_errors():  # throttled or unreachable: the Map item's Retry publishes on from the checkpoint
        progress = publish_records(export_settings(), item.run, item.bucket, item.key)
    logger.info("records published", extra={"key": item.key, **progress.as_dict()})
    return {"key": item.key, **progress.as_dict()}
