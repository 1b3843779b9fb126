"""CloudFormation custom resource: Macie's job log group, made if absent, never deleted (shared.documents.macie_log).

Create and Update make the group unless it exists; Delete leaves it. The answer's `LogGroupName` is what the Macie
relay's subscription names, so the subscription is made after the group exists."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.custom_resource import answering
from shared.documents.macie_log import ensure_log_group
from shared.observability import instrumented


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> None:
    with answering(event) as answer:
        properties = event["ResourceProperties"]
        name = properties["LogGroupName"]
        answer.physical_id, answer.data = name, {"LogGroupName": name}
        if event["RequestType"] in ("Create", "Update"):
            ensure_log_group(name, int(properties["RetentionInDays"]))
