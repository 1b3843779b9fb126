"""The service adapters: how each service says that a job has ended, by event and through its API, and what a
waiting workflow is told (success, or failure with an error name its Catch can match).

The expected vocabularies below are each service's documented ones (aws-facts.md: events and SDK models), not the
adapters' own tables; the services' APIs answer through botocore Stubber with their real response shapes, and the
rules are the ones template.yaml deploys, evaluated by moto's EventBridge pattern matcher.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.stub import Stubber
from moto.events.models import EventPattern

from shared.callback.adapters import ADAPTERS, adapter, healthlake_job_id, outcome_of
from shared.exceptions import JobEventNotConfirmedError, UnknownJobEventError, UnknownServiceError
from shared.outcome import Outcome
from tests.unit.payloads import bda_status, healthlake_export, invocation_arn, macie_job, translate_job
from tests.unit.support import EVENTS, Aws, Deployed

TRANSLATE_JOB = "8882c5390a2c0bd2d6ddba2f5b5faa9d"
MACIE_JOB = "85a55dc0fa6ed0be5939d0408f2e1c7b"
BDA_JOB = "3f1c9a2e-7b4d-4e8a-9c6f-2d5b8e0a1f47"
DATASTORE, EXPORT_JOB = "a1b2c3d4e5f60718293a4b5c6d7e8f90", "c4e1f5a9b2d3086e7f1a2b3c4d5e6f70"

# The prefix of the error name a failed job is reported with, per service (what the workflows' Catch match).
ERROR_PREFIX = {"translate": "Translate", "macie": "Macie", "bda": "BedrockDataAutomation", "healthlake": "HealthLake"}

# Each service's documented event vocabulary: status (or detail-type) -> True (the job succeeded), False (it
# failed), None (it has not ended).
TRANSLATE_STATUSES: dict[str, bool | None] = {
    "COMPLETED": True,
    "COMPLETED_WITH_ERROR": False,
    "FAILED": False,
    "STOPPED": False,
    "SUBMITTED": None,
    "IN_PROGRESS": None,
    "STOP_REQUESTED": None,
}
MACIE_JOB_ERRORS = [  # account- and bucket-level errors Macie logs for a job (the Macie User Guide's full list)
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
]
MACIE_EVENT_TYPES: dict[str, bool | None] = {
    "JOB_COMPLETED": True,
    "JOB_CANCELLED": False,
    **dict.fromkeys(MACIE_JOB_ERRORS, False),
    "JOB_CREATED": None,
    "ONE_TIME_JOB_STARTED": None,
    "JOB_PAUSED": None,
    "JOB_RESUMED": None,
    "SCHEDULED_RUN_STARTED": None,
    "SCHEDULED_RUN_COMPLETED": None,  # one run of a periodic job; the job itself goes on
}
BDA_DETAIL_TYPES: dict[str, tuple[str, bool] | None] = {  # -> (status as GetDataAutomationStatus spells it, success)
    "Bedrock Data Automation Job Succeeded": ("Success", True),
    "Bedrock Data Automation Job Failed With Client Error": ("ClientError", False),
    "Bedrock Data Automation Job Failed With Service Error": ("ServiceError", False),
    "Bedrock Data Automation Job Created": None,
}
HEALTHLAKE_DETAIL_TYPES: dict[str, tuple[str, bool] | None] = {  # -> (status as DescribeFHIRExportJob spells it, ...)
    "Export Job Completed": ("COMPLETED", True),
    "Export Job Completed With Errors": ("COMPLETED_WITH_ERRORS", False),
    "Export Job Failed": ("FAILED", False),
    "Export Job Submitted": None,
    "Export Job Queued": None,
    "Export Job In Progress": None,
}


def sample(name: str) -> dict[str, Any]:
    return dict(json.loads((EVENTS / f"resume_job.{name}.json").read_text()))


def translate_event(status: str, job_id: str = TRANSLATE_JOB) -> dict[str, Any]:
    event = sample("translate-completed")
    event["detail"] |= {"jobId": job_id, "jobStatus": status}
    return event


def macie_event(event_type: str, job_id: str = MACIE_JOB) -> dict[str, Any]:
    event = sample("macie-job-completed")
    event["detail"] |= {"jobId": job_id, "eventType": event_type}
    return event


def bda_event(detail_type: str, job_id: str = BDA_JOB) -> dict[str, Any]:
    event = sample("bda-succeeded")
    event["detail-type"] = detail_type
    event["detail"]["job_id"] = job_id
    return event


def healthlake_event(detail_type: str, datastore_id: str = DATASTORE, job_id: str = EXPORT_JOB) -> dict[str, Any]:
    event = sample("healthlake-export-completed")
    event["detail-type"] = detail_type
    event["detail"] |= {"datastoreId": datastore_id, "jobId": job_id}
    return event


@dataclass(frozen=True)
class Documented:
    """A documented job event and what it means for the job."""

    service: str
    event: dict[str, Any]
    job_id: str
    status: str | None  # the status the job ended with, None if the event does not end the job
    succeeded: bool | None

    @property
    def error(self) -> str:
        return f"{ERROR_PREFIX[self.service]}.{self.status}"


DOCUMENTED = [
    *(
        Documented("translate", translate_event(s), TRANSLATE_JOB, s if ok is not None else None, ok)
        for s, ok in TRANSLATE_STATUSES.items()
    ),
    *(
        Documented("macie", macie_event(t), MACIE_JOB, t if ok is not None else None, ok)
        for t, ok in MACIE_EVENT_TYPES.items()
    ),
    *(
        Documented("bda", bda_event(t), BDA_JOB, end[0] if end else None, end[1] if end else None)
        for t, end in BDA_DETAIL_TYPES.items()
    ),
    *(
        Documented(
            "healthlake",
            healthlake_event(t),
            f"{DATASTORE}/{EXPORT_JOB}",
            end[0] if end else None,
            end[1] if end else None,
        )
        for t, end in HEALTHLAKE_DETAIL_TYPES.items()
    ),
]
ENDING = [d for d in DOCUMENTED if d.status is not None]
NOT_ENDING = [d for d in DOCUMENTED if d.status is None]


def name(documented: Documented) -> str:
    detail = documented.event["detail"]
    return (
        f"{documented.service}:{detail.get('jobStatus') or detail.get('eventType') or documented.event['detail-type']}"
    )


# What DescribeClassificationJob says (jobStatus, lastRunErrorStatus.code) about a job that logged the event type
MACIE_CONFIRMATION = {"JOB_COMPLETED": ("COMPLETE", "NONE"), "JOB_CANCELLED": ("CANCELLED", "NONE")}


def confirm_macie_event(stubbed: Callable[[str], Stubber], documented: Documented) -> None:
    """A relayed Macie log event that ends a job is confirmed through DescribeClassificationJob: answer it as Macie
    would for a job that logged it (an error event: the job ended COMPLETE with lastRunErrorStatus ERROR)."""
    if documented.service == "macie" and documented.status is not None:
        status, last_run_error = MACIE_CONFIRMATION.get(documented.status, ("COMPLETE", "ERROR"))
        stubbed("macie2").add_response(
            "describe_classification_job", macie_job(MACIE_JOB, status, last_run_error), {"jobId": MACIE_JOB}
        )


TRANSLATE_REASON = "No documents were found at the input S3 location s3://documents/incoming/."


def explain_translate_failure(stubbed: Callable[[str], Stubber], documented: Documented) -> None:
    """A Translate failure event carries no reason; DescribeTextTranslationJob's Message tells it: answer it."""
    if documented.service == "translate" and documented.succeeded is False:
        stubbed("translate").add_response(
            "describe_text_translation_job",
            translate_job(TRANSLATE_JOB, str(documented.status), TRANSLATE_REASON),
            {"JobId": TRANSLATE_JOB},
        )


# ----------------------------------------------------------------------------------------------------------------
# Events
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("documented", ENDING, ids=name)
def test_an_event_that_ends_the_job_gives_its_outcome_and_error_name(
    documented: Documented, aws: Aws, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a job event saying that the job ended (a Macie event is confirmed through its API, a Translate failure
    # is explained by it)
    confirm_macie_event(stubbed, documented)
    explain_translate_failure(stubbed, documented)

    # When the resume function turns it into an outcome
    outcome = outcome_of(copy.deepcopy(documented.event))

    # Then the outcome names the service's job and says whether it succeeded; a failure carries the error name
    # `<Service>.<STATUS>` and a cause naming the job and the status
    assert outcome is not None
    assert (outcome.service, outcome.job_id, outcome.status) == (
        documented.service,
        documented.job_id,
        documented.status,
    )
    assert outcome.succeeded is documented.succeeded
    assert outcome.error == documented.error
    assert documented.job_id in outcome.cause
    assert str(documented.status) in outcome.cause
    if documented.service == "translate" and not documented.succeeded:
        assert outcome.cause.endswith(f": {TRANSLATE_REASON}")
    for service in ("translate", "macie2", "bedrock-data-automation-runtime", "healthlake"):
        stubbed(service).assert_no_pending_responses()


@pytest.mark.parametrize("documented", [d for d in NOT_ENDING if d.service in {"translate", "macie"}], ids=name)
def test_an_event_with_a_status_that_does_not_end_the_job_gives_no_outcome(
    documented: Documented, aws: Aws, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a job event whose status says the job goes on, and services that would fail any call
    stubbed("translate")
    stubbed("macie2")

    # When the resume function reads it
    outcome = outcome_of(copy.deepcopy(documented.event))

    # Then there is no outcome (the function ignores it), and no service was asked about the job
    assert outcome is None


@pytest.mark.parametrize("documented", [d for d in NOT_ENDING if d.service in {"bda", "healthlake"}], ids=name)
def test_an_event_whose_detail_type_does_not_end_the_job_is_ignored(documented: Documented) -> None:
    # Given a Bedrock Data Automation or HealthLake job event whose detail-type says the job goes on (the rules
    # never deliver these: test_the_rules_deliver_exactly_the_events_that_end_a_job)
    # When it reaches the resume function anyway
    outcome = outcome_of(copy.deepcopy(documented.event))
    # Then it is recognised and not mistaken for the end of the job
    assert outcome is None


@pytest.mark.parametrize(
    "event",
    [
        {**translate_event("COMPLETED"), "source": "aws.transcribe", "detail-type": "Transcribe Job State Change"},
        {**translate_event("COMPLETED"), "detail-type": "Translate Parallel Data State Change"},
        {**healthlake_event("Export Job Completed"), "detail-type": "Import Job Completed"},
        {**bda_event("Bedrock Data Automation Job Succeeded"), "detail-type": "Batch Inference Job State Change"},
        {**macie_event("JOB_COMPLETED"), "source": "aws.macie", "detail-type": "Macie Finding"},
        {**macie_event("JOB_COMPLETED"), "source": "aws.macie"},  # only the relay's own source is trusted
    ],
    ids=lambda event: f"{event['source']}:{event['detail-type']}",
)
def test_an_event_no_adapter_handles_is_refused_with_a_named_error(event: dict[str, Any]) -> None:
    # Given an event of a source or detail-type no adapter describes
    # When the resume function reads it
    # Then it fails with UnknownJobEventError naming the source and detail-type (the rule is wider than the adapters)
    with pytest.raises(UnknownJobEventError) as refused:
        outcome_of(event)
    assert event["source"] in str(refused.value)
    assert event["detail-type"] in str(refused.value)


def test_a_healthlake_job_is_known_by_its_data_store_and_export_job_id() -> None:
    # Given two exports with the same job id in different data stores (job ids are unique per data store only)
    first = outcome_of(healthlake_event("Export Job Completed", datastore_id="ds1", job_id="job-1"))
    second = outcome_of(healthlake_event("Export Job Completed", datastore_id="ds2", job_id="job-1"))

    # Then their outcomes name different jobs, as a registration does with healthlake_job_id
    assert first is not None and second is not None
    assert (first.job_id, second.job_id) == ("ds1/job-1", "ds2/job-1")
    assert first.job_id == healthlake_job_id("ds1", "job-1")


def test_a_failure_cause_carries_the_services_reason() -> None:
    # Given a Bedrock Data Automation job that failed with a client error, with the service's message
    event = sample("bda-client-error")

    # When it is turned into an outcome
    outcome = outcome_of(event)

    # Then the cause a workflow sees includes the service's reason
    assert outcome is not None
    assert event["detail"]["error_message"] in outcome.cause


def test_a_translate_failure_cause_carries_the_reason_its_api_gives(
    aws: Aws, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a Translate job that failed, whose event says only FAILED, and DescribeTextTranslationJob's Message
    api = stubbed("translate")
    api.add_response(
        "describe_text_translation_job",
        translate_job(TRANSLATE_JOB, "FAILED", TRANSLATE_REASON),
        {"JobId": TRANSLATE_JOB},
    )

    # When its event is turned into an outcome
    outcome = outcome_of(translate_event("FAILED"))

    # Then the cause a workflow (and an API client) sees says why, in the service's words, after the job and status
    assert outcome is not None
    assert (outcome.succeeded, outcome.error) == (False, "Translate.FAILED")
    assert outcome.cause == f"translate job {TRANSLATE_JOB} ended FAILED: {TRANSLATE_REASON}"
    api.assert_no_pending_responses()
    # and the reason is kept with the outcome when it is stored for a registration still to come
    assert Outcome.from_item(json.loads(json.dumps(outcome.to_item()))).cause == outcome.cause


@pytest.mark.parametrize(
    "error",
    [("AccessDeniedException", 400), ("ThrottlingException", 429), ("ResourceNotFoundException", 400)],
    ids=lambda error: error[0],
)
def test_a_translate_failure_whose_reason_cannot_be_read_is_reported_without_it(
    aws: Aws, stubbed: Callable[[str], Stubber], error: tuple[str, int]
) -> None:
    # Given a Translate job that failed, and DescribeTextTranslationJob refusing to answer
    code, status = error
    stubbed("translate").add_client_error(
        "describe_text_translation_job", code, "no answer", status, expected_params={"JobId": TRANSLATE_JOB}
    )

    # When its event is turned into an outcome
    outcome = outcome_of(translate_event("FAILED"))

    # Then the failure is still reported at once (the reason is worth a call, not a retry of the event)
    assert outcome is not None
    assert (outcome.succeeded, outcome.error) == (False, "Translate.FAILED")
    assert outcome.cause == f"translate job {TRANSLATE_JOB} ended FAILED"


def test_a_translate_success_is_reported_without_asking_the_api(aws: Aws, stubbed: Callable[[str], Stubber]) -> None:
    # Given Translate's API, which would fail any call (no answer prepared)
    stubbed("translate")

    # When a COMPLETED event is turned into an outcome
    outcome = outcome_of(translate_event("COMPLETED"))

    # Then it is a success, told from the event alone
    assert outcome is not None and outcome.succeeded


# ----------------------------------------------------------------------------------------------------------------
# Macie: a completion is confirmed through the API (errors can precede JOB_COMPLETED in the log)
# ----------------------------------------------------------------------------------------------------------------
def test_a_macie_completion_after_job_errors_is_a_failure(aws: Aws, stubbed: Callable[[str], Stubber]) -> None:
    # Given a Macie job that logged JOB_COMPLETED, but whose run DescribeClassificationJob reports with errors
    stubbed("macie2").add_response(
        "describe_classification_job", macie_job(MACIE_JOB, "COMPLETE", "ERROR"), {"jobId": MACIE_JOB}
    )

    # When its JOB_COMPLETED is turned into an outcome
    outcome = outcome_of(macie_event("JOB_COMPLETED"))

    # Then the workflow is told the job failed (its findings are incomplete), not that it found nothing
    assert outcome is not None
    assert (outcome.succeeded, outcome.error) == (False, "Macie.JOB_COMPLETED_WITH_ERRORS")
    stubbed("macie2").assert_no_pending_responses()


def test_a_forged_macie_completion_for_a_running_job_resumes_nothing(
    aws: Aws, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a relayed-looking Macie JOB_COMPLETED (its source is custom: anyone allowed events:PutEvents on the default
    # bus can send it) for a job DescribeClassificationJob still shows RUNNING
    stubbed("macie2").add_response("describe_classification_job", macie_job(MACIE_JOB, "RUNNING"), {"jobId": MACIE_JOB})

    # When it is turned into an outcome
    # Then it is refused with a named error (the delivery is retried, then dead-lettered): no outcome at all
    with pytest.raises(JobEventNotConfirmedError) as refused:
        outcome_of(macie_event("JOB_COMPLETED"))
    assert MACIE_JOB in str(refused.value)
    assert "RUNNING" in str(refused.value)
    stubbed("macie2").assert_no_pending_responses()


@pytest.mark.parametrize("event_type", ["JOB_CANCELLED", *MACIE_JOB_ERRORS])
def test_a_macie_failure_line_for_a_running_job_is_not_an_end(
    aws: Aws, stubbed: Callable[[str], Stubber], event_type: str
) -> None:
    # Given a Macie error line (e.g. one bucket's access denied: the job goes on) or a forged failure, for a job
    # DescribeClassificationJob still shows RUNNING
    stubbed("macie2").add_response("describe_classification_job", macie_job(MACIE_JOB, "RUNNING"), {"jobId": MACIE_JOB})

    # When it is turned into an outcome
    # Then it is no outcome (acknowledged, nothing resumed, nothing dead-lettered): the job's completion decides
    assert outcome_of(macie_event(event_type)) is None
    stubbed("macie2").assert_no_pending_responses()


@pytest.mark.parametrize("event_type", ["JOB_CANCELLED", *MACIE_JOB_ERRORS])
def test_a_macie_failure_event_for_a_job_that_succeeded_resumes_nothing(
    aws: Aws, stubbed: Callable[[str], Stubber], event_type: str
) -> None:
    # Given a Macie failure event for a job DescribeClassificationJob shows COMPLETE without errors (forged)
    stubbed("macie2").add_response(
        "describe_classification_job", macie_job(MACIE_JOB, "COMPLETE", "NONE"), {"jobId": MACIE_JOB}
    )

    # When it is turned into an outcome
    # Then the API's verdict wins: the event is not confirmed, and nothing fails the workflow
    with pytest.raises(JobEventNotConfirmedError):
        outcome_of(macie_event(event_type))


def test_a_macie_failure_cause_never_quotes_the_jobs_own_description(
    aws: Aws, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a job whose creator wrote a description, that ended with errors
    written = "Quarterly scan for ACME - contact j.smith@example.com"
    answer = {**macie_job(MACIE_JOB, "COMPLETE", "ERROR"), "description": written}
    stubbed("macie2").add_response("describe_classification_job", answer, {"jobId": MACIE_JOB})
    stubbed("macie2").add_response("describe_classification_job", answer, {"jobId": MACIE_JOB})

    # When its JOB_COMPLETED event, and the reconciler's describe, are turned into outcomes
    outcomes = [outcome_of(macie_event("JOB_COMPLETED")), adapter("macie").current(MACIE_JOB)]

    # Then each is the failure, and its cause (what the workflow and the task API show) does not quote the text
    for outcome in outcomes:
        assert outcome is not None
        assert outcome.error == "Macie.JOB_COMPLETED_WITH_ERRORS"
        assert written not in outcome.cause
        assert written not in json.dumps(outcome.to_item())


def test_a_macie_completion_that_cannot_be_confirmed_fails_the_invocation(
    aws: Aws, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a Macie job that logged JOB_COMPLETED, and DescribeClassificationJob throttling
    stubbed("macie2").add_client_error(
        "describe_classification_job", "ThrottlingException", "Rate exceeded", 429, expected_params={"jobId": MACIE_JOB}
    )

    # When its JOB_COMPLETED is turned into an outcome
    # Then the error surfaces (Lambda retries the event) instead of an unconfirmed success
    with pytest.raises(Exception, match="ThrottlingException"):
        outcome_of(macie_event("JOB_COMPLETED"))


@pytest.mark.parametrize("event_type", ["JOB_CANCELLED", *MACIE_JOB_ERRORS])
def test_a_macie_failure_the_api_confirms_is_named_after_the_event_type(
    aws: Aws, stubbed: Callable[[str], Stubber], event_type: str
) -> None:
    # Given a Macie failure event, and DescribeClassificationJob showing the job ended unsuccessfully
    status, last_run_error = MACIE_CONFIRMATION.get(event_type, ("COMPLETE", "ERROR"))
    stubbed("macie2").add_response(
        "describe_classification_job", macie_job(MACIE_JOB, status, last_run_error), {"jobId": MACIE_JOB}
    )

    # When the event is turned into an outcome
    outcome = outcome_of(macie_event(event_type))

    # Then it is a failure named after the event type (more specific than the API's status)
    assert outcome is not None
    assert (outcome.succeeded, outcome.error) == (False, f"Macie.{event_type}")


# ----------------------------------------------------------------------------------------------------------------
# Describe: the same vocabulary through each service's API
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Described:
    service: str
    client: str
    method: str
    job_id: str
    answer: dict[str, Any]
    expected_params: dict[str, Any]
    status: str | None  # the status the job ended with, None if it goes on
    succeeded: bool | None


def _translate(status: str, ok: bool | None) -> Described:
    return Described(
        "translate",
        "translate",
        "describe_text_translation_job",
        TRANSLATE_JOB,
        translate_job(TRANSLATE_JOB, status),
        {"JobId": TRANSLATE_JOB},
        status if ok is not None else None,
        ok,
    )


def _macie(api_status: str, last_run_error: str, status: str | None, ok: bool | None) -> Described:
    return Described(
        "macie",
        "macie2",
        "describe_classification_job",
        MACIE_JOB,
        macie_job(MACIE_JOB, api_status, last_run_error),
        {"jobId": MACIE_JOB},
        status,
        ok,
    )


def _bda(status: str, ok: bool | None) -> Described:
    errors = {"ClientError": "InvalidInput", "ServiceError": "InternalServerError"}
    return Described(
        "bda",
        "bedrock-data-automation-runtime",
        "get_data_automation_status",
        BDA_JOB,
        bda_status(status, errors.get(status)),
        {"invocationArn": invocation_arn(BDA_JOB)},  # the events' bare job id, back in its invocation ARN
        status if ok is not None else None,
        ok,
    )


def _healthlake(status: str, ok: bool | None) -> Described:
    return Described(
        "healthlake",
        "healthlake",
        "describe_fhir_export_job",
        f"{DATASTORE}/{EXPORT_JOB}",
        healthlake_export(DATASTORE, EXPORT_JOB, status),
        {"DatastoreId": DATASTORE, "JobId": EXPORT_JOB},
        status if ok is not None else None,
        ok,
    )


DESCRIBED = [
    *(_translate(status, ok) for status, ok in TRANSLATE_STATUSES.items()),
    _macie("COMPLETE", "NONE", "JOB_COMPLETED", True),
    _macie("COMPLETE", "ERROR", "JOB_COMPLETED_WITH_ERRORS", False),
    _macie("CANCELLED", "NONE", "JOB_CANCELLED", False),
    *(_macie(status, "NONE", None, None) for status in ("RUNNING", "PAUSED", "IDLE", "USER_PAUSED")),
    _bda("Success", True),
    _bda("ClientError", False),
    _bda("ServiceError", False),
    _bda("Created", None),
    _bda("InProgress", None),
    _healthlake("COMPLETED", True),
    _healthlake("COMPLETED_WITH_ERRORS", False),
    _healthlake("FAILED", False),
    _healthlake("CANCEL_COMPLETED", False),
    *(
        _healthlake(status, None)
        for status in ("SUBMITTED", "QUEUED", "IN_PROGRESS", "CANCEL_SUBMITTED", "CANCEL_IN_PROGRESS", "CANCEL_FAILED")
    ),
]


@pytest.mark.parametrize(
    "described",
    DESCRIBED,
    ids=[f"{d.service}-{i}-{d.status or 'not-ended'}" for i, d in enumerate(DESCRIBED)],
)
def test_describe_asks_the_service_and_speaks_the_events_vocabulary(
    described: Described, aws: Aws, stubbed: Callable[[str], Stubber]
) -> None:
    # Given the service's API answering about the job
    api = stubbed(described.client)
    api.add_response(described.method, copy.deepcopy(described.answer), described.expected_params)

    # When the job's adapter asks for it
    outcome = adapter(described.service).current(described.job_id)

    # Then the API was asked the right question, and a job that ended has the outcome its event would give
    api.assert_no_pending_responses()
    if described.status is None:
        assert outcome is None
        return
    assert outcome is not None
    assert (outcome.service, outcome.job_id, outcome.status) == (described.service, described.job_id, described.status)
    assert outcome.succeeded is described.succeeded
    assert outcome.error == f"{ERROR_PREFIX[described.service]}.{described.status}"
    # and it can be stored and sent as it is (the API's timestamps become text)
    assert Outcome.from_item(json.loads(json.dumps(outcome.to_item()))) == outcome


PAIRS = [  # (event, API answer) about the same job
    *((translate_event(s), _translate(s, ok)) for s, ok in TRANSLATE_STATUSES.items() if ok is not None),
    (macie_event("JOB_COMPLETED"), _macie("COMPLETE", "NONE", "JOB_COMPLETED", True)),
    (macie_event("JOB_CANCELLED"), _macie("CANCELLED", "NONE", "JOB_CANCELLED", False)),
    *((bda_event(t), _bda(end[0], end[1])) for t, end in BDA_DETAIL_TYPES.items() if end is not None),
    *(
        (healthlake_event(t), _healthlake(end[0], end[1]))
        for t, end in HEALTHLAKE_DETAIL_TYPES.items()
        if end is not None
    ),
]


@pytest.mark.parametrize(
    ("event", "described"),
    PAIRS,
    ids=[f"{d.service}-{d.status}" for _, d in PAIRS],
)
def test_an_event_and_a_describe_of_the_same_job_give_the_same_outcome(
    event: dict[str, Any], described: Described, aws: Aws, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a job that ended, its event, and its service's API answering about it (twice where the event path asks
    # too: a Macie event is confirmed, a Translate failure explained)
    api = stubbed(described.client)
    service = adapter(described.service)
    asked_by_event = service.confirm_events or (not described.succeeded and service.explain_failure)
    for _ in range(2 if asked_by_event else 1):
        api.add_response(described.method, copy.deepcopy(described.answer), described.expected_params)

    # When the resume function reads the event, and the reconciler asks the API
    from_event = outcome_of(copy.deepcopy(event))
    from_api = adapter(described.service).current(described.job_id)

    # Then both tell the workflow the same thing: same job, status, success and error name
    assert from_event is not None and from_api is not None

    def told(outcome: Outcome) -> tuple[str, str, str, bool, str]:
        return (outcome.service, outcome.job_id, outcome.status, outcome.succeeded, outcome.error)

    assert told(from_event) == told(from_api)
    api.assert_no_pending_responses()


def test_a_job_of_an_unknown_service_cannot_be_described() -> None:
    with pytest.raises(UnknownServiceError) as refused:
        adapter("transcribe")
    for known in ADAPTERS:
        assert known in str(refused.value)


# ----------------------------------------------------------------------------------------------------------------
# The template's rules
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("documented", DOCUMENTED, ids=name)
def test_the_rules_deliver_exactly_the_events_that_end_a_job(
    documented: Documented, aws: Aws, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a documented job event and the EventBridge rules template.yaml gives the resume function
    patterns = [EventPattern.load(json.dumps(pattern)) for pattern in aws.stack.rule_patterns("resume_job").values()]
    confirm_macie_event(stubbed, documented)
    explain_translate_failure(stubbed, documented)

    # When EventBridge matches the event against them
    delivered = any(pattern.matches_event(aws.stack.of_this_stack(documented.event)) for pattern in patterns)

    # Then it is delivered if and only if it ends the job, and then the adapter takes it for the end of the job
    assert delivered == (documented.status is not None)
    if delivered:
        outcome = outcome_of(copy.deepcopy(documented.event))
        assert outcome is not None
        assert outcome.status == documented.status


def test_every_adapter_has_a_rule_and_every_rule_an_adapter(stack: Deployed) -> None:
    # Given the rules of the resume function and the adapters
    patterns = stack.rule_patterns("resume_job").values()

    # Then each rule selects one adapter's source and detail-types, and each adapter's terminal detail-types (or,
    # where the status is a field, all of them) have their rule
    ruled = {(p["source"][0], detail_type) for p in patterns for detail_type in p["detail-type"]}
    handled = {
        (a.source, detail_type)
        for a in ADAPTERS.values()
        for detail_type, status in a.detail_types.items()
        if status is None or status in a.successes | a.failures
    }
    assert all(len(p["source"]) == 1 for p in patterns)
    assert ruled == handled
