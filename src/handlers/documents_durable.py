"""The documents workflow as a Lambda durable function (DurableConfig): shared.documents.durable."""

from typing import Any

from aws_durable_execution_sdk_python import DurableContext, durable_execution

from shared.documents.durable import documents


@durable_execution
def handler(event: dict[str, Any], context: DurableContext) -> dict[str, Any]:
    return documents(event, context)
