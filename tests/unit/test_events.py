"""Every sample in events/ replayed through the function it names (`<handler>.<case>.json` ->
`handlers.<handler>.handler`), the way Lambda would call it, on moto, with what the function would find there:

- a job event is replayed against a real waiting task registered for its job: a terminal status must end the task
  (with the job's outcome), a non-terminal one must leave it waiting;
- a Macie job log batch must end up on the event bus, where the resume function's rules deliver it;
- the schedule must run the reconciler over the waiting tasks;
- the tagging request must tag the documents and their translations from Macie's findings.

Services moto lacks (Translate, Macie classification jobs and findings) answer through botocore Stubber.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber
from moto.events.models import EventPattern

from shared.adapters import ADAPTERS, healthlake_job_id, outcome_of
from tests.unit.support import (
    EVENTS,
    SRC,
    Aws,
    EventBus,
    WaitingTask,
    backdate_registration,
    invoke,
    logs_data,
    macie_finding,
    macie_job,
    rule_patterns,
    tags_of,
    template_handlers,
    translation_output,
)

SAMPLE_NAME = re.compile(r"^(?P<handler>[a-z][a-z0-9_]*)\.(?P<case>[a-z0-9][a-z0-9-]*)\.json$")
SAMPLES = sorted(EVENTS.glob("*.json"))


def handler_of(sample: Path) -> str:
    match = SAMPLE_NAME.match(sample.name)
    assert match, f"events/{sample.name}: name it <handler>.<case>.json, e.g. resume_job.translate-completed.json"
    return match["handler"]


def samples_of(handler: str) -> list[Path]:
    return [sample for sample in SAMPLES if SAMPLE_NAME.match(sample.name) and handler_of(sample) == handler]


def load(sample: Path) -> dict[str, Any]:
    return dict(json.loads(sample.read_text()))


# What the waiting workflow sees for each job event sample: the service it registered for, how its execution ends
# (RUNNING: it keeps waiting), the status it is resumed with, and the error name a Catch would match.
JOB_EVENT_OUTCOMES: dict[str, tuple[str, str, str | None, str | None]] = {
    "resume_job.translate-completed.json": ("translate", "SUCCEEDED", "COMPLETED", None),
    "resume_job.translate-completed-with-error.json": ("translate", "FAILED", None, "Translate.COMPLETED_WITH_ERROR"),
    "resume_job.translate-failed.json": ("translate", "FAILED", None, "Translate.FAILED"),
    "resume_job.translate-stopped.json": ("translate", "FAILED", None, "Translate.STOPPED"),
    "resume_job.translate-in-progress.json": ("translate", "RUNNING", None, None),
    "resume_job.macie-job-completed.json": ("macie", "SUCCEEDED", "JOB_COMPLETED", None),
    "resume_job.macie-job-cancelled.json": ("macie", "FAILED", None, "Macie.JOB_CANCELLED"),
    "resume_job.macie-bucket-access-denied.json": ("macie", "FAILED", None, "Macie.BUCKET_ACCESS_DENIED"),
    "resume_job.bda-succeeded.json": ("bda", "SUCCEEDED", "Success", None),
    "resume_job.bda-client-error.json": ("bda", "FAILED", None, "BedrockDataAutomation.ClientError"),
    "resume_job.bda-service-error.json": ("bda", "FAILED", None, "BedrockDataAutomation.ServiceError"),
    "resume_job.healthlake-export-completed.json": ("healthlake", "SUCCEEDED", "COMPLETED", None),
    "resume_job.healthlake-export-completed-with-errors.json": (
        "healthlake",
        "FAILED",
        None,
        "HealthLake.COMPLETED_WITH_ERRORS",
    ),
    "resume_job.healthlake-export-failed.json": ("healthlake", "FAILED", None, "HealthLake.FAILED"),
}
# What the services' APIs answer when the resume function asks about a sample's job: a Macie JOB_COMPLETED is
# confirmed against the job's error status. Any other call the function made would fail the test (Stubber).
API_ANSWERS: dict[str, Callable[[dict[str, Any]], list[tuple[str, str, dict[str, Any], dict[str, Any]]]]] = {
    "resume_job.macie-job-completed.json": lambda detail: [
        ("macie2", "describe_classification_job", macie_job(detail["jobId"], "COMPLETE"), {"jobId": detail["jobId"]})
    ],
}
DESCRIBED_SERVICES = ("translate", "macie2", "bedrock-data-automation-runtime", "healthlake")
REPLAYED = {"register_token", "resume_job", "forward_macie_logs", "reconcile_jobs", "tag_documents"}


def registered_job_id(service: str, detail: dict[str, Any]) -> str:
    """The job id a workflow registers, from what the service's start call answered (here: the event's fields)."""
    if service == "healthlake":  # StartFHIRExportJob answers DatastoreId and JobId; ids are unique per data store
        job_id = healthlake_job_id(detail["datastoreId"], detail["jobId"])
        assert job_id == f"{detail['datastoreId']}/{detail['jobId']}"
        return job_id
    if service == "bda":  # InvokeDataAutomationAsync answers the invocation ARN; its events carry its last part
        return str(detail["job_id"])
    return str(detail["jobId"])


# ----------------------------------------------------------------------------------------------------------------
# The samples and the template
# ----------------------------------------------------------------------------------------------------------------
def test_there_is_a_sample_for_every_function_in_the_template() -> None:
    sampled = {f"handlers.{handler_of(sample)}.handler" for sample in SAMPLES}
    assert template_handlers() <= sampled, f"functions without a sample in events/: {template_handlers() - sampled}"


def test_every_sample_is_replayed_by_a_test_below() -> None:
    assert {handler_of(sample) for sample in SAMPLES} <= REPLAYED
    assert {f"handlers.{handler}.handler" for handler in REPLAYED} == template_handlers()


def test_every_job_event_sample_says_what_the_workflow_sees() -> None:
    assert {sample.name for sample in samples_of("resume_job")} == set(JOB_EVENT_OUTCOMES)


def test_every_service_has_a_sample_of_success_and_of_failure() -> None:
    ends = {(service, end) for service, end, _, _ in JOB_EVENT_OUTCOMES.values()}
    for service in ADAPTERS:
        assert (service, "SUCCEEDED") in ends, f"events/: no sample of a {service} job that succeeded"
        assert (service, "FAILED") in ends, f"events/: no sample of a {service} job that failed"


@pytest.mark.parametrize("sample", SAMPLES, ids=[sample.name for sample in SAMPLES])
def test_the_sample_names_a_function_of_the_template(sample: Path) -> None:
    # Given a sample named after its handler
    handler = f"handlers.{handler_of(sample)}.handler"

    # Then the template deploys a function with that handler, and the module defines it
    assert handler in template_handlers(), f"events/{sample.name}: no function in template.yaml has Handler {handler}"
    module = SRC / "handlers" / f"{handler_of(sample)}.py"
    assert module.is_file(), f"events/{sample.name}: no module {module.relative_to(SRC)} in src/"


# ----------------------------------------------------------------------------------------------------------------
# register_token
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sample", samples_of("register_token"), ids=lambda sample: sample.name)
def test_a_registration_sample_stores_its_token(sample: Path, aws: Aws) -> None:
    # Given a registration as the workflow's waiting task sends it
    registration = load(sample)
    before = int(time.time())

    # When Lambda calls the register function with it
    result = invoke("register_token", registration)

    # Then the token is stored under the service and job id, living for the TTL asked for or the default one
    assert result == {"status": "REGISTERED"}
    item = aws.item(f"{registration['service']}#{registration['jobId']}")
    assert item is not None
    assert item["token"] == registration["taskToken"]
    default_ttl = int(aws.environment["TASK_TIMEOUT_SECONDS"]) + int(aws.environment["TOKEN_TTL_MARGIN_SECONDS"])
    assert item["expiresAt"] - item["registeredAt"] == registration.get("ttlSeconds", default_ttl)
    assert item["registeredAt"] >= before


# ----------------------------------------------------------------------------------------------------------------
# resume_job
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sample", samples_of("resume_job"), ids=lambda sample: sample.name)
def test_a_job_event_sample_resumes_the_task_waiting_for_its_job(
    sample: Path, aws: Aws, waiting_task: Callable[..., WaitingTask], stubbed: Callable[[str], Stubber]
) -> None:
    # Given a workflow whose task waits for the sample's job, and the job's services as they answer about it
    service, end, status, error = JOB_EVENT_OUTCOMES[sample.name]
    event = load(sample)
    for described in DESCRIBED_SERVICES:
        stubbed(described)
    answers = API_ANSWERS[sample.name](event["detail"]) if sample.name in API_ANSWERS else []
    for described, method, answer, params in answers:
        stubbed(described).add_response(method, answer, params)
    job_id = registered_job_id(service, event["detail"])
    task = waiting_task()
    assert invoke("register_token", {"service": service, "jobId": job_id, "taskToken": task.token}) == {
        "status": "REGISTERED"
    }

    # When the job's event reaches the resume function
    result = invoke("resume_job", event)

    # Then a terminal event ends the task with the job's outcome and clears its entry; another leaves it waiting
    if end == "RUNNING":
        assert result == {"status": "IGNORED"}
        assert task.status() == "RUNNING"
        item = aws.item(f"{service}#{job_id}")
        assert item is not None
        assert item["token"] == task.token
        return
    assert result == {"status": "RESUMED"}
    for described in DESCRIBED_SERVICES:
        stubbed(described).assert_no_pending_responses()
    execution = task.wait_until_closed()
    assert execution["status"] == end
    if end == "SUCCEEDED":
        output = json.loads(execution["output"])  # the job's details, with the service, job id and status added
        assert (output["service"], output["jobId"], output["status"]) == (service, job_id, status)
    else:
        assert execution["error"] == error
    assert aws.item(f"{service}#{job_id}") is None


@pytest.mark.parametrize("sample", samples_of("resume_job"), ids=lambda sample: sample.name)
def test_the_rules_deliver_a_job_event_exactly_when_it_ends_the_job(sample: Path) -> None:
    # Given a job event sample and the template's EventBridge rules for the resume function
    event = load(sample)
    patterns = [EventPattern.load(json.dumps(pattern)) for pattern in rule_patterns("resume_job").values()]
    assert patterns, "template.yaml: the resume function has no EventBridgeRule event"

    # Then a rule delivers it if and only if it ends the job (a non-terminal event never invokes the function)
    delivered = any(pattern.matches_event(event) for pattern in patterns)
    _, end, _, _ = JOB_EVENT_OUTCOMES[sample.name]
    assert delivered == (end != "RUNNING")


# ----------------------------------------------------------------------------------------------------------------
# forward_macie_logs
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sample", samples_of("forward_macie_logs"), ids=lambda sample: sample.name)
def test_a_macie_log_sample_reaches_the_resume_function_through_the_event_bus(
    sample: Path, aws: Aws, resume_rules: EventBus, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a batch of Macie job log events from the log group's subscription
    event = load(sample)
    logs = logs_data(event)
    messages = [json.loads(log_event["message"]) for log_event in logs["logEvents"]]
    assert len(messages) > 1, f"events/{sample.name}: a batch of several log events, as subscriptions deliver them"

    # When Lambda calls the forward function with it
    result = invoke("forward_macie_logs", event)

    # Then every log event is put on the bus once, and the resume function's rules deliver each of them with the
    # log message as detail and the log event's time
    assert result == {"forwarded": len(messages)}
    delivered = resume_rules.delivered()
    assert Counter(json.dumps(e["detail"], sort_keys=True) for e in delivered) == Counter(
        json.dumps(message, sort_keys=True) for message in messages
    )
    times = {
        datetime.fromtimestamp(log_event["timestamp"] // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for log_event in logs["logEvents"]
    }
    assert {e["time"] for e in delivered} == times
    # and the resume function takes each of them for the end of the job the log stream belongs to (a completion is
    # confirmed through DescribeClassificationJob)
    for relayed in delivered:
        if relayed["detail"]["eventType"] == "JOB_COMPLETED":
            stubbed("macie2").add_response(
                "describe_classification_job", macie_job(logs["logStream"], "COMPLETE"), {"jobId": logs["logStream"]}
            )
        outcome = outcome_of(relayed)
        assert outcome is not None
        assert (outcome.service, outcome.job_id) == ("macie", logs["logStream"])


# ----------------------------------------------------------------------------------------------------------------
# reconcile_jobs
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sample", samples_of("reconcile_jobs"), ids=lambda sample: sample.name)
def test_the_schedule_sample_runs_the_reconciler(
    sample: Path, aws: Aws, waiting_task: Callable[..., WaitingTask], stubbed: Callable[[str], Stubber]
) -> None:
    # Given a workflow waiting longer than the threshold for a translation job whose event was lost, and one that
    # registered just now
    job_id, fresh_job_id = "8882c5390a2c0bd2d6ddba2f5b5faa9d", "c0ffee0000000000000000000000beef"
    task, fresh = waiting_task(), waiting_task()
    invoke("register_token", {"service": "translate", "jobId": job_id, "taskToken": task.token})
    invoke("register_token", {"service": "translate", "jobId": fresh_job_id, "taskToken": fresh.token})
    backdate_registration(aws, f"translate#{job_id}", int(aws.environment["RECONCILE_AFTER_SECONDS"]) + 60)
    stubbed("translate").add_response(
        "describe_text_translation_job",
        {"TextTranslationJobProperties": {"JobId": job_id, "JobStatus": "COMPLETED"}},
        {"JobId": job_id},
    )

    # When the schedule invokes the reconcile function
    result = invoke("reconcile_jobs", load(sample))

    # Then the finished job's workflow is resumed, and the fresh one is left alone
    assert result == {"RESUMED": 1, "HEARTBEAT": 0, "CLOSED": 0, "UNCONFIRMED": 0}
    assert task.wait_until_closed()["status"] == "SUCCEEDED"
    assert fresh.status() == "RUNNING"
    stubbed("translate").assert_no_pending_responses()


# ----------------------------------------------------------------------------------------------------------------
# tag_documents
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sample", samples_of("tag_documents"), ids=lambda sample: sample.name)
def test_the_tagging_sample_tags_documents_and_translations(
    sample: Path, aws: Aws, stubbed: Callable[[str], Stubber], s3_bucket: Callable[[str], Any]
) -> None:
    # Given the documents of the request, their translations, and Macie's finding in one of them
    request = load(sample)
    bucket, input_prefix = request["bucket"], request["inputPrefix"]
    s3 = s3_bucket(bucket)
    for name in ("contract.txt", "letter.txt", "notes/minutes.txt"):
        s3.put_object(Bucket=bucket, Key=input_prefix + name, Body=b"...")
    translated = translation_output(
        s3, bucket, input_prefix, request["outputPrefix"], request["translationJobId"], ["fr", "de"]
    )
    with_pii = input_prefix + "letter.txt"
    finding = macie_finding(bucket, with_pii, request["classificationJobId"])
    macie = stubbed("macie2")
    criteria = {"criterion": {"classificationDetails.jobId": {"eq": [request["classificationJobId"]]}}}
    macie.add_response("list_findings", {"findingIds": [finding["id"]]}, {"findingCriteria": criteria})
    macie.add_response("get_findings", {"findings": [finding]}, {"findingIds": [finding["id"]]})

    # When the workflow's TagDocuments step invokes the function with it
    result = invoke("tag_documents", request)

    # Then each document and its translations carry pii=true exactly when Macie found personal data in it
    assert result == {"documents": 3, "translations": 6, "withPii": 1}
    for source, targets in translated.items():
        for key in (source, *targets):
            assert tags_of(s3, bucket, key) == {"pii": str(source == with_pii).lower()}, key
    macie.assert_no_pending_responses()
