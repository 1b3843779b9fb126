"""After the fan-out: what became of the run's records (published, quarantined, undelivered), from the files'
checkpoints. The workflow checks the sum and records the run COMPLETED or COMPLETED_WITH_ERRORS."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from shared.export.fanout import tally_run
from shared.observability import instrumented, logger
from shared.settings import export_settings


class TallyRun(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    run: str = Field(min_length=1)
    manifest_key: str = Field(alias="manifestKey", min_length=1)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = TallyRun.model_validate(event)
    tally = tally_run(export_settings(), request.run, request.manifest_key)
    logger.info("export run tallied", extra=tally)
    return tally
