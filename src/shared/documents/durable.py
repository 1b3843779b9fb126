"""The documents workflow as a Lambda durable function (DocumentsDurableFunction): statemachines/documents.asl.json's
work, written as code. docs/callback.md compares the two engines.

Macie must be on before any job starts. A Translate job and a Macie classification job then run side by side, each
inside a `wait_for_callback`: its submitter starts the job (idempotent on a client token of the execution's name) and
registers the callback id in the token store under the job id, exactly as the Step Functions tasks register their
task tokens. The same completion events, resume function and reconciler then close either kind of wait (shared.waits):
either order, duplicates, lost events, heartbeats. Then the documents are tagged from Macie's findings
(shared.documents.pii, the Step Functions version's TagDocuments).

Each step runs at least once: a crash replays the function, and a step that had finished is not run again; a step
that had not is, which is why every call in one is idempotent (a client token, a conditional write, tags set again).
A job that fails ends the execution with JobFailedError, a wait that runs out with JobTimedOutError, Macie off with
MacieNotEnabledError: each carries the error the Step Functions workflow fails with (`Translate.FAILED`,
`Macie.Timeout`, `Macie.NotEnabled`) and its cause, its message `<error>: <cause>`; a task's log records that error
and cause, whichever engine ran it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aws_durable_execution_sdk_python import DurableContext
from aws_durable_execution_sdk_python.config import Duration, WaitForCallbackConfig
from aws_durable_execution_sdk_python.exceptions import (
    CallbackExternalError,
    CallbackSubmitterError,
    CallbackTimeoutError,
    InvocationError,
)
from aws_durable_execution_sdk_python.retries import RetryStrategyConfig, create_retry_strategy
from aws_durable_execution_sdk_python.types import StepContext, WaitForCallbackContext
from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field

from shared.aws import account_id, client, error_code, transient_errors
from shared.callback.adapters import adapter
from shared.callback.service import callbacks
from shared.callback.tokens import Waiter
from shared.documents.pii import tag_documents
from shared.exceptions import (
    JobFailedError,
    JobTimedOutError,
    MacieNotEnabledError,
    TransientAwsError,
    WorkflowError,
)
from shared.settings import DocumentsSettings, callback_settings, documents_settings
from shared.tasks.recorder import StatusChange, task_recorder
from shared.tasks.types import DocumentsInput
from shared.waits import Kind

# A submitter (start the job, register the callback id) that was throttled or could not reach AWS is tried again,
# about a minute in all; any other error fails the wait at once.
SUBMIT_RETRIES = create_retry_strategy(
    RetryStrategyConfig(
        max_attempts=6,
        initial_delay=Duration.from_seconds(1),
        max_delay=Duration.from_seconds(30),
        retryable_error_types=[TransientAwsError],
    )
)


class TaskRef(BaseModel):
    """The task of the async API this execution runs, when the API started it (its status log gets the end)."""

    id: str = Field(min_length=1)
    expires_at: int = Field(alias="expiresAt")


class DurableDocumentsRequest(DocumentsInput):
    """The task API's documents input, plus the task when the API started the execution."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    task: TaskRef | None = None


def execution_of(durable_execution_arn: str) -> str:
    """The durable execution's ARN without its final id: the function, its version and the execution's name
    (`...:function:<name>:$LATEST/durable-execution/<execution name>`), known before the execution starts."""
    return durable_execution_arn.rpartition("/")[0]


def documents(event: dict[str, Any], context: DurableContext) -> dict[str, Any]:
    """Run the workflow for one request; record its end in the task's status log when the task API started it."""
    request = DurableDocumentsRequest.model_validate(event)
    task = request.task
    try:
        result = _translate_and_classify(request, context)
    except InvocationError:  # this invocation failed (a checkpoint call, say), not the execution: Lambda replays it
        raise
    except Exception as exc:  # the execution's end
        if task is not None:  # a WorkflowError in the Step Functions workflow's terms; anything else by its name
            error, cause = (exc.error, exc.cause) if isinstance(exc, WorkflowError) else (type(exc).__name__, str(exc))
            context.step(lambda _: _record_end(context, task, "FAILED", error=error, cause=cause), name="end")
        raise
    if task is not None:
        context.step(lambda _: _record_end(context, task, "SUCCEEDED", output=json.dumps(result)), name="end")
    return result


def _translate_and_classify(request: DurableDocumentsRequest, context: DurableContext) -> dict[str, Any]:
    settings = documents_settings()
    macie = context.step(_macie_status, name="check-macie")
    if macie != "ENABLED":
        raise MacieNotEnabledError(
            "Macie.NotEnabled",
            f"Amazon Macie is {macie} in this account and Region, so no job was started. Deploy the stack with"
            " EnableMacie=true, or run `aws macie2 enable-macie`, then start the task again (docs/deploy.md).",
        )
    name = context.state.durable_execution_arn.split("/durable-execution/")[-1].split("/")[0]
    # Both branches wait for their job's end whatever the other's (a failed Translate job does not leave the
    # Macie job's wait behind, as a Step Functions Parallel does): each answers its job's outcome or its error.
    batch = context.parallel(
        [
            lambda branch: _wait_for_job(branch, "translate", lambda: _start_translation(request, name, settings)),
            lambda branch: _wait_for_job(branch, "macie", lambda: _start_classification(request, name, settings)),
        ],
        name="translate-and-classify",
    )
    batch.throw_if_error()  # a branch that broke (neither its job's end nor its wait's)
    translation, classification = batch.get_results()
    for ended in (translation, classification):
        if "error" in ended:
            timed_out = ended["error"].endswith(".Timeout")
            raise (JobTimedOutError if timed_out else JobFailedError)(ended["error"], ended["cause"])

    def tag(_: StepContext) -> dict[str, int]:
        tagged = tag_documents(
            settings.bucket, request.input_prefix, request.output_prefix, translation["jobId"], classification["jobId"]
        )
        return tagged.as_dict()

    tagged = context.step(tag, name="tag-documents")
    return {
        "translation": {
            "jobId": translation["jobId"],
            "status": translation["status"],
            "output": f"s3://{settings.bucket}/{request.output_prefix}",
        },
        "classification": {"jobId": classification["jobId"], "status": classification["status"]},
        "tagged": tagged,
    }


def _macie_status(_: StepContext) -> str:
    """GetMacieSession's status; NOT_ENABLED where the account never enabled Macie (it answers AccessDenied)."""
    try:
        return str(client("macie2").get_macie_session()["status"])
    except ClientError as exc:
        if error_code(exc) != "AccessDeniedException":
            raise
        return "NOT_ENABLED"


def _wait_for_job(context: DurableContext, service: str, start: Callable[[], str]) -> dict[str, Any]:
    """Start the job and wait for its end through the token store (its callback id under the job id): the job's
    outcome as the resume function sent it, or {"error", "cause"} when the job failed or the wait ran out."""
    heartbeat_seconds = documents_settings().heartbeat_seconds
    arn, prefix = context.state.durable_execution_arn, adapter(service).name

    def submit(callback_id: str, _: WaitForCallbackContext) -> None:
        # Throttled, a server error or unreachable, in the job's start (idempotent: its client token) or in the
        # registration: the submitter is retried (SUBMIT_RETRIES)
        with transient_errors():
            job_id = start()
            entered = datetime.now(UTC).isoformat(timespec="milliseconds")
            waiter = Waiter(arn, service, entered, 0, heartbeat_seconds, Kind.CALLBACK_ID)
            callbacks().register(service, job_id, callback_id, waiter)

    config = WaitForCallbackConfig(
        timeout=Duration.from_seconds(callback_settings().task_timeout_seconds),
        heartbeat_timeout=Duration.from_seconds(heartbeat_seconds),
        retry_strategy=SUBMIT_RETRIES,
    )
    try:
        outcome: dict[str, Any] = json.loads(context.wait_for_callback(submit, name=service, config=config))
    except CallbackTimeoutError:
        cause = f"the {service} job did not finish, or its progress could not be confirmed, before the wait timed out"
        return {"error": f"{prefix}.Timeout", "cause": cause}
    except CallbackExternalError as exc:  # the job's end, as shared.waits sends it: `<error>: <cause>`
        error, _, cause = (exc.message or "").partition(": ")
        return {"error": error, "cause": cause}
    except CallbackSubmitterError as exc:  # the job could not be started or registered, SUBMIT_RETRIES spent
        return {"error": f"{prefix}.NotStarted", "cause": exc.message or str(exc)}
    return outcome


def _client_token(name: str) -> str:
    """A client token of the execution's name: a replayed start is the same request (Translate allows 64 characters
    of letters, digits and hyphens)."""
    return hashlib.sha256(name.encode()).hexdigest()


def _start_translation(request: DurableDocumentsRequest, name: str, settings: DocumentsSettings) -> str:
    stack = callback_settings().stack_name
    job = client("translate").start_text_translation_job(
        JobName=f"{stack}.{name}",  # this stack's jobs are named `<stack>.<execution>`
        ClientToken=_client_token(name),
        InputDataConfig={"S3Uri": f"s3://{settings.bucket}/{request.input_prefix}", "ContentType": "text/plain"},
        OutputDataConfig={"S3Uri": f"s3://{settings.bucket}/{request.output_prefix}"},
        DataAccessRoleArn=settings.translate_role_arn,
        SourceLanguageCode=request.source_language,
        TargetLanguageCodes=request.target_languages,
    )
    return str(job["JobId"])


def _start_classification(request: DurableDocumentsRequest, name: str, settings: DocumentsSettings) -> str:
    stack = callback_settings().stack_name
    scope = {"comparator": "STARTS_WITH", "key": "OBJECT_KEY", "values": [request.input_prefix]}
    job = client("macie2").create_classification_job(
        name=f"{stack}.{name}",
        clientToken=_client_token(name),
        jobType="ONE_TIME",
        s3JobDefinition={
            "bucketDefinitions": [{"accountId": account_id(), "buckets": [settings.bucket]}],
            "scoping": {"includes": {"and": [{"simpleScopeTerm": scope}]}},
        },
    )
    return str(job["jobId"])


def _record_end(context: DurableContext, task: TaskRef, status: str, **change: str) -> bool:
    """The task's terminal entry (once: a replayed or repeated end changes nothing)."""
    ended = StatusChange(
        execution_arn=execution_of(context.state.durable_execution_arn),
        name=task.id,
        status=status,
        stop_date=int(datetime.now(UTC).timestamp() * 1000),
        **change,
    )
    return task_recorder().record_end(ended)
