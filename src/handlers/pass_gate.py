"""The gate task: may this execution go on (among the N oldest RUNNING of its state machine)? Returns `$.gate`."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.concurrency.gate import GateCheck, pass_gate
from shared.observability import instrumented, logger


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    check = GateCheck.model_validate(event)
    gate = pass_gate(check)
    logger.info("gate", extra={"executionArn": check.execution_arn, **gate})
    return gate
