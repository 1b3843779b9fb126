"""Service adapters: how each asynchronous service reports a finished job, by event and through its API.

An adapter is a small declarative description (the event's source and detail-types, where the job id and the status
are, which statuses end a job and which of those succeed) plus one `describe` call that asks the service for a job's
status in the same vocabulary. An event and a describe therefore produce the same Outcome, and the reconciler
resumes a job whose event was lost through the same code path as the event would have. A service that lists its jobs
with their statuses (Translate: ListTextTranslationJobs, up to 500 jobs a call) also has a `list_jobs` call, which
answers for many jobs what `describe` answers for one; and every adapter states the rate its describe and list
calls are kept to (the service's documented limit where it documents one).

To support another service: add an Adapter to ADAPTERS, an EventBridge rule for its terminal events on the resume
function (template.yaml) and a sample event under events/.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from shared.aws import account_id, client, error_code
from shared.exceptions import JobEventNotConfirmedError, UnknownJobEventError, UnknownServiceError
from shared.outcome import Detail, Outcome, reason


@dataclass(frozen=True)
class Adapter:
    service: str  # namespaces the job id in the token table, and what registrations pass as "service"
    name: str  # prefix of the error name a failure is reported with
    source: str
    detail_types: Mapping[str, str | None]  # detail-type -> the status it means, or None: read `status_field`
    job_id: Callable[[Detail], str | None]
    status_field: str | None
    successes: frozenset[str]
    failures: frozenset[str]
    describe: Callable[[str], tuple[str, Detail]]  # job id -> (status, details) through the service's API
    # Calls per second the reconciler makes of `describe`, and of `list_jobs` (each its own limit). Translate documents
    # 10 TPS for DescribeTextTranslationJob and for ListTextTranslationJobs; Macie, Bedrock Data Automation and
    # HealthLake document no rate for their describe calls: 10 a second is kept for them too.
    calls_per_second: float = 10.0
    # Every job submitted after a time (epoch seconds), page by page, as (job id, status, details) in `describe`'s
    # vocabulary, calling the given pace() before each call; None where the service cannot list its jobs so
    list_jobs: Callable[[float, Callable[[], None]], Iterator[list[tuple[str, str, Detail]]]] | None = None
    # The event's source is one anyone allowed events:PutEvents on the default bus can send (a custom source, not
    # aws.*): every terminal event is confirmed through the API before anything is resumed, and the API's
    # verdict wins (a success event may also hide errors only the API reports).
    confirm_events: bool = False
    explain_failure: bool = False  # the failure event carries no reason: ask the API for the job's message
    # The job's name in its described details, where the service names jobs (None: its events and jobs carry no
    # name of ours, so every job of the account is taken for this stack's)
    job_name: Callable[[Detail], str | None] | None = None

    def matches(self, event: Detail) -> bool:
        return event.get("source") == self.source and event.get("detail-type") in self.detail_types

    def outcome(self, event: Detail) -> Outcome | None:
        """The job's outcome, or None when the status is not terminal (never treated as completion)."""
        detail = event.get("detail") or {}
        status = self.detail_types[event["detail-type"]] or (detail.get(self.status_field or ""))
        outcome = self._outcome(self.job_id(detail), status, detail)
        if outcome is not None and self.confirm_events:
            return self._confirmed(outcome)
        if outcome is not None and not outcome.succeeded and self.explain_failure and outcome.message is None:
            return self._explained(outcome)
        return outcome

    def _confirmed(self, claimed: Outcome) -> Outcome | None:
        """The outcome the service's API confirms: its own for a claimed success (which may have ended with errors),
        the event's (more specific) for a failure the API confirms. A failure while the API says the job still runs
        is not an end (None): a job goes on past an error of one bucket, and its completion, confirmed, decides. The
        API not saying the job ended for a claimed success, or saying it succeeded when the event says it failed, is
        JobEventNotConfirmedError: nothing is resumed."""
        described = self.current(claimed.job_id)
        if described is None and not claimed.succeeded:
            return None
        if described is None or (described.succeeded and not claimed.succeeded):
            status = "RUNNING" if described is None else described.status
            raise JobEventNotConfirmedError(
                f"{self.service} job {claimed.job_id}: the event says {claimed.status}, the API says {status}"
            )
        return described if claimed.succeeded else claimed

    def _explained(self, outcome: Outcome) -> Outcome:
        """The failure with the service's reason from its describe call (e.g. DescribeTextTranslationJob's Message),
        so that the workflow's cause says why. Best effort: the failure itself is certain, so a describe that fails
        (throttled, not permitted) leaves the cause without the reason instead of failing the delivery."""
        try:
            _, described = self.describe(outcome.job_id)
        except (BotoCoreError, ClientError) as exc:
            from shared.observability import logger  # Powertools reads its environment on import: only when needed

            logger.warning(
                "failure reason not available",
                extra={"service": self.service, "jobId": outcome.job_id, "error": str(exc)},
            )
            return outcome
        why = reason(described)
        return replace(outcome, detail={**outcome.detail, "message": why}) if why else outcome

    def named(self, job_id: str, prefix: str) -> bool:
        """Whether the job's name starts with `prefix` (this stack's jobs are named `<stack>.<execution>`), asked of
        the service's API; True where the service names no job, as nothing then tells another stack's apart. A job
        the service does not know (an event replayed from elsewhere) is no job of this stack's either."""
        if self.job_name is None:
            return True
        try:
            _, described = self.describe(job_id)
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return False
            raise
        return str(self.job_name(described) or "").startswith(prefix)

    def current(self, job_id: str) -> Outcome | None:
        """Ask the service for the job; its Outcome if it has ended, else None."""
        return self.described(job_id, *self.describe(job_id))

    def described(self, job_id: str, status: str, detail: Detail) -> Outcome | None:
        """The Outcome of a job as `describe` (or `list_jobs`) answered for it, if it has ended, else None."""
        return self._outcome(job_id, status, json.loads(json.dumps(detail, default=str)))

    def _outcome(self, job_id: str | None, status: Any, detail: Detail) -> Outcome | None:
        if not job_id or status not in self.successes | self.failures:
            return None
        return Outcome(self.service, job_id, str(status), status in self.successes, detail, self.name)


def _describe_translate(job_id: str) -> tuple[str, Detail]:
    props = client("translate").describe_text_translation_job(JobId=job_id)["TextTranslationJobProperties"]
    return props["JobStatus"], props


def _list_translate(submitted_after: float, pace: Callable[[], None]) -> Iterator[list[tuple[str, str, Detail]]]:
    """ListTextTranslationJobs since the time, 500 jobs a page (its maximum), newest first: each job's properties are
    DescribeTextTranslationJob's."""
    request: dict[str, Any] = {"Filter": {"SubmittedAfterTime": submitted_after}, "MaxResults": 500}
    while True:
        pace()
        page = client("translate").list_text_translation_jobs(**request)
        yield [(props["JobId"], props["JobStatus"], props) for props in page["TextTranslationJobPropertiesList"]]
        if not page.get("NextToken"):
            return
        request["NextToken"] = page["NextToken"]


TRANSLATE = Adapter(
    service="translate",
    name="Translate",
    source="aws.translate",
    detail_types={"Translate TextTranslationJob State Change": None},
    job_id=lambda detail: detail.get("jobId"),
    status_field="jobStatus",
    successes=frozenset({"COMPLETED"}),
    failures=frozenset({"COMPLETED_WITH_ERROR", "FAILED", "STOPPED"}),
    describe=_describe_translate,
    list_jobs=_list_translate,
    explain_failure=True,  # the event is {jobId, jobStatus}; DescribeTextTranslationJob's Message says why
    job_name=lambda described: described.get("JobName"),
)


# Macie publishes no job event: the forward_macie_logs function relays its job log events under this source.
MACIE_EVENT_SOURCE = "callback-kit.macie"
MACIE_EVENT_DETAIL_TYPE = "Macie Classification Job Log Event"
# Account- and bucket-level errors Macie logs while a job runs (the Macie User Guide, "Understanding log events for
# sensitive data discovery jobs"): the job goes on to "complete", but without having analysed what it was asked to,
# so the workflow must not treat its (missing) findings as "no sensitive data".
MACIE_ERRORS = frozenset(
    {
        "ACCOUNT_ACCESS_DENIED",
        "ACCOUNT_DISABLED",
        "ACCOUNT_DISASSOCIATED",
        "ACCOUNT_ISOLATED",
        "ACCOUNT_REGION_DISABLED",
        "ACCOUNT_SUSPENDED",
        "ACCOUNT_TERMINATED",
        "BUCKET_ACCESS_DENIED",
        "BUCKET_DETAILS_UNAVAILABLE",
        "BUCKET_DOES_NOT_EXIST",
        "BUCKET_IN_DIFFERENT_REGION",
        "BUCKET_OWNER_CHANGED",
    }
)


def macie_log_entry(message: str, timestamp_ms: int) -> Detail:
    """A PutEvents entry relaying one Macie job log event (its JSON message becomes the detail, unchanged)."""
    return {
        "Source": MACIE_EVENT_SOURCE,
        "DetailType": MACIE_EVENT_DETAIL_TYPE,
        "Detail": json.dumps(json.loads(message)),
        "Time": datetime.fromtimestamp(timestamp_ms / 1000, UTC),
        "Resources": [],
    }


def _describe_macie(job_id: str) -> tuple[str, Detail]:
    """DescribeClassificationJob says COMPLETE / CANCELLED; map them onto the log's event types. The job's
    `description` is whatever its creator wrote, not a reason: it is left out, so a failure's cause never quotes it."""
    job = client("macie2").describe_classification_job(jobId=job_id)
    for field in ("ResponseMetadata", "description"):
        job.pop(field, None)
    status = {"COMPLETE": "JOB_COMPLETED", "CANCELLED": "JOB_CANCELLED"}.get(job["jobStatus"], job["jobStatus"])
    if status == "JOB_COMPLETED" and job.get("lastRunErrorStatus", {}).get("code") == "ERROR":
        status = "JOB_COMPLETED_WITH_ERRORS"
    return status, job


MACIE = Adapter(
    service="macie",
    name="Macie",
    source=MACIE_EVENT_SOURCE,
    detail_types={MACIE_EVENT_DETAIL_TYPE: None},
    job_id=lambda detail: detail.get("jobId"),
    status_field="eventType",
    successes=frozenset({"JOB_COMPLETED"}),
    failures=frozenset({"JOB_CANCELLED", "JOB_COMPLETED_WITH_ERRORS", *MACIE_ERRORS}),
    describe=_describe_macie,
    # The relayed log event travels under a custom source anyone may put on the default bus, and JOB_COMPLETED is
    # also logged after job-level errors (only DescribeClassificationJob's lastRunErrorStatus tells): confirm it.
    confirm_events=True,
)


def _describe_bda(job_id: str) -> tuple[str, Detail]:
    """GetDataAutomationStatus takes the invocation ARN; BDA's events carry only its last part."""
    bda = client("bedrock-data-automation-runtime")
    arn = f"arn:aws:bedrock:{bda.meta.region_name}:{account_id()}:data-automation-invocation/{job_id}"
    response = bda.get_data_automation_status(invocationArn=arn)
    response.pop("ResponseMetadata", None)
    return response["status"], response


BEDROCK_DATA_AUTOMATION = Adapter(
    service="bda",
    name="BedrockDataAutomation",
    source="aws.bedrock",
    detail_types={  # the detail-type is the outcome; statuses are spelled as GetDataAutomationStatus does
        "Bedrock Data Automation Job Created": "Created",
        "Bedrock Data Automation Job Succeeded": "Success",
        "Bedrock Data Automation Job Failed With Client Error": "ClientError",
        "Bedrock Data Automation Job Failed With Service Error": "ServiceError",
    },
    job_id=lambda detail: detail.get("job_id"),
    status_field=None,
    successes=frozenset({"Success"}),
    failures=frozenset({"ClientError", "ServiceError"}),
    describe=_describe_bda,
)


def healthlake_job_id(datastore_id: str, job_id: str) -> str:
    """HealthLake job ids are unique per data store, and DescribeFHIRExportJob needs both."""
    return f"{datastore_id}/{job_id}"


def _describe_healthlake(job_id: str) -> tuple[str, Detail]:
    datastore_id, _, export_id = job_id.partition("/")
    props = client("healthlake").describe_fhir_export_job(DatastoreId=datastore_id, JobId=export_id)
    return props["ExportJobProperties"]["JobStatus"], props["ExportJobProperties"]


HEALTHLAKE = Adapter(
    service="healthlake",
    name="HealthLake",
    source="aws.healthlake",
    detail_types={  # no status field: the detail-type is the status; spelled as DescribeFHIRExportJob does
        "Export Job Submitted": "SUBMITTED",
        "Export Job Queued": "QUEUED",
        "Export Job In Progress": "IN_PROGRESS",
        "Export Job Completed": "COMPLETED",
        "Export Job Completed With Errors": "COMPLETED_WITH_ERRORS",
        "Export Job Failed": "FAILED",
    },
    job_id=lambda detail: (
        healthlake_job_id(detail["datastoreId"], detail["jobId"])
        if detail.get("datastoreId") and detail.get("jobId")
        else None
    ),
    status_field=None,
    successes=frozenset({"COMPLETED"}),
    failures=frozenset({"COMPLETED_WITH_ERRORS", "FAILED", "CANCEL_COMPLETED"}),
    describe=_describe_healthlake,
)

ADAPTERS = {a.service: a for a in (TRANSLATE, MACIE, BEDROCK_DATA_AUTOMATION, HEALTHLAKE)}


def adapter(service: str) -> Adapter:
    if service not in ADAPTERS:
        raise UnknownServiceError(f"unknown service {service!r}; known services: {', '.join(ADAPTERS)}")
    return ADAPTERS[service]


def outcome_of(event: Detail) -> Outcome | None:
    """Turn a completion event into an Outcome through the adapter that recognises it."""
    for candidate in ADAPTERS.values():
        if candidate.matches(event):
            return candidate.outcome(event)
    raise UnknownJobEventError(
        f"no adapter for source={event.get('source')!r} detail-type={event.get('detail-type')!r}"
    )
