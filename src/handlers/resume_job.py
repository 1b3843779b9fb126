"""Resumes the workflow waiting for a job when the job's completion event arrives (EventBridge rule target)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.aws import transient_errors
from shared.callback.adapters import outcome_of
from shared.callback.service import callbacks
from shared.observability import instrumented, logger


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, str]:
    with transient_errors():  # throttled or unreachable: Lambda's async retries, then the DLQ; never an outcome
        outcome = outcome_of(event)
        if outcome is None:
            logger.info("non-terminal job status ignored", extra={"detail": event.get("detail")})
            return {"status": "IGNORED"}
        return {"status": callbacks().resume(outcome).value}
