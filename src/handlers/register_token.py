"""Pairs a waiting task's token with a job id (invoked with `lambda:invoke.waitForTaskToken`)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from shared.callback.service import callbacks
from shared.observability import instrumented


class Registration(BaseModel):
    # Validation errors echo their input unless hidden, and the input holds the task token (a secret).
    model_config = ConfigDict(populate_by_name=True, hide_input_in_errors=True)

    service: str = Field(min_length=1)
    job_id: str = Field(alias="jobId", min_length=1)
    task_token: str = Field(alias="taskToken", min_length=1, repr=False)
    ttl_seconds: int | None = Field(default=None, alias="ttlSeconds", gt=0)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, str]:
    registration = Registration.model_validate(event)
    result = callbacks().register(
        registration.service, registration.job_id, registration.task_token, registration.ttl_seconds
    )
    return {"status": result.value}
