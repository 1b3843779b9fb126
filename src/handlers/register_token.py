"""Pairs a waiting task's token with a job id (invoked with `lambda:invoke.waitForTaskToken`)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from shared.aws import transient_errors
from shared.callback.service import callbacks
from shared.callback.tokens import Waiter
from shared.observability import instrumented


class Registration(BaseModel):
    # Validation errors echo their input unless hidden, and the input holds the task token (a secret).
    model_config = ConfigDict(populate_by_name=True, hide_input_in_errors=True)

    service: str = Field(min_length=1)
    job_id: str = Field(alias="jobId", min_length=1)
    task_token: str = Field(alias="taskToken", min_length=1, repr=False)
    ttl_seconds: int | None = Field(default=None, alias="ttlSeconds", gt=0)
    # Which Task state waits ($$.Execution.Id, $$.State.Name, $$.State.EnteredTime) and its attempt
    # ($$.State.RetryCount): a retry of that state may bring a new token, which then replaces the one an earlier,
    # failed attempt registered (never the other way round).
    execution_arn: str = Field(alias="executionArn", min_length=1)
    state_name: str = Field(alias="stateName", min_length=1)
    state_entered_time: str = Field(alias="stateEnteredTime", min_length=1)
    retry_count: int = Field(alias="retryCount", ge=0)
    # The state's HeartbeatSeconds: with it the reconciler knows when the task's heartbeat runs out and takes the
    # nearest first (optional: a workflow that does not pass it is reconciled by registration time).
    heartbeat_seconds: int | None = Field(default=None, alias="heartbeatSeconds", gt=0)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, str]:
    registration = Registration.model_validate(event)
    waiter = Waiter(
        registration.execution_arn,
        registration.state_name,
        registration.state_entered_time,
        registration.retry_count,
        registration.heartbeat_seconds,
    )
    with transient_errors():  # throttled or unreachable: the Task state's Retry registers again
        result = callbacks().register(
            registration.service, registration.job_id, registration.task_token, waiter, registration.ttl_seconds
        )
    return {"status": result.value}
