"""Scheduled: starts queued execution requests from the admission queue while fewer than MAX executions run. One run
at a time (a lease): two starters at once would both fill the same free slots."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.concurrency.admission import admit
from shared.lease import single_flight
from shared.observability import instrumented, logger
from shared.settings import admission_settings


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with single_flight("start-admitted", context) as held:
        if not held:
            return {"skipped": True}
        admission = admit(admission_settings()).as_dict()
    logger.info("admission", extra=admission)
    return admission
