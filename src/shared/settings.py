"""Settings from the function's environment, validated once at cold start."""

import os
from functools import cache

from pydantic import BaseModel, ConfigDict, Field, Json, field_validator


class Settings(BaseModel):
    """A function's settings. Built on first use, not at import: a function reads one or two of the models below, and
    building the others would only lengthen its cold start."""

    model_config = ConfigDict(defer_build=True)


class CallbackSettings(Settings):
    token_table: str = Field(alias="TOKEN_TABLE", min_length=1)
    stack_name: str = Field(alias="STACK_NAME", min_length=1)  # this stack's jobs are named `<stack>.<execution>`
    task_timeout_seconds: int = Field(alias="TASK_TIMEOUT_SECONDS", gt=0)
    token_ttl_margin_seconds: int = Field(alias="TOKEN_TTL_MARGIN_SECONDS", ge=0)
    reconcile_after_seconds: int = Field(alias="RECONCILE_AFTER_SECONDS", ge=0)

    @property
    def default_token_ttl_seconds(self) -> int:
        """How long a registration lives when the caller gives no TTL: the waiting task's timeout plus a margin."""
        return self.task_timeout_seconds + self.token_ttl_margin_seconds


@cache
def callback_settings() -> CallbackSettings:
    return CallbackSettings.model_validate(dict(os.environ))


class DocumentsSettings(Settings):
    """The durable documents workflow (template.yaml, DocumentsDurableFunction)."""

    bucket: str = Field(alias="DOCUMENT_BUCKET", min_length=3)
    translate_role_arn: str = Field(alias="TRANSLATE_DATA_ACCESS_ROLE_ARN", min_length=1)
    heartbeat_seconds: int = Field(alias="HEARTBEAT_SECONDS", gt=0)


@cache
def documents_settings() -> DocumentsSettings:
    return DocumentsSettings.model_validate(dict(os.environ))


class ExportSettings(Settings):
    """The export workflow's functions' settings (template.yaml, HealthLake export section)."""

    table_name: str = Field(alias="EXPORT_TABLE", min_length=1)
    datastore_id: str = Field(alias="HEALTHLAKE_DATASTORE_ID", min_length=1)
    bucket: str = Field(alias="EXPORT_BUCKET", min_length=3)
    kms_key_id: str = Field(alias="EXPORT_KMS_KEY_ID", min_length=1)
    data_access_role_arn: str = Field(alias="EXPORT_DATA_ACCESS_ROLE_ARN", min_length=1)
    queue_url: str = Field(alias="EXPORT_QUEUE_URL", min_length=1)
    recheck_delay_seconds: int = Field(alias="EXPORT_RECHECK_DELAY_SECONDS", ge=0, le=900)
    bus: str = Field(alias="EXPORT_BUS", min_length=1)  # name or ARN
    detail_type: str = Field(alias="EXPORT_DETAIL_TYPE", min_length=1)


@cache
def export_settings() -> ExportSettings:
    return ExportSettings.model_validate(dict(os.environ))


class TaskLogSettings(Settings):
    """What every function that writes the task status log needs."""

    task_table: str = Field(alias="TASK_TABLE", min_length=1)
    result_bucket: str = Field(alias="TASK_RESULT_BUCKET", min_length=3)
    retention_days: int = Field(alias="TASK_LOG_RETENTION_DAYS", gt=0)
    # Outputs above this size go to the result bucket; a DynamoDB item holds at most 400 KB.
    inline_result_max_bytes: int = Field(alias="TASK_INLINE_RESULT_MAX_BYTES", default=100_000, gt=0, le=350_000)


class TaskApiSettings(TaskLogSettings):
    """The task API: which state machine or durable function runs each task type (TASK_STATE_MACHINES and
    TASK_DURABLE_FUNCTIONS, JSON from the template; a type whose feature the stack left out maps to "" and is not
    offered)."""

    state_machines: Json[dict[str, str]] = Field(alias="TASK_STATE_MACHINES")
    durable_functions: Json[dict[str, str]] = Field(alias="TASK_DURABLE_FUNCTIONS")  # unqualified function ARNs
    max_request_bytes: int = Field(alias="TASK_MAX_REQUEST_BYTES", default=65_536, gt=0, le=262_144)
    retry_after_seconds: int = Field(alias="TASK_RETRY_AFTER_SECONDS", default=5, gt=0)
    # A task still SUBMITTED this long after it was accepted lost the request that was starting it (e.g. a timeout):
    # an idempotent resubmission starts it. Above the API's 30 s integration timeout.
    start_grace_seconds: int = Field(alias="TASK_START_GRACE_SECONDS", default=60, gt=30)

    @field_validator("state_machines", "durable_functions")
    @classmethod
    def _offered(cls, workflows: dict[str, str]) -> dict[str, str]:
        return {task_type: arn for task_type, arn in workflows.items() if arn}


@cache
def task_log_settings() -> TaskLogSettings:
    return TaskLogSettings.model_validate(dict(os.environ))


@cache
def task_api_settings() -> TaskApiSettings:
    return TaskApiSettings.model_validate(dict(os.environ))


class SemaphoreSettings(Settings):
    """The callback semaphore's functions (template.yaml, concurrency control section)."""

    table_name: str = Field(alias="PERMIT_TABLE", min_length=1)
    # A waiter's place is kept this long at most: its acquire task's timeout plus a margin (DynamoDB TTL).
    wait_ttl_seconds: int = Field(alias="PERMIT_WAIT_TTL_SECONDS", gt=0)


@cache
def semaphore_settings() -> SemaphoreSettings:
    return SemaphoreSettings.model_validate(dict(os.environ))


class AdmissionSettings(Settings):
    """The admission queue's starter (template.yaml, concurrency control section)."""

    queue_url: str = Field(alias="ADMISSION_QUEUE_URL", min_length=1)
    state_machine_arn: str = Field(alias="ADMISSION_STATE_MACHINE_ARN", min_length=1)
    max_running: int = Field(alias="ADMISSION_MAX_RUNNING", gt=0)


@cache
def admission_settings() -> AdmissionSettings:
    return AdmissionSettings.model_validate(dict(os.environ))


class LeaseSettings(Settings):
    """The scheduled functions that run one at a time (template.yaml, LeaseTable)."""

    table_name: str = Field(alias="LEASE_TABLE", min_length=1)


@cache
def lease_settings() -> LeaseSettings:
    return LeaseSettings.model_validate(dict(os.environ))
