"""The simulated Amazon Translate batch API (localcloud.simulators.translate), seen by a boto3 client on plain moto."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from localcloud.clock import Clock
from localcloud.simulators import register, settle_all
from localcloud.simulators.translate import TranslateSimulator
from tests.localcloud.simulated import ACCOUNT, REGION, client, collect, offline_account, received, wait_for
from tests.localcloud.simulated import event_queue as queue_for

BUCKET = "docs"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/translate-access"
DELAY, SPEEDUP = 2.0, 20.0  # IN_PROGRESS after 0.05 s, terminal after 0.1 s of real time
DETAIL_TYPE = "Translate TextTranslationJob State Change"


@pytest.fixture
def aws() -> Iterator[None]:
    with offline_account(BUCKET):
        yield


@pytest.fixture
def simulate(aws: None) -> Callable[..., Any]:
    """Register a TranslateSimulator with the given knobs and return a `translate` client answered by it."""

    def make(**knobs: Any) -> Any:
        register(TranslateSimulator(REGION, **{"delay_seconds": DELAY, "clock": Clock(SPEEDUP), **knobs}))
        return client("translate")

    return make


def put_inputs(prefix: str = "in/", **documents: str) -> None:
    s3 = client("s3")
    for name, text in documents.items():
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}{name}.txt", Body=text.encode())


def start(translate: Any, name: str = "job-1", input_prefix: str = "in/", **overrides: Any) -> str:
    request: dict[str, Any] = {
        "JobName": name,
        "InputDataConfig": {"S3Uri": f"s3://{BUCKET}/{input_prefix}", "ContentType": "text/plain"},
        "OutputDataConfig": {"S3Uri": f"s3://{BUCKET}/out/"},
        "DataAccessRoleArn": ROLE,
        "SourceLanguageCode": "en",
        "TargetLanguageCodes": ["es", "fr"],
        **overrides,
    }
    return str(translate.start_text_translation_job(**request)["JobId"])


def describe(translate: Any, job_id: str) -> dict[str, Any]:
    return dict(translate.describe_text_translation_job(JobId=job_id)["TextTranslationJobProperties"])


def terminal(translate: Any, job_id: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        props = describe(translate, job_id)
        return props if props["JobStatus"] in {"COMPLETED", "COMPLETED_WITH_ERROR", "FAILED", "STOPPED"} else None

    return wait_for(probe, what=f"job {job_id} to end")


def event_queue(detail: dict[str, Any] | None = None) -> str:
    """An SQS queue that receives Translate's job events from the default bus (those with `detail`, if given)."""
    pattern: dict[str, Any] = {"source": ["aws.translate"], "detail-type": [DETAIL_TYPE]}
    if detail:
        pattern["detail"] = detail
    return queue_for(pattern)


def output_keys() -> list[str]:
    contents = client("s3").list_objects_v2(Bucket=BUCKET, Prefix="out/").get("Contents", [])
    return sorted(o["Key"] for o in contents)


def test_job_moves_through_its_statuses_and_writes_translate_style_outputs(simulate: Any) -> None:
    # Given two documents under the input prefix and a simulator slow enough to watch (IN_PROGRESS at 0.2 s)
    translate = simulate(clock=Clock(5.0))
    put_inputs(a="hello", b="world")

    # When a job is started
    response = translate.start_text_translation_job(
        JobName="job-1",
        InputDataConfig={"S3Uri": f"s3://{BUCKET}/in/", "ContentType": "text/plain"},
        OutputDataConfig={"S3Uri": f"s3://{BUCKET}/out/"},
        DataAccessRoleArn=ROLE,
        SourceLanguageCode="en",
        TargetLanguageCodes=["es", "fr"],
    )
    job_id = response["JobId"]

    # Then it is SUBMITTED, goes IN_PROGRESS, and ends COMPLETED with every document translated
    assert response["JobStatus"] == "SUBMITTED" and len(job_id) == 32
    assert describe(translate, job_id)["JobStatus"] == "SUBMITTED"
    wait_for(lambda: describe(translate, job_id)["JobStatus"] == "IN_PROGRESS", what="IN_PROGRESS")
    props = terminal(translate, job_id)
    assert props["JobStatus"] == "COMPLETED"
    assert props["JobName"] == "job-1" and props["SourceLanguageCode"] == "en"
    assert props["TargetLanguageCodes"] == ["es", "fr"] and props["DataAccessRoleArn"] == ROLE
    assert props["InputDataConfig"] == {"S3Uri": f"s3://{BUCKET}/in/", "ContentType": "text/plain"}
    assert props["JobDetails"] == {
        "TranslatedDocumentsCount": 2,
        "DocumentsWithErrorsCount": 0,
        "InputDocumentsCount": 2,
    }
    assert props["EndTime"] > props["SubmittedTime"] and "Message" not in props

    # And the outputs sit where Translate puts them, one per document and target language, plus the details files
    prefix = f"out/{ACCOUNT}-TranslateText-{job_id}/"
    assert output_keys() == [
        prefix + key
        for key in [
            "details/es.auxiliary-translation-details.json",
            "details/fr.auxiliary-translation-details.json",
            "es.a.txt",
            "es.b.txt",
            "fr.a.txt",
            "fr.b.txt",
        ]
    ]
    s3 = client("s3")
    assert s3.get_object(Bucket=BUCKET, Key=prefix + "es.a.txt")["Body"].read() == b"[es] hello"
    details = json.loads(
        s3.get_object(Bucket=BUCKET, Key=prefix + "details/fr.auxiliary-translation-details.json")["Body"].read()
    )
    assert details["targetLanguageCode"] == "fr" and details["outputDataPrefix"] == f"s3://{BUCKET}/{prefix}"
    assert [d["targetFile"] for d in details["details"]] == ["fr.a.txt", "fr.b.txt"]


def test_completion_event_reaches_an_eventbridge_rule_with_the_documented_shape(simulate: Any) -> None:
    # Given a rule for completed Translate jobs that targets a queue
    translate = simulate()
    put_inputs(a="hello")
    queue = event_queue({"jobStatus": ["COMPLETED"]})

    # When a job completes
    job_id = start(translate)

    # Then exactly one event arrives, with Translate's source, detail-type, detail and empty resources
    [event] = collect(queue, 1)
    assert event["source"] == "aws.translate" and event["detail-type"] == DETAIL_TYPE
    assert event["detail"] == {"jobId": job_id, "jobStatus": "COMPLETED"}
    assert event["resources"] == [] and event["region"] == REGION  # (moto leaves out "account")


@pytest.mark.parametrize(("name", "status"), [("fail-x", "FAILED"), ("partial-x", "COMPLETED_WITH_ERROR")])
def test_job_name_prefix_picks_the_outcome(simulate: Any, name: str, status: str) -> None:
    # Given a simulator whose default outcome is COMPLETED, and a queue for all Translate job events
    translate = simulate()
    put_inputs(a="hello", b="world")
    queue = event_queue()

    # When a job named with an outcome prefix runs
    job_id = start(translate, name=name)

    # Then it ends with that outcome and says so in its event
    props = terminal(translate, job_id)
    assert props["JobStatus"] == status
    assert [e["detail"] for e in collect(queue, 1)] == [{"jobId": job_id, "jobStatus": status}]
    if status == "FAILED":
        assert props["Message"] and output_keys() == []
    else:  # the first document failed, the other one was translated into both languages
        assert props["JobDetails"] == {
            "TranslatedDocumentsCount": 1,
            "DocumentsWithErrorsCount": 1,
            "InputDocumentsCount": 2,
        }
        assert [k.rsplit("/", 1)[1] for k in output_keys() if "details/" not in k] == ["es.b.txt", "fr.b.txt"]


def test_outcome_knob_fails_every_job(simulate: Any) -> None:
    # Given a simulator told to fail jobs
    translate = simulate(outcome="FAILED")
    put_inputs(a="hello")

    # When an ordinarily named job runs
    job_id = start(translate)

    # Then it fails with a message and writes nothing
    props = terminal(translate, job_id)
    assert props["JobStatus"] == "FAILED" and props["Message"]
    assert output_keys() == []


def test_input_prefix_without_documents_starts_and_then_fails(simulate: Any) -> None:
    # Given an input prefix with no objects
    translate = simulate()
    queue = event_queue()

    # When a job is started on it
    job_id = start(translate, input_prefix="empty/")

    # Then the start is accepted, but the job ends FAILED (with its event), as on AWS
    props = terminal(translate, job_id)
    assert props["JobStatus"] == "FAILED" and "No documents" in props["Message"]
    assert [e["detail"]["jobStatus"] for e in collect(queue, 1)] == ["FAILED"]


def test_event_copies_delivers_the_completion_event_more_than_once(simulate: Any) -> None:
    # Given a simulator that delivers each event three times
    translate = simulate(event_copies=3)
    put_inputs(a="hello")
    queue = event_queue({"jobStatus": ["COMPLETED"]})

    # When a job completes
    job_id = start(translate)

    # Then three identical details arrive
    assert [e["detail"] for e in collect(queue, 3)] == [{"jobId": job_id, "jobStatus": "COMPLETED"}] * 3


def test_drop_events_completes_the_job_silently(simulate: Any) -> None:
    # Given a simulator that loses events
    translate = simulate(drop_events=True)
    put_inputs(a="hello")
    queue = event_queue()

    # When a job completes
    job_id = start(translate)

    # Then DescribeTextTranslationJob says COMPLETED but no event ever arrives
    assert terminal(translate, job_id)["JobStatus"] == "COMPLETED"
    settle_all()  # the job's last step has run: whatever it would emit is on the queue by now
    assert received(queue) == []


def test_stop_requests_then_stops_the_job(simulate: Any) -> None:
    # Given a running job
    translate = simulate()
    put_inputs(a="hello")
    queue = event_queue()
    job_id = start(translate)

    # When it is stopped
    response = translate.stop_text_translation_job(JobId=job_id)

    # Then it is STOP_REQUESTED at once, STOPPED a little later, announces STOPPED and writes nothing
    assert response == {
        "JobId": job_id,
        "JobStatus": "STOP_REQUESTED",
        "ResponseMetadata": response["ResponseMetadata"],
    }
    assert terminal(translate, job_id)["JobStatus"] == "STOPPED"
    assert [e["detail"]["jobStatus"] for e in collect(queue, 1)] == ["STOPPED"]
    assert output_keys() == []


def test_unknown_job_id_is_resource_not_found(simulate: Any) -> None:
    # Given a simulator with no jobs
    translate = simulate()

    # When / Then describing or stopping an unknown job raises the modelled exception
    with pytest.raises(translate.exceptions.ResourceNotFoundException):
        translate.describe_text_translation_job(JobId="0" * 32)
    with pytest.raises(translate.exceptions.ResourceNotFoundException):
        translate.stop_text_translation_job(JobId="0" * 32)


def test_s3_uri_without_scheme_is_an_invalid_request(simulate: Any) -> None:
    # Given a simulator
    translate = simulate()

    # When a job names its input without s3:// (botocore does not check patterns)
    with pytest.raises(translate.exceptions.InvalidRequestException) as raised:
        start(translate, InputDataConfig={"S3Uri": f"{BUCKET}/in/", "ContentType": "text/plain"})

    # Then the service refuses it and no job exists
    assert "inputDataConfig.s3Uri" in raised.value.response["Error"]["Message"]
    assert translate.list_text_translation_jobs()["TextTranslationJobPropertiesList"] == []


def test_start_is_idempotent_on_client_token_and_jobs_can_be_listed(simulate: Any) -> None:
    # Given a simulator and an input document
    translate = simulate()
    put_inputs(a="hello")

    # When the same start is sent twice with one ClientToken, and another job is started with a fresh one
    first = start(translate, ClientToken="token-1")
    again = start(translate, ClientToken="token-1")
    other = start(translate, name="other")

    # Then the retry returns the same job, and the list (filterable by name) shows two jobs
    assert again == first and other != first
    listed = translate.list_text_translation_jobs()["TextTranslationJobPropertiesList"]
    assert sorted(j["JobId"] for j in listed) == sorted([first, other])
    named = translate.list_text_translation_jobs(Filter={"JobName": "other"})["TextTranslationJobPropertiesList"]
    assert [j["JobId"] for j in named] == [other]


def test_a_job_without_an_end_stays_submitted_and_holds_no_thread(simulate: Any) -> None:
    # Given a simulator whose jobs never end by themselves (a load harness puts their completions itself)
    translate = simulate(delay_seconds=math.inf)
    put_inputs(a="hello")
    threads = threading.active_count()
    # When 20 jobs start
    job_ids = [start(translate, name=f"job-{n}") for n in range(20)]
    # Then each one stays SUBMITTED, and none holds a timer thread waiting for an end that never comes
    assert {describe(translate, job_id)["JobStatus"] for job_id in job_ids} == {"SUBMITTED"}
    assert threading.active_count() <= threads


def test_jobs_without_an_end_can_all_be_ended_at_once(aws: None) -> None:
    # Given jobs that never end by themselves, with their events lost (a burst harness ends them)
    register(simulator := TranslateSimulator(REGION, delay_seconds=math.inf, clock=Clock(SPEEDUP), drop_events=True))
    translate = client("translate")
    put_inputs(a="hello")
    queue = event_queue()
    job_ids = [start(translate, name=f"job-{n}", ClientToken=f"token-{n}") for n in range(5)]
    # When the harness ends them together
    simulator.finish(job_ids)
    # Then each has ended as its outcome says, and no event came
    assert {describe(translate, job_id)["JobStatus"] for job_id in job_ids} == {"COMPLETED"}
    settle_all()
    assert received(queue) == []


def test_a_listing_the_role_may_not_make_is_denied(simulate: Any) -> None:
    # Given a Translate whose caller may not list jobs (its role lacks translate:ListTextTranslationJobs)
    translate = simulate(list_denied=True)
    put_inputs(a="hello")
    job_id = start(translate)
    # When it lists them, then describes one
    with pytest.raises(translate.exceptions.ClientError) as denied:
        translate.list_text_translation_jobs()
    # Then the listing is AccessDenied, and the job can still be described
    assert denied.value.response["Error"]["Code"] == "AccessDeniedException"
    assert describe(translate, job_id)["JobId"] == job_id
