"""Named errors: their class names are what ASL Retry/Catch match on."""

from typing import ClassVar


class TransientAwsError(Exception):
    """An AWS call was throttled, hit a server error (5xx) or lost its connection after botocore's own retries
    (shared.aws.transient_errors names it): the same request may well succeed later, so the caller retries it (ASL
    Retry, Lambda's async retries) and it never becomes a job's outcome."""


class ExecutionNotEndedError(ValueError):
    """What acts on an execution's end (the task log's recorder, the export lock's release) was handed a status that
    is not one (RUNNING, PENDING_REDRIVE); nothing is read or written."""


class TokenConflictError(Exception):
    """Another task token is already registered for this job (by another execution, or another entry of the state)."""


class JobIdTooLongError(ValueError):
    """A job id whose token-table key would exceed DynamoDB's 2048-byte partition key limit."""


class UnknownServiceError(ValueError):
    """A registration names a service no adapter describes."""


class UnknownJobEventError(Exception):
    """An event no adapter recognises reached the resume function (the rule is wider than the adapters)."""


class JobEventNotConfirmedError(Exception):
    """A job event from a source anyone may send (a custom source on the default bus) says the job ended, but the
    service's API does not confirm it: nothing is resumed; the delivery is retried, then dead-lettered."""


class ReconcileIncompleteError(Exception):
    """The reconciler could not reconcile some jobs (after trying every one); the next scheduled run tries again."""


class EventsNotDeliveredError(Exception):
    """PutEvents kept refusing entries after every retry; the invocation fails so its retries/DLQ take over."""


class EventBusThrottledError(TransientAwsError):
    """PutEvents kept failing as a whole (throttled, or a server error or lost connection) through every round of the
    publisher's retry budget (shared.eventbus): nothing was refused, the bus asked the caller to come back later, so
    the caller's retry (the export's Map item Retry, Lambda's async retries) takes over."""


class ExportNotStartedError(Exception):
    """The FHIR $export kick-off did not answer 202 (e.g. a server error); the message is retried, then
    dead-lettered."""


# ---- tasks (async request/reply API); src/shared/tasks/resolver.py maps each to its HTTP status in one place ---------
class TaskNotFoundError(Exception):
    """No task with this id belongs to the caller (another caller's task is not found either)."""


class TaskStatusError(Exception):
    """The base of the errors below: the task's status does not allow the request."""

    template: ClassVar[str]  # the message, with {task_id} and {status}

    def __init__(self, task_id: str, status: str) -> None:
        super().__init__(self.template.format(task_id=task_id, status=status))
        self.task_id = task_id
        self.status = status


class TaskAlreadyEndedError(TaskStatusError):
    """The task has reached a terminal status; it can no longer be cancelled."""

    template = "task {task_id} already ended {status}"


class ResultNotReadyError(TaskStatusError):
    """The task is still running; its result is not there yet."""

    template = "task {task_id} is {status}; its result is not available"


class NoResultError(TaskStatusError):
    """The task ended without succeeding: it has no result and will not have one."""

    template = "task {task_id} ended {status} without a result"


class IdempotencyKeyReusedError(Exception):
    """The caller sent an Idempotency-Key already used for a different request."""


class RequestTooLargeError(Exception):
    """The request body exceeds the API's limit."""


class UnsupportedMediaTypeError(Exception):
    """The request body is not declared JSON (Content-Type application/json or application/*+json)."""


class RequestNotJsonError(Exception):
    """The request body is not JSON: not UTF-8, malformed, or nested deeper than the parser goes."""


class ExportBusyError(ExportNotStartedError):
    """HealthLake refused the kick-off because another export is running (one at a time per account and Region)."""


class UnknownTaskTypeError(Exception):
    """The request names a task type this deployment does not run (or none)."""

    def __init__(self, allowed: list[str], what: str = "unknown task type") -> None:
        super().__init__(f"{what}; allowed types: {', '.join(allowed) or 'none (every feature is left out)'}")
        self.allowed = allowed


class ExportRefusedError(ExportNotStartedError):
    """HealthLake refused the kick-off for good (a 4xx other than 429: role, key, permissions); the run fails."""


# ---- concurrency control (src/shared/concurrency) ----------------------------------------------------------------
class ExecutionsThrottledError(Exception):
    """ListExecutions stayed throttled after botocore's own retries; the gate task's Retry backs off and asks again
    (a scheduled starter's invocation fails and is retried)."""


# ---- export fan-out and run lock (src/shared/export) -------------------------------------------------------------
class UnpublishableRecordError(ValueError):
    """An exported line is not a record that can be put on the bus (not JSON, not an object, no resourceType). It is
    quarantined and counted; it never fails the file or the run."""


class CheckpointMovedError(Exception):
    """A file's publish checkpoint moved under this invocation (another invocation is publishing the same file). This
    one stops before publishing more; the Map item's Retry resumes after the checkpoint."""


class WorkflowError(Exception):
    """A durable workflow's end in the Step Functions workflow's own terms: `error` is the name its Fail state gives
    (`Translate.FAILED`, `Macie.NotEnabled`), `cause` says why; the message is `<error>: <cause>`. A task of the API
    records the same error and cause whichever engine ran it."""

    def __init__(self, error: str, cause: str) -> None:
        super().__init__(f"{error}: {cause}")
        self.error, self.cause = error, cause


class MacieNotEnabledError(WorkflowError):
    """Amazon Macie is not enabled (or is paused) in this account and Region: no job was started."""


class JobFailedError(WorkflowError):
    """A job a durable workflow waited for ended unsuccessfully (`Translate.FAILED`, `Macie.JOB_CANCELLED`, ...)."""


class JobTimedOutError(WorkflowError):
    """A durable workflow's wait for a job ran out (its timeout, or no heartbeat: the job's progress could no longer be
    confirmed): `Translate.Timeout`, `Macie.Timeout`."""
