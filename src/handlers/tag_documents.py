"""Tags source documents and their translations pii=true|false from a Macie classification job's findings."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from shared.documents.pii import tag_documents
from shared.observability import instrumented, logger


class TagRequest(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    bucket: str = Field(min_length=3)
    input_prefix: str = Field(alias="inputPrefix")
    output_prefix: str = Field(alias="outputPrefix")
    translation_job_id: str = Field(alias="translationJobId", min_length=1)
    classification_job_id: str = Field(alias="classificationJobId", min_length=1)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    request = TagRequest.model_validate(event)
    tagged = tag_documents(
        request.bucket,
        request.input_prefix,
        request.output_prefix,
        request.translation_job_id,
        request.classification_job_id,
    )
    logger.info("documents tagged", extra=tagged.as_dict())
    return tagged.as_dict()
