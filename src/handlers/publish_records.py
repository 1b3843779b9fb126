"""Distributed Map item processor: streams one exported NDJSON object and publishes each record as an event on the
export bus. Returns counts only, never records (a state's output is limited to 256 KB)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, Field

from shared.export.fanout import publish_records
from shared.observability import instrumented, logger
from shared.settings import export_settings


class ExportedFile(BaseModel):
    bucket: str = Field(min_length=3)
    key: str = Field(min_length=1)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    item = ExportedFile.model_validate(event)
    settings = export_settings()
    records = publish_records(item.bucket, item.key, settings.bus, settings.detail_type)
    logger.info("records published", extra={"key": item.key, "records": records})
    return {"key": item.key, "records": records}
