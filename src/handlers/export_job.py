"""SQS consumer of the export queue: `start` kicks off the FHIR export, `check` looks at it once (heartbeat and
re-queue with DelaySeconds, or end the waiting task). Failed records are reported individually (partial batch
responses); a poison message reaches the dead-letter queue after maxReceiveCount, and the task then fails by
heartbeat timeout."""

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.export.healthlake import begin_export, check_export
from shared.export.messages import Check, Start
from shared.observability import instrumented, logger, token_ref
from shared.settings import export_settings

processor = BatchProcessor(event_type=EventType.SQS)


def record_handler(record: SQSRecord) -> None:
    settings = export_settings()
    message = record.json_body
    if message.get("action") == "start":
        start = Start.model_validate(message)
        result = begin_export(
            settings, start.task_token, start.execution_arn, start.execution_name, start.last_run_time
        )
        logger.info("export start", extra={"result": result, "token": token_ref(start.task_token)})
    else:
        check = Check.model_validate(message)
        done = check_export(settings, check.task_token, check.job_id)
        logger.info("export checked", extra={"jobId": check.job_id, "result": done})


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
