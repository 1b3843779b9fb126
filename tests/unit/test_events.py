"""Every sample in events/ replayed through the function it names (`<handler>.<case>.json` ->
`handlers.<handler>.handler`), the way Lambda would call it, on moto, with what the function would find there:

- a job event is replayed against a real waiting task registered for its job: a terminal status must end the task
  (with the job's outcome), a non-terminal one must leave it waiting;
- a Macie job log batch must end up on the event bus, where the resume function's rules deliver it;
- the schedule must run the reconciler over the waiting tasks;
- the tagging request must tag the documents and their translations from Macie's findings;
- the export workflow's samples must take and release its run lock, start and check the FHIR export (against a
  simulated HealthLake serving its FHIR endpoint over HTTP) and publish an exported file's records on the export bus.

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
from botocore.stub import ANY, Stubber
from moto.events.models import EventPattern

from localcloud.simulators.healthlake import HealthLakeSimulator
from shared.callback.adapters import ADAPTERS, healthlake_job_id, outcome_of
from tests.unit.payloads import (
    fhir_patients,
    logs_data,
    macie_finding,
    macie_job,
    ndjson,
    registration,
    translation_output,
    with_bodies,
)
from tests.unit.support import (
    EVENTS,
    SRC,
    STACK,
    Aws,
    Deployed,
    EventBus,
    ExportAccount,
    backdate_registration,
    invoke,
    tags_of,
)
from tests.unit.task_support import TaskAccount
from tests.unit.waiting import WaitingTask

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
def _macie_answer(status: str, last_run_error: str = "NONE") -> Callable[[dict[str, Any]], list[Any]]:
    """DescribeClassificationJob confirming a relayed Macie log event (its source can be forged)."""
    return lambda detail: [
        (
            "macie2",
            "describe_classification_job",
            macie_job(detail["jobId"], status, last_run_error),
            {"jobId": detail["jobId"]},
        )
    ]


API_ANSWERS: dict[str, Callable[[dict[str, Any]], list[tuple[str, str, dict[str, Any], dict[str, Any]]]]] = {
    "resume_job.macie-job-completed.json": _macie_answer("COMPLETE"),
    "resume_job.macie-bucket-access-denied.json": _macie_answer("COMPLETE", "ERROR"),
    "resume_job.macie-job-cancelled.json": _macie_answer("CANCELLED"),
}
DESCRIBED_SERVICES = ("translate", "macie2", "bedrock-data-automation-runtime", "healthlake")
REPLAYED = {
    "register_token",
    "resume_job",
    "forward_macie_logs",
    "reconcile_jobs",
    "tag_documents",
    "take_export_lock",
    "release_export_lock",
    "export_job",
    "start_admitted",  # replayed in test_admission.py
    "pass_gate",  # replayed in test_gate.py
    "publish_records",
    "tally_export_run",
    "task_api",
    "record_task_status",
    "acquire_permit",
    "release_permit",
    "sweep_permits",
    "ensure_macie_log_group",  # replayed in test_ensure_macie_log_group.py
    "documents_durable",  # replayed in test_documents_durable.py
}
# The stack the samples' ARNs name (samconfig.toml's default stack_name): the state machine is `<stack>-export`.
EXPORT_ENDS = {
    "release_export_lock.execution-failed.json": "FAILED",
    "release_export_lock.execution-timed-out.json": "TIMED_OUT",
    "release_export_lock.execution-aborted.json": "ABORTED",
}


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
def handlers_of(stack: Deployed) -> set[str]:
    """The `Handler` of every function the template deploys (`handlers.<module>.handler`)."""
    return {function.properties["Handler"] for function in stack.functions()}


def test_there_is_a_sample_for_every_function_in_the_template(stack: Deployed) -> None:
    sampled = {f"handlers.{handler_of(sample)}.handler" for sample in SAMPLES}
    assert handlers_of(stack) <= sampled, f"functions without a sample in events/: {handlers_of(stack) - sampled}"


def test_every_sample_is_replayed_by_a_test_below(stack: Deployed) -> None:
    assert {handler_of(sample) for sample in SAMPLES} <= REPLAYED
    assert {f"handlers.{handler}.handler" for handler in REPLAYED} == handlers_of(stack)


def test_every_job_event_sample_says_what_the_workflow_sees() -> None:
    assert {sample.name for sample in samples_of("resume_job")} == set(JOB_EVENT_OUTCOMES)


def test_every_service_has_a_sample_of_success_and_of_failure() -> None:
    ends = {(service, end) for service, end, _, _ in JOB_EVENT_OUTCOMES.values()}
    for service in ADAPTERS:
        assert (service, "SUCCEEDED") in ends, f"events/: no sample of a {service} job that succeeded"
        assert (service, "FAILED") in ends, f"events/: no sample of a {service} job that failed"


@pytest.mark.parametrize("sample", SAMPLES, ids=[sample.name for sample in SAMPLES])
def test_the_sample_names_a_function_of_the_template(sample: Path, stack: Deployed) -> None:
    # Given a sample named after its handler
    handler = f"handlers.{handler_of(sample)}.handler"

    # Then the template deploys a function with that handler, and the module defines it
    assert handler in handlers_of(stack), f"events/{sample.name}: no function in template.yaml has Handler {handler}"
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
    assert invoke("register_token", registration(service, job_id, task.token)) == {"status": "REGISTERED"}

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
def test_the_rules_deliver_a_job_event_exactly_when_it_ends_the_job(sample: Path, stack: Deployed) -> None:
    # Given a job event sample of this stack's job and the template's EventBridge rules for the resume function
    event = stack.of_this_stack(load(sample))
    patterns = [EventPattern.load(json.dumps(pattern)) for pattern in stack.rule_patterns("resume_job").values()]
    assert patterns, "template.yaml: the resume function has no EventBridgeRule event"

    # Then a rule delivers it if and only if it ends the job (a non-terminal event never invokes the function)
    delivered = any(pattern.matches_event(event) for pattern in patterns)
    _, end, _, _ = JOB_EVENT_OUTCOMES[sample.name]
    assert delivered == (end != "RUNNING")


@pytest.mark.parametrize(
    ("sample", "path", "foreign"),
    [
        ("resume_job.macie-job-completed.json", ["jobName"], "callback-kit-prod.documents-2026-01-15-a7f3"),
        ("resume_job.healthlake-export-completed.json", ["datastoreId"], "ffffffffffffffffffffffffffffffff"),
        ("resume_job.bda-succeeded.json", ["output_s3_location", "s3_bucket"], "callback-kit-prod-documentbucket-1kq"),
    ],
)
def test_another_stacks_job_events_are_not_delivered(
    sample: str, path: list[str], foreign: str, stack: Deployed
) -> None:
    # Given an event that ends a job of another stack in the same account (its Macie job name, its data store, the
    # bucket its BDA job wrote to)
    event = load(EVENTS / sample)
    *parents, field = path
    detail = event["detail"]
    for parent in parents:
        detail = detail[parent]
    detail[field] = foreign
    patterns = [EventPattern.load(json.dumps(pattern)) for pattern in stack.rule_patterns("resume_job").values()]
    # Then no rule of this stack delivers it: a foreign completion costs this stack no invocation and nothing stored
    assert not any(pattern.matches_event(event) for pattern in patterns)


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
    # and the resume function takes each of them for the end of the job the log stream belongs to (each is
    # confirmed through DescribeClassificationJob: the job ended, with errors if the batch logged any)
    errors = any(m["eventType"] not in {"JOB_COMPLETED", "JOB_CANCELLED"} for m in messages)
    for relayed in delivered:
        status = "CANCELLED" if relayed["detail"]["eventType"] == "JOB_CANCELLED" else "COMPLETE"
        answer = macie_job(logs["logStream"], status, "ERROR" if errors else "NONE")
        stubbed("macie2").add_response("describe_classification_job", answer, {"jobId": logs["logStream"]})
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
    invoke("register_token", registration("translate", job_id, task.token))
    invoke("register_token", registration("translate", fresh_job_id, fresh.token))
    backdate_registration(aws, f"translate#{job_id}", int(aws.environment["RECONCILE_AFTER_SECONDS"]) + 60)
    stubbed("translate").add_response(
        "list_text_translation_jobs",
        {"TextTranslationJobPropertiesList": [{"JobId": job_id, "JobStatus": "COMPLETED"}]},
        {"Filter": {"SubmittedAfterTime": ANY}, "MaxResults": 500},
    )

    # When the schedule invokes the reconcile function
    result = invoke("reconcile_jobs", load(sample))

    # Then the finished job's workflow is resumed, and the fresh one is left alone
    assert result == {"RESUMED": 1, "HEARTBEAT": 0, "CLOSED": 0, "UNCONFIRMED": 0, "DEFERRED": 0}
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


# ----------------------------------------------------------------------------------------------------------------
# take_export_lock
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sample", samples_of("take_export_lock"), ids=lambda sample: sample.name)
def test_the_take_lock_sample_takes_the_export_lock(sample: Path, export_account: ExportAccount) -> None:
    # Given the lock as the previous run left it: COMPLETED, with its trigger time as the next run's _since
    payload = load(sample)
    export_account.hold(
        f"{payload['executionArn'].rsplit(':', 1)[0]}:previous-run", "COMPLETED", last_run_time="2026-01-15T10:25:00Z"
    )

    # When the workflow's TakeLock step invokes the function with its payload
    result = invoke("take_export_lock", payload)

    # Then the execution holds the lock and exports what changed since the previous run's trigger time
    assert result == {"acquired": True, "lastRunTime": "2026-01-15T10:25:00Z", "holder": None}
    lock = export_account.lock()
    assert lock is not None
    assert (lock["runStatus"], lock["executionArn"], lock["triggerTime"]) == (
        "RUNNING",
        payload["executionArn"],
        payload["triggerTime"],
    )


# ----------------------------------------------------------------------------------------------------------------
# release_export_lock
# ----------------------------------------------------------------------------------------------------------------
def test_every_way_an_export_execution_ends_without_its_bookkeeping_has_a_sample() -> None:
    assert {sample.name for sample in samples_of("release_export_lock")} == set(EXPORT_ENDS)


@pytest.mark.parametrize("sample", samples_of("release_export_lock"), ids=lambda sample: sample.name)
def test_the_status_change_rule_delivers_an_export_execution_that_ended_badly(sample: Path, stack: Deployed) -> None:
    # Given an Execution Status Change event of the export state machine, and the template's rule for the release
    # function in the stack the sample was taken from
    event = load(sample)
    patterns = stack.rule_patterns("release_export_lock")
    assert patterns, "template.yaml: the release function has no EventBridgeRule event"

    # Then the rule delivers it
    assert event["detail"]["status"] == EXPORT_ENDS[sample.name]
    assert any(EventPattern.load(json.dumps(pattern)).matches_event(event) for pattern in patterns.values())


@pytest.mark.parametrize("sample", samples_of("release_export_lock"), ids=lambda sample: sample.name)
def test_an_execution_end_sample_releases_the_lock_it_held(sample: Path, export_account: ExportAccount) -> None:
    # Given the lock held by the execution that ended
    event = load(sample)
    execution_arn = event["detail"]["executionArn"]
    export_account.hold(execution_arn, last_run_time="2026-01-15T10:25:00Z")

    # When its status change reaches the release function
    result = invoke("release_export_lock", event)

    # Then the lock is free again, and the next run exports the same gap (lastRunTime did not move)
    assert result == {"released": True}
    lock = export_account.lock()
    assert lock is not None
    assert (lock["runStatus"], lock["executionArn"], lock["lastRunTime"]) == (
        "FAILED",
        execution_arn,
        "2026-01-15T10:25:00Z",
    )
    taken = invoke("take_export_lock", {"executionArn": f"{execution_arn}-next", "triggerTime": "2026-01-15T11:00:00Z"})
    assert taken == {"acquired": True, "lastRunTime": "2026-01-15T10:25:00Z", "holder": None}


# ----------------------------------------------------------------------------------------------------------------
# export_job
# ----------------------------------------------------------------------------------------------------------------
def sample_body(sample: Path) -> dict[str, Any]:
    (record,) = load(sample)["Records"]
    return dict(json.loads(record["body"]))


@pytest.mark.parametrize("sample", samples_of("export_job"), ids=lambda sample: sample.name)
def test_an_export_queue_sample_is_a_message_the_workflow_or_the_function_sends(sample: Path) -> None:
    # Given a message from the export queue, as the SQS event source mapping delivers it
    (record,) = load(sample)["Records"]
    body = json.loads(record["body"])

    # Then it is one of the two messages the export function reads, with every field it needs
    assert record["eventSource"] == "aws:sqs"
    assert set(body) in (
        {"action", "taskToken", "executionArn", "executionName", "lastRunTime"},
        {
            "action",
            "taskToken",
            "jobId",
        },
    )
    assert body["action"] == ("start" if "executionArn" in body else "check")


def test_the_start_message_sample_starts_the_export_and_schedules_its_first_check(
    export_account: ExportAccount, healthlake: Callable[..., HealthLakeSimulator]
) -> None:
    # Given a HealthLake data store (a simulator serving the FHIR endpoint, SigV4 checked)
    simulator = healthlake(delay_seconds=60)
    sample = EVENTS / "export_job.start-message.json"
    body = sample_body(sample)

    # When the start message the workflow's Export task sent reaches the export function
    result = invoke("export_job", load(sample))

    # Then the data store exports what changed since the last run, and a check of that export is queued for later
    assert result == {"batchItemFailures": []}
    assert export_account.started_exports() == {body["executionArn"]: next(iter(simulator.jobs))}
    (job,) = simulator.jobs.values()
    assert f"_since={body['lastRunTime'].replace(':', '%3A')}" in str(job.request)
    assert export_account.checks_queued() == [
        (
            {"action": "check", "taskToken": body["taskToken"], "jobId": job.job_id},
            int(export_account.environment["EXPORT_RECHECK_DELAY_SECONDS"]),
        )
    ]


def test_the_check_message_sample_ends_the_task_with_the_manifest_of_the_finished_export(
    export_account: ExportAccount, waiting_task: Callable[..., WaitingTask], stubbed: Callable[[str], Stubber]
) -> None:
    # Given a workflow waiting for the export of the sample's check, which HealthLake reports COMPLETED, with its
    # files in the export bucket
    sample = EVENTS / "export_job.check-message.json"
    job_id = sample_body(sample)["jobId"]
    datastore_id = export_account.environment["HEALTHLAKE_DATASTORE_ID"]
    folder = f"exports/{datastore_id}-FHIR_EXPORT-{job_id}/"
    files = [
        f"{folder}Patient/Patient-4726190385126740913-1-0.ndjson",
        f"{folder}Observation/Observation-4726190385126740913-1-0.ndjson",
    ]
    for key in files:
        export_account.s3.put_object(Bucket=export_account.bucket, Key=key, Body=ndjson(fhir_patients(2)))
    described = {
        "ExportJobProperties": {
            "JobId": job_id,
            "JobStatus": "COMPLETED",
            "SubmitTime": datetime(2026, 1, 15, 10, 30, 1, tzinfo=UTC),
            "EndTime": datetime(2026, 1, 15, 10, 40, 2, tzinfo=UTC),
            "DatastoreId": datastore_id,
            "OutputDataConfig": {
                "S3Configuration": {
                    "S3Uri": f"s3://{export_account.bucket}/{folder}",
                    "KmsKeyId": export_account.environment["EXPORT_KMS_KEY_ID"],
                }
            },
            "DataAccessRoleArn": export_account.environment["EXPORT_DATA_ACCESS_ROLE_ARN"],
        }
    }
    stubbed("healthlake").add_response(
        "describe_fhir_export_job", described, {"DatastoreId": datastore_id, "JobId": job_id}
    )
    task = waiting_task(heartbeat_seconds=600)

    # When the check message (carrying this task's token) reaches the export function
    result = invoke("export_job", with_bodies(load(sample), taskToken=task.token))

    # Then the task succeeds with the manifest of the export's files, and nothing more is checked
    assert result == {"batchItemFailures": []}
    execution = task.wait_until_closed()
    assert execution["status"] == "SUCCEEDED"
    output = json.loads(execution["output"])
    assert (output["bucket"], output["fileCount"], output["status"]) == (export_account.bucket, 2, "COMPLETED")
    assert sorted(entry["key"] for entry in export_account.manifest(output["manifestKey"])) == sorted(files)
    assert export_account.checks_queued() == []
    stubbed("healthlake").assert_no_pending_responses()


# ----------------------------------------------------------------------------------------------------------------
# publish_records
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sample", samples_of("publish_records"), ids=lambda sample: sample.name)
def test_the_file_sample_puts_each_record_of_the_file_on_the_export_bus(
    sample: Path, export_account: ExportAccount, s3_bucket: Callable[[str], Any]
) -> None:
    # Given the exported NDJSON file the Distributed Map hands the function
    item = load(sample)
    records = fhir_patients(12)
    s3_bucket(item["bucket"]).put_object(Bucket=item["bucket"], Key=item["key"], Body=ndjson(records))

    # When the map's PublishFile step invokes the function with it
    result = invoke("publish_records", item)

    # Then every record is one event on the export bus, and the result carries counts only
    assert result == {
        "key": item["key"],
        "lines": 12,
        "records": 12,
        "published": 12,
        "quarantined": 0,
        "undelivered": 0,
        "complete": True,
    }
    delivered = export_account.published.delivered()
    assert {event["detail-type"] for event in delivered} == {export_account.environment["EXPORT_DETAIL_TYPE"]}
    assert sorted(json.dumps(event["detail"], sort_keys=True) for event in delivered) == sorted(
        json.dumps(record, sort_keys=True) for record in records
    )


@pytest.mark.parametrize("sample", samples_of("tally_export_run"), ids=lambda sample: sample.name)
def test_the_tally_sample_sums_the_published_files_of_its_run(sample: Path, export_account: ExportAccount) -> None:
    # Given the run's manifest of one file, which the map's PublishFile step published
    request = load(sample)
    key = "exports/ds-FHIR_EXPORT-job/Patient/Patient-1-1-0.ndjson"
    export_account.s3.put_object(Bucket=export_account.bucket, Key=key, Body=ndjson(fhir_patients(3)))
    manifest = json.dumps([{"bucket": export_account.bucket, "key": key}]).encode()
    export_account.s3.put_object(Bucket=export_account.bucket, Key=request["manifestKey"], Body=manifest)
    invoke("publish_records", {"run": request["run"], "bucket": export_account.bucket, "key": key})

    # When the workflow's Tally step invokes the function with the sample
    tally = invoke("tally_export_run", request)

    # Then every record is accounted for, as published
    assert (tally["status"], tally["records"], tally["published"], tally["accounted"]) == ("COMPLETED", 3, 3, 3)
    assert tally["filesUnfinished"] == 0


# ----------------------------------------------------------------------------------------------------------------
# task_api and record_task_status
# ----------------------------------------------------------------------------------------------------------------
# The tasks the API samples name: one still running, one that succeeded (both the samples' caller's); any other id
# is unknown. What each sample answers.
RUNNING_TASK, SUCCEEDED_TASK = "7f0e5f3c-2b1a-4c6d-9e8f-0a1b2c3d4e5f", "0c9d8e7f-6a5b-4c3d-8e1f-2a3b4c5d6e7f"
API_ANSWERS_BY_SAMPLE: dict[str, tuple[int, str | None]] = {
    "task_api.submit.json": (202, "SUBMITTED"),
    "task_api.submit-invalid.json": (422, None),
    "task_api.submit-unknown-type.json": (422, None),
    "task_api.submit-malformed.json": (400, None),
    "task_api.submit-array.json": (422, None),
    "task_api.submit-form.json": (415, None),
    "task_api.submit-invalid-utf8.json": (400, None),
    "task_api.submit-too-deep.json": (400, None),
    "task_api.submit-too-large.json": (413, None),
    "task_api.get-running.json": (200, "RUNNING"),
    "task_api.get-succeeded.json": (200, "SUCCEEDED"),
    "task_api.get-unknown.json": (404, None),
    "task_api.get-result.json": (200, None),
    "task_api.get-result-pending.json": (404, "RUNNING"),
    "task_api.get-history.json": (200, None),
    "task_api.cancel.json": (200, "CANCELLED"),
    "task_api.cancel-ended.json": (409, "SUCCEEDED"),
    "task_api.get-openapi.json": (200, None),
}


def seed_task(tasks: TaskAccount, task_id: str, owner: str, execution_arn: str, output: str | None = None) -> None:
    """A task as the API leaves it once started; with `output`, as the status recorder leaves it once succeeded."""
    from shared.tasks.statuslog import END_SEQ, HEAD_SEQ, Entry, StatusLog

    log = StatusLog(tasks.environment["TASK_TABLE"])
    head = Entry(HEAD_SEQ, "SUBMITTED", "2026-01-15T10:31:47.120Z", expires_at=2_000_000_000, owner=owner)
    log.create(task_id, Entry(**{**head.__dict__, "type": "documents", "input": {}, "execution_arn": execution_arn}))
    log.append(task_id, Entry("2026-01-15T10:31:47.200Z#RUNNING", "RUNNING", "2026-01-15T10:31:47.200Z"))
    if output is not None:
        log.end(task_id, Entry(END_SEQ, "SUCCEEDED", "2026-01-15T10:42:07.000Z", output=output))


def test_every_api_sample_says_what_it_answers() -> None:
    assert {sample.name for sample in samples_of("task_api")} == set(API_ANSWERS_BY_SAMPLE)


@pytest.mark.parametrize("sample", samples_of("task_api"), ids=lambda sample: sample.name)
def test_an_api_sample_gets_its_answer(sample: Path, tasks: TaskAccount) -> None:
    # Given the samples' caller's two tasks
    event = load(sample)
    owner = event["requestContext"]["authorizer"]["iam"]["userArn"]
    seed_task(tasks, RUNNING_TASK, owner, tasks.execution_arn(RUNNING_TASK))
    seed_task(tasks, SUCCEEDED_TASK, owner, tasks.execution_arn(SUCCEEDED_TASK), output='{"tagged": {"documents": 3}}')
    before = len(tasks.all_entries())

    # When API Gateway hands the function the request
    response = invoke("task_api", event)

    # Then it answers as documented, and only an accepted POST or a cancel writes to the log
    status, task_status = API_ANSWERS_BY_SAMPLE[sample.name]
    body = json.loads(response["body"])
    assert response["statusCode"] == status, body
    if task_status is not None:
        assert body["status"] == task_status
    written = len(tasks.all_entries()) - before
    assert written == {"task_api.submit.json": 2, "task_api.cancel.json": 1}.get(sample.name, 0)


@pytest.mark.parametrize("sample", samples_of("record_task_status"), ids=lambda sample: sample.name)
def test_an_execution_end_sample_appends_the_one_terminal_entry(sample: Path, tasks: TaskAccount) -> None:
    # Given the task whose execution the sample reports
    event = load(sample)
    detail = event["detail"]
    seed_task(tasks, detail["name"], "arn:aws:iam::123456789012:user/local-developer", detail["executionArn"])

    # When the rule delivers it, twice (EventBridge delivers at least once)
    first, second = invoke("record_task_status", event), invoke("record_task_status", event)

    # Then the log ends with the execution's status, error and cause (or output), once
    assert (first["recorded"], second["recorded"]) == (True, False)
    end = tasks.log(detail["name"])[-1]
    assert end["status"] == detail["status"]
    assert {k: v for k, v in end["detail"].items()} == {
        k: detail[k] for k in ("error", "cause") if detail.get(k) is not None
    }
    assert end.get("output") == detail.get("output")


@pytest.mark.parametrize("sample", samples_of("record_task_status"), ids=lambda sample: sample.name)
def test_the_status_rule_delivers_only_task_state_machines_terminal_statuses(sample: Path, stack: Deployed) -> None:
    # Given the rule, with the task state machines as the sample's stack deploys them
    event = load(sample)
    (pattern,) = stack.rule_patterns("record_task_status").values()
    detail_pattern = dict(pattern["detail"])
    detail_pattern["stateMachineArn"] = [event["detail"]["stateMachineArn"]]
    rule = EventPattern.load(json.dumps({**pattern, "detail": detail_pattern}))

    # Then it delivers the sample, but not a running execution nor another state machine's execution
    assert rule.matches_event(event)
    assert not rule.matches_event({**event, "detail": {**event["detail"], "status": "RUNNING"}})
    other = event["detail"]["stateMachineArn"] + "-other"
    assert not rule.matches_event({**event, "detail": {**event["detail"], "stateMachineArn": other}})


# ----------------------------------------------------------------------------------------------------------------
# acquire_permit, release_permit, sweep_permits (the callback semaphore)
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sample", samples_of("acquire_permit"), ids=lambda sample: sample.name)
def test_the_acquire_sample_resumes_its_task_with_a_free_permit(
    sample: Path, aws: Aws, waiting_task: Callable[..., WaitingTask]
) -> None:
    task = waiting_task()
    event = load(sample) | {"executionArn": task.execution_arn, "taskToken": task.token}

    assert invoke("acquire_permit", event) == {"resource": event["resource"], "acquired": "QUEUED"}

    assert json.loads(task.wait_until_closed()["output"])["resource"] == event["resource"]
    invoke("release_permit", {"resource": event["resource"], "executionArn": task.execution_arn})


@pytest.mark.parametrize("sample", samples_of("release_permit"), ids=lambda sample: sample.name)
def test_a_release_sample_frees_the_permit_its_execution_holds(
    sample: Path, aws: Aws, waiting_task: Callable[..., WaitingTask]
) -> None:
    # Given the sample's execution holding the only permit of its resource, and a task waiting for it
    event = load(sample)
    execution_arn = event.get("detail", event)["executionArn"]
    resource = json.loads(event["detail"]["input"])["resource"] if "detail" in event else event["resource"]
    holder, waiter = waiting_task(), waiting_task()
    invoke(
        "acquire_permit", {"resource": resource, "limit": 1, "executionArn": execution_arn, "taskToken": holder.token}
    )
    invoke(
        "acquire_permit",
        {"resource": resource, "limit": 1, "executionArn": waiter.execution_arn, "taskToken": waiter.token},
    )
    assert waiter.status() == "RUNNING"

    # When the sample is replayed, the waiter gets the permit
    invoke("release_permit", event)

    assert waiter.wait_until_closed()["status"] == "SUCCEEDED"
    invoke("release_permit", {"resource": resource, "executionArn": waiter.execution_arn})


def test_the_status_change_rule_delivers_every_stack_execution_that_ended_badly(stack: Deployed) -> None:
    (pattern,) = stack.rule_patterns("release_permit").values()
    rule = EventPattern.load(json.dumps(pattern))
    sample = load(EVENTS / "release_permit.execution-aborted.json")
    for status, delivered in (("ABORTED", True), ("FAILED", True), ("TIMED_OUT", True), ("SUCCEEDED", False)):
        assert rule.matches_event(sample | {"detail": sample["detail"] | {"status": status}}) is delivered, status
    other_stack = sample["detail"]["stateMachineArn"].replace(f":stateMachine:{STACK}-", ":stateMachine:other-")
    assert not rule.matches_event(sample | {"detail": sample["detail"] | {"stateMachineArn": other_stack}})


@pytest.mark.parametrize("sample", samples_of("sweep_permits"), ids=lambda sample: sample.name)
def test_the_schedule_sample_runs_the_sweeper(sample: Path, aws: Aws) -> None:
    assert invoke("sweep_permits", load(sample)) == {"released": 0, "heartbeats": 0, "closed": 0}
