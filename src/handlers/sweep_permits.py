"""Scheduled: gives back the permits and queue places of executions that are no longer RUNNING (their status change
event was lost), sends heartbeats to the tasks still waiting, and hands out any permit left free. One sweep at a time
(a lease): a tick during a long sweep is skipped, the next one runs."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.concurrency.semaphore import Semaphore
from shared.lease import single_flight
from shared.observability import instrumented, logger
from shared.settings import semaphore_settings


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = semaphore_settings()
    with single_flight("sweep-permits", context) as held:
        if not held:
            return {"skipped": True}
        counts = Semaphore(settings.table_name, settings.wait_ttl_seconds).sweep()
    logger.info("permits swept", extra=counts)
    return counts
