"""Resumes the workflow waiting for a job when the job's completion event arrives (EventBridge rule target)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.callback.adapters import outcome_of
from shared.callback.service import callbacks
from shared.observability import instrumented, logger


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, str]:
    outcome = outcome_of(event)
    if outcome is None:
        logger.info("non-terminal job status ignored", extra={"detail": event.get("detail")})
        return {"status": "IGNORED"}
    return {"status": callbacks().resume(outcome).value}
