"""The documents workflow as a Lambda durable function (DocumentsDurableFunction): statemachines/documents.asl.json's
work, written as code. docs/callback.md compares the two engines.

Macie must be on before any job starts. A Translate job and a Macie classification job then run side by side: a
callback each, then a step each that starts the job (idempotent on a client token of the execution's name) and
registers the callback id in the token store under the job id, exactly as the Step Functions tasks register their
task tokens, then both waits. The same completion events, resume function and reconciler then close either kind of
wait (shared.waits): either order, duplicates, lost events, heartbeats. Then the documents are tagged from Macie's
findings (shared.documents.pii, the Step Functions version's TagDocuments).

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
from aws_durable_execution_sdk_python.config import CallbackConfig, Duration, StepConfig
from aws_durable_execution_sdk_python.exceptions import (
    CallbackExternalError,
    CallbackTimeoutError,
    InvocationError,
    StepError,
)
from aws_durable_execution_sdk_python.retries import RetryStrategyConfig, create_retry_strategy
from aws_durable_execution_sdk_python.types import Callback, StepContext
from botocore.exceptions import ClientError
from pydantic import BaseModel, Field

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
from shared.tasks.statuslog import timestamp
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
    """The task API's documents input (its model's config: extra fields refused), plus the task when the API started
    the execution."""

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
    # Both callbacks first, then both jobs started and registered, then both waited for, in one context: no parallel
    # branch that the SDK suspends and does not look at again within the invocation (docs/offline-cloud.md, "PENDING
    # with nothing pending"). A job that cannot be started fails the execution before the next one starts.
    translation_wait, classification_wait = _callback(context, "translate"), _callback(context, "macie")
    _submit(context, "translate", translation_wait, lambda: _start_translation(request, name, settings))
    _submit(context, "macie", classification_wait, lambda: _start_classification(request, name, settings))
    translation, classification = _ended(translation_wait, "translate"), _ended(classification_wait, "macie")
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


def _callback(context: DurableContext, service: str) -> Callback[str]:
    """The callback the service's job will close, with the wait's timeout and heartbeat timeout (the parameters the
    Step Functions tasks wait with)."""
    config = CallbackConfig(
        timeout=Duration.from_seconds(callback_settings().task_timeout_seconds),
        heartbeat_timeout=Duration.from_seconds(documents_settings().heartbeat_seconds),
    )
    return context.create_callback(name=service, config=config)


def _submit(context: DurableContext, service: str, wait: Callback[str], start: Callable[[], str]) -> None:
    """Start the job and register the callback id in the token store under its job id, in one step; a start or a
    registration that was throttled, met a server error or was unreachable is retried (the start is idempotent: its
    client token). JobFailedError `<Service>.NotStarted` once that fails for good."""
    arn, heartbeat_seconds = context.state.durable_execution_arn, documents_settings().heartbeat_seconds

    def submit(_: StepContext) -> str:
        with transient_errors():
            job_id = start()
            entered = timestamp()  # the wait's entry, in $$.State.EnteredTime's form, as the workflows register it
            waiter = Waiter(arn, service, entered, 0, heartbeat_seconds, Kind.CALLBACK_ID)
            callbacks().register(service, job_id, wait.callback_id, waiter)
        return job_id

    try:
        context.step(submit, name=f"{service} submitter", config=StepConfig(retry_strategy=SUBMIT_RETRIES))
    except StepError as exc:
        raise JobFailedError(f"{adapter(service).name}.NotStarted", exc.message or str(exc)) from exc


def _ended(wait: Callback[str], service: str) -> dict[str, Any]:
    """Wait for the job's end: its outcome as the resume function sent it, or {"error", "cause"} when the job failed
    or the wait ran out."""
    prefix = adapter(service).name
    try:
        outcome: dict[str, Any] = json.loads(wait.result() or "null")
    except CallbackTimeoutError:
        cause = f"the {service} job did not finish, or its progress could not be confirmed, before the wait timed out"
        return {"error": f"{prefix}.Timeout", "cause": cause}
    except CallbackExternalError as exc:  # the job's end, as shared.waits sends it: `<error>: <cause>`
        error, _, cause = (exc.message or "").partition(": ")
        return {"error": error, "cause": cause}
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
