"""Relays Macie's classification-job log events (CloudWatch Logs subscription) to EventBridge for the resume rule.

Macie publishes no job-completion event; it logs one. Every log event of the batch is forwarded; if EventBridge
keeps refusing some, the invocation fails and Lambda's async retries, then the on-failure destination, take over.
"""

from typing import Any

from aws_lambda_powertools.utilities.data_classes import CloudWatchLogsEvent, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.callback.adapters import macie_log_entry
from shared.eventbus import put_events
from shared.observability import instrumented, logger


@instrumented
@event_source(data_class=CloudWatchLogsEvent)
def handler(event: CloudWatchLogsEvent, context: LambdaContext) -> dict[str, Any]:
    logs = event.parse_logs_data()
    if logs.message_type == "CONTROL_MESSAGE":  # CloudWatch Logs checking that the destination is reachable
        return {"forwarded": 0}
    entries = [macie_log_entry(e.message, e.timestamp) for e in logs.log_events]
    forwarded = put_events(entries)
    logger.info("Macie job log events forwarded", extra={"logStream": logs.log_stream, "count": forwarded})
    return {"forwarded": forwarded}
