"""The simulated Amazon Macie classification jobs (localcloud.simulators.macie), seen by boto3 clients on plain moto."""

from __future__ import annotations

import base64
import gzip
import io
import json
import re
import zipfile
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from moto.awslambda.models import LambdaBackend

from localcloud.clock import Clock
from localcloud.fixes import logs as cloud_logs
from localcloud.simulators import register, settle_all
from localcloud.simulators.macie import LOG_GROUP, MacieSimulator
from tests.localcloud.simulated import ACCOUNT, REGION, client, collect, offline_account, wait_for
from tests.localcloud.simulated import event_queue as queue_for

BUCKET = "docs"
DELAY, SPEEDUP = 2.0, 20.0  # a job ends after 0.1 s of real time
CREATION_EVENTS = ["JOB_CREATED", "ONE_TIME_JOB_STARTED"]
PERSONAL = "Contact: jane.doe@example.com\nSSN: 123-45-6789\n"
FINANCIAL = "Paid with card 4111 1111 1111 1111 on Monday.\n"
CLEAN = "The quarterly report is attached. Nothing personal here.\n"


@pytest.fixture
def aws() -> Iterator[None]:
    with offline_account(BUCKET):
        yield


@pytest.fixture
def simulate(aws: None) -> Callable[..., Any]:
    """Register a MacieSimulator with the given knobs and return a `macie2` client answered by it, with Macie
    enabled (the simulator's account is a new one, where it is off)."""

    def make(**knobs: Any) -> Any:
        register(MacieSimulator(REGION, **{"delay_seconds": DELAY, "clock": Clock(SPEEDUP), **knobs}))
        macie = client("macie2")
        macie.enable_macie()
        return macie

    return make


def test_macie_refuses_every_call_until_it_is_enabled(aws: None) -> None:
    # Given Macie in a new account, where it is off
    register(MacieSimulator(REGION, delay_seconds=DELAY, clock=Clock(SPEEDUP)))
    macie = client("macie2")
    put_documents(in__a=PERSONAL)

    # When a job is created, and the session asked for, before Macie is enabled
    with pytest.raises(macie.exceptions.AccessDeniedException, match="Macie is not enabled"):
        create(macie)
    with pytest.raises(macie.exceptions.AccessDeniedException, match="Macie is not enabled"):
        macie.get_macie_session()

    # Then EnableMacie turns it on, once: a second EnableMacie is a conflict, and jobs run
    macie.enable_macie()
    assert macie.get_macie_session()["status"] == "ENABLED"
    with pytest.raises(macie.exceptions.ConflictException):
        macie.enable_macie()
    assert finished(macie, create(macie))["jobStatus"] == "COMPLETE"

    # And DisableMacie turns it off again
    macie.disable_macie()
    with pytest.raises(macie.exceptions.AccessDeniedException):
        create(macie)


def put_documents(**documents: str) -> None:
    """Objects in the bucket; keyword `in__a` becomes key `in/a.txt`."""
    for name, text in documents.items():
        client("s3").put_object(Bucket=BUCKET, Key=f"{name.replace('__', '/')}.txt", Body=text.encode())


def scoped_to(*prefixes: str) -> dict[str, Any]:
    term = {"simpleScopeTerm": {"comparator": "STARTS_WITH", "key": "OBJECT_KEY", "values": list(prefixes)}}
    return {"includes": {"and": [term]}}


def create(macie: Any, prefix: str | None = "in/", bucket: str = BUCKET, **overrides: Any) -> str:
    definition: dict[str, Any] = {"bucketDefinitions": [{"accountId": ACCOUNT, "buckets": [bucket]}]}
    if prefix is not None:
        definition["scoping"] = scoped_to(prefix)
    request: dict[str, Any] = {"jobType": "ONE_TIME", "name": "pii-scan", "s3JobDefinition": definition, **overrides}
    return str(macie.create_classification_job(**request)["jobId"])


def describe(macie: Any, job_id: str) -> dict[str, Any]:
    response = dict(macie.describe_classification_job(jobId=job_id))
    response.pop("ResponseMetadata")
    return response


def finished(macie: Any, job_id: str) -> dict[str, Any]:
    return wait_for(
        lambda: (job := describe(macie, job_id))["jobStatus"] != "RUNNING" and job, what=f"job {job_id} to end"
    )


def job_log(job_id: str) -> list[dict[str, Any]]:
    """The job's log messages, oldest first."""
    events = client("logs").get_log_events(logGroupName=LOG_GROUP, logStreamName=job_id, startFromHead=True)
    return [json.loads(e["message"]) for e in events["events"]]


def event_types(job_id: str) -> list[str]:
    return [m["eventType"] for m in job_log(job_id)]


def logged(job_id: str, count: int) -> list[str]:
    """Wait until the job's log holds `count` events, then until its every step has run, to catch any surplus."""
    wait_for(lambda: len(event_types(job_id)) >= count, what=f"{count} log events for job {job_id}")
    settle_all()
    return event_types(job_id)


def findings_of(macie: Any, job_id: str) -> list[dict[str, Any]]:
    criteria = {"criterion": {"classificationDetails.jobId": {"eq": [job_id]}}}
    ids = [
        i
        for page in macie.get_paginator("list_findings").paginate(findingCriteria=criteria)
        for i in page["findingIds"]
    ]
    return list(macie.get_findings(findingIds=ids)["findings"]) if ids else []


def finding_queue() -> str:
    """An SQS queue that receives Macie's finding events from the default bus."""
    return queue_for({"source": ["aws.macie"], "detail-type": ["Macie Finding"]})


# --- job lifecycle ------------------------------------------------------------------------------------------------


def test_job_runs_then_is_complete_with_the_documented_description(simulate: Any) -> None:
    # Given two documents under in/
    macie = simulate()
    put_documents(in__a=PERSONAL, in__b=CLEAN)

    # When a one-time job is created for that prefix
    response = macie.create_classification_job(
        clientToken="token-1",
        jobType="ONE_TIME",
        name="pii-scan",
        s3JobDefinition={
            "bucketDefinitions": [{"accountId": ACCOUNT, "buckets": [BUCKET]}],
            "scoping": scoped_to("in/"),
        },
    )
    job_id = response["jobId"]

    # Then it answers Macie's id and ARN, is RUNNING with both objects still to process, ...
    assert re.fullmatch(r"[0-9a-f]{32}", job_id)
    assert response["jobArn"] == f"arn:aws:macie2:{REGION}:{ACCOUNT}:classification-job/{job_id}"
    running = describe(macie, job_id)
    assert running["jobStatus"] == "RUNNING"
    assert running["statistics"] == {"approximateNumberOfObjectsToProcess": 2, "numberOfRuns": 1}
    assert isinstance(running["createdAt"], datetime) and running["lastRunTime"] == running["createdAt"]

    # ... and ends COMPLETE (not COMPLETED), without errors, echoing its definition
    job = finished(macie, job_id)
    assert job["jobStatus"] == "COMPLETE"
    assert job["lastRunErrorStatus"] == {"code": "NONE"}
    assert job["statistics"] == {"approximateNumberOfObjectsToProcess": 0, "numberOfRuns": 1}
    assert (job["jobId"], job["jobArn"], job["name"], job["jobType"]) == (
        job_id,
        response["jobArn"],
        "pii-scan",
        "ONE_TIME",
    )
    assert job["clientToken"] == "token-1"
    assert job["s3JobDefinition"]["bucketDefinitions"] == [{"accountId": ACCOUNT, "buckets": [BUCKET]}]
    assert job["s3JobDefinition"]["scoping"] == scoped_to("in/")


def test_create_is_idempotent_on_client_token(simulate: Any) -> None:
    # Given a simulator
    macie = simulate()

    # When the same create is sent twice with one clientToken, and once more with another
    first = create(macie, clientToken="token-1")
    again = create(macie, clientToken="token-1")
    other = create(macie, clientToken="token-2")

    # Then the retry returns the same job, which was created (and logged) once
    assert again == first and other != first
    assert logged(first, 3) == [*CREATION_EVENTS, "JOB_COMPLETED"]
    streams = client("logs").describe_log_streams(logGroupName=LOG_GROUP)["logStreams"]
    assert sorted(s["logStreamName"] for s in streams) == sorted([first, other])


@pytest.mark.parametrize(
    ("overrides", "mentioned"),
    [
        ({"jobType": "SCHEDULED", "scheduleFrequency": {"dailySchedule": {}}}, "SCHEDULED"),
        (
            {
                "s3JobDefinition": {
                    "bucketDefinitions": [{"accountId": ACCOUNT, "buckets": [BUCKET]}],
                    "scoping": {
                        "includes": {
                            "and": [
                                {"simpleScopeTerm": {"comparator": "EQ", "key": "OBJECT_KEY", "values": ["in/a.txt"]}}
                            ]
                        }
                    },
                }
            },
            "comparator EQ isn't valid for OBJECT_KEY",
        ),
        ({"s3JobDefinition": {"bucketDefinitions": [{"accountId": "123", "buckets": [BUCKET]}]}}, "accountId"),
        ({"s3JobDefinition": {"bucketDefinitions": [{"accountId": ACCOUNT, "buckets": []}]}}, "buckets"),
        ({"customDataIdentifierIds": ["cdi-1"]}, "customDataIdentifierIds"),
    ],
)
def test_invalid_request_is_a_validation_exception_and_creates_no_job(
    simulate: Any, overrides: dict[str, Any], mentioned: str
) -> None:
    # Given a simulator
    macie = simulate()

    # When a job is created with a definition Macie refuses (botocore checks none of these)
    with pytest.raises(macie.exceptions.ValidationException) as raised:
        create(macie, **overrides)

    # Then the service answers 400 ValidationException naming the problem, and no job was logged
    error = raised.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert mentioned in error["Error"]["Message"]
    assert client("logs").describe_log_groups(logGroupNamePrefix=LOG_GROUP)["logGroups"] == []


def test_unknown_job_id_is_resource_not_found(simulate: Any) -> None:
    # Given a simulator with no jobs
    macie = simulate()

    # When / Then describing or cancelling an unknown job raises the modelled 404 exception
    with pytest.raises(macie.exceptions.ResourceNotFoundException) as raised:
        macie.describe_classification_job(jobId="0" * 32)
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(macie.exceptions.ResourceNotFoundException):
        macie.update_classification_job(jobId="0" * 32, jobStatus="CANCELLED")


# --- findings -----------------------------------------------------------------------------------------------------


def test_findings_only_for_objects_with_sensitive_data_in_scope_with_macies_shape(simulate: Any) -> None:
    # Given personal and financial data and a clean document under in/, and personal data outside the prefix
    macie = simulate()
    put_documents(in__personal=PERSONAL, in__card=FINANCIAL, in__clean=CLEAN, out__personal=PERSONAL)

    # When a job scoped to in/ completes
    job_id = create(macie, prefix="in/")
    assert finished(macie, job_id)["jobStatus"] == "COMPLETE"

    # Then exactly the two in/ objects with sensitive data have a finding
    findings = {f["resourcesAffected"]["s3Object"]["key"]: f for f in findings_of(macie, job_id)}
    assert sorted(findings) == ["in/card.txt", "in/personal.txt"]

    # And a finding has Macie's shape: type and category, the object and bucket, and what was detected where
    personal = findings["in/personal.txt"]
    assert personal["type"] == "SensitiveData:S3Object/Personal" and personal["category"] == "CLASSIFICATION"
    assert personal["severity"] == {"description": "Medium", "score": 2}  # two occurrences
    assert (personal["accountId"], personal["region"], personal["count"]) == (ACCOUNT, REGION, 1)
    assert personal["archived"] is False and re.fullmatch(r"[0-9a-f]{32}", personal["id"])
    assert isinstance(personal["createdAt"], datetime) and personal["updatedAt"] == personal["createdAt"]
    bucket, obj = personal["resourcesAffected"]["s3Bucket"], personal["resourcesAffected"]["s3Object"]
    assert (bucket["name"], bucket["arn"]) == (BUCKET, f"arn:aws:s3:::{BUCKET}")
    assert (obj["key"], obj["path"], obj["size"]) == ("in/personal.txt", f"{BUCKET}/in/personal.txt", len(PERSONAL))
    assert obj["bucketArn"] == bucket["arn"] and obj["extension"] == "txt"
    details = personal["classificationDetails"]
    assert (details["jobId"], details["originType"]) == (job_id, "SENSITIVE_DATA_DISCOVERY_JOB")
    assert details["jobArn"].endswith(f":classification-job/{job_id}")
    result = details["result"]
    assert result["status"] == {"code": "COMPLETE"} and result["sizeClassified"] == len(PERSONAL)
    [sensitive] = result["sensitiveData"]
    assert (sensitive["category"], sensitive["totalCount"]) == ("PERSONAL_INFORMATION", 2)
    assert [(d["type"], d["count"]) for d in sensitive["detections"]] == [
        ("EMAIL_ADDRESS", 1),
        ("USA_SOCIAL_SECURITY_NUMBER", 1),
    ]
    assert sensitive["detections"][1]["occurrences"]["lineRanges"] == [{"start": 2, "end": 2, "startColumn": 6}]

    # And the card number is financial data
    card = findings["in/card.txt"]
    assert card["type"] == "SensitiveData:S3Object/Financial" and card["severity"]["description"] == "Low"
    sensitive_card = card["classificationDetails"]["result"]["sensitiveData"]
    assert [(s["category"], [d["type"] for d in s["detections"]]) for s in sensitive_card] == [
        ("FINANCIAL_INFORMATION", ["CREDIT_CARD_NUMBER"])
    ]


def test_more_than_one_category_is_a_multiple_finding(simulate: Any) -> None:
    # Given a document with personal and financial data
    macie = simulate()
    put_documents(in__both=PERSONAL + FINANCIAL)

    # When a job analyses it
    job_id = create(macie)
    finished(macie, job_id)

    # Then its one finding is SensitiveData:S3Object/Multiple, with both categories
    [finding] = findings_of(macie, job_id)
    assert finding["type"] == "SensitiveData:S3Object/Multiple"
    categories = [s["category"] for s in finding["classificationDetails"]["result"]["sensitiveData"]]
    assert categories == ["FINANCIAL_INFORMATION", "PERSONAL_INFORMATION"]


def test_documents_without_sensitive_data_give_a_complete_job_without_findings(simulate: Any) -> None:
    # Given only clean documents (and a number that fails the card checksum)
    macie = simulate()
    put_documents(in__a=CLEAN, in__b="Order 1234 5678 9012 3456 shipped.\n")

    # When a job analyses them
    job_id = create(macie)

    # Then it completes without error, logs JOB_COMPLETED, and has no findings at all
    job = finished(macie, job_id)
    assert (job["jobStatus"], job["lastRunErrorStatus"]["code"]) == ("COMPLETE", "NONE")
    assert logged(job_id, 3)[-1] == "JOB_COMPLETED"
    assert findings_of(macie, job_id) == []
    assert macie.list_findings()["findingIds"] == []


def test_each_finding_is_put_on_the_default_bus_as_a_macie_finding_event(simulate: Any) -> None:
    # Given a rule for Macie findings that targets a queue, and two documents with personal data
    macie = simulate()
    queue = finding_queue()
    put_documents(in__a=PERSONAL, in__b=PERSONAL)

    # When a job finds them
    job_id = create(macie)
    finished(macie, job_id)

    # Then one event per finding arrives, whose detail is the finding itself
    events = collect(queue, 2)
    assert len(events) == 2
    assert all(e["source"] == "aws.macie" and e["detail-type"] == "Macie Finding" for e in events)
    by_id = {f["id"]: f for f in findings_of(macie, job_id)}
    assert sorted(e["detail"]["id"] for e in events) == sorted(by_id)
    detail = events[0]["detail"]
    assert detail["classificationDetails"]["jobId"] == job_id
    assert detail["resourcesAffected"]["s3Object"]["key"] == by_id[detail["id"]]["resourcesAffected"]["s3Object"]["key"]


def test_list_findings_filters_by_job_and_paginates(simulate: Any) -> None:
    # Given a job over in/ with three documents with personal data and a job over other/ with one
    macie = simulate()
    put_documents(in__a=PERSONAL, in__b=PERSONAL, in__c=PERSONAL, other__d=PERSONAL)
    first, second = create(macie, prefix="in/"), create(macie, prefix="other/")
    finished(macie, first), finished(macie, second)
    criteria = {"criterion": {"classificationDetails.jobId": {"eq": [first]}}}

    # When the first job's findings are listed two at a time
    page_one = macie.list_findings(findingCriteria=criteria, maxResults=2)
    page_two = macie.list_findings(findingCriteria=criteria, maxResults=2, nextToken=page_one["nextToken"])

    # Then the pages hold its three findings, and only the first page points to another
    assert len(page_one["findingIds"]) == 2 and len(page_two["findingIds"]) == 1 and "nextToken" not in page_two
    ids = page_one["findingIds"] + page_two["findingIds"]
    found = macie.get_findings(findingIds=ids)["findings"]
    assert sorted(f["resourcesAffected"]["s3Object"]["key"] for f in found) == ["in/a.txt", "in/b.txt", "in/c.txt"]
    assert {f["classificationDetails"]["jobId"] for f in found} == {first}

    # And without criteria every finding of both jobs is listed; a key criterion narrows them down
    assert len(macie.list_findings()["findingIds"]) == 4
    by_key = {"criterion": {"resourcesAffected.s3Object.key": {"eq": ["other/d.txt"]}}}
    [other] = macie.list_findings(findingCriteria=by_key)["findingIds"]
    assert macie.get_findings(findingIds=[other])["findings"][0]["classificationDetails"]["jobId"] == second


# --- the job log --------------------------------------------------------------------------------------------------


def test_completed_job_logs_its_events_in_macies_schema(simulate: Any) -> None:
    # Given a document to analyse
    macie = simulate()
    put_documents(in__a=PERSONAL)

    # When a job runs to completion
    job_id = create(macie, name="nightly-scan")

    # Then its stream in Macie's log group holds JOB_CREATED, ONE_TIME_JOB_STARTED, then JOB_COMPLETED
    assert logged(job_id, 3) == [*CREATION_EVENTS, "JOB_COMPLETED"]
    created, started, completed = job_log(job_id)
    assert created == {
        "adminAccountId": ACCOUNT,
        "jobId": job_id,
        "eventType": "JOB_CREATED",
        "occurredAt": created["occurredAt"],
        "description": "The job was created.",
        "jobName": "nightly-scan",
        "operation": "CreateClassificationJob",
        "runDate": created["runDate"],
    }
    assert set(completed) == {"adminAccountId", "jobId", "eventType", "occurredAt", "description", "jobName", "runDate"}
    times = [datetime.fromisoformat(m["occurredAt"]) for m in (created, started, completed)]
    assert times == sorted(times) and created["occurredAt"].endswith("Z")
    assert datetime.fromisoformat(completed["runDate"]) <= times[0]


def test_error_outcome_logs_the_error_then_completes_with_error_status(simulate: Any) -> None:
    # Given a simulator whose jobs cannot read their bucket, and a document with personal data
    macie = simulate(outcome="BUCKET_ACCESS_DENIED")
    put_documents(in__a=PERSONAL)

    # When a job runs
    job_id = create(macie)

    # Then it logs the bucket error (naming the bucket and its account), then JOB_COMPLETED, as Macie does
    assert logged(job_id, 4) == [*CREATION_EVENTS, "BUCKET_ACCESS_DENIED", "JOB_COMPLETED"]
    error = job_log(job_id)[2]
    assert error["affectedAccount"] == ACCOUNT
    assert error["affectedResource"] == {"type": "S3_BUCKET_NAME", "value": BUCKET}
    # And it is COMPLETE with an ERROR status, having analysed (and found) nothing
    job = describe(macie, job_id)
    assert (job["jobStatus"], job["lastRunErrorStatus"]) == ("COMPLETE", {"code": "ERROR"})
    assert findings_of(macie, job_id) == []


def test_missing_bucket_logs_bucket_does_not_exist(simulate: Any) -> None:
    # Given a simulator with the default outcome
    macie = simulate()

    # When a job names a bucket that does not exist
    job_id = create(macie, bucket="no-such-bucket")

    # Then it logs BUCKET_DOES_NOT_EXIST for that bucket and completes with an error
    assert logged(job_id, 4) == [*CREATION_EVENTS, "BUCKET_DOES_NOT_EXIST", "JOB_COMPLETED"]
    assert job_log(job_id)[2]["affectedResource"] == {"type": "S3_BUCKET_NAME", "value": "no-such-bucket"}
    assert describe(macie, job_id)["lastRunErrorStatus"] == {"code": "ERROR"}


def test_cancelled_outcome_ends_the_job_cancelled_without_findings(simulate: Any) -> None:
    # Given a simulator whose jobs get cancelled, and a document with personal data
    macie = simulate(outcome="JOB_CANCELLED")
    put_documents(in__a=PERSONAL)

    # When a job runs
    job_id = create(macie)

    # Then it ends CANCELLED, logs JOB_CANCELLED (never JOB_COMPLETED) and reports nothing
    assert finished(macie, job_id)["jobStatus"] == "CANCELLED"
    assert logged(job_id, 3) == [*CREATION_EVENTS, "JOB_CANCELLED"]
    assert findings_of(macie, job_id) == []


def test_update_cancels_a_running_job(simulate: Any) -> None:
    # Given a running job over a document with personal data
    macie = simulate()
    put_documents(in__a=PERSONAL)
    job_id = create(macie)

    # When it is cancelled through UpdateClassificationJob
    macie.update_classification_job(jobId=job_id, jobStatus="CANCELLED")

    # Then it is CANCELLED at once and stays so past its end: JOB_CANCELLED logged, no findings, no completion
    assert describe(macie, job_id)["jobStatus"] == "CANCELLED"
    settle_all()  # the job's end has come and gone
    assert describe(macie, job_id)["jobStatus"] == "CANCELLED"
    assert event_types(job_id) == [*CREATION_EVENTS, "JOB_CANCELLED"]
    assert job_log(job_id)[-1]["operation"] == "UpdateClassificationJob"
    assert findings_of(macie, job_id) == []
    # And a cancelled job cannot be cancelled again
    with pytest.raises(macie.exceptions.ValidationException):
        macie.update_classification_job(jobId=job_id, jobStatus="CANCELLED")


def test_log_copies_repeats_the_terminal_log_lines(simulate: Any) -> None:
    # Given a simulator that delivers the terminal log lines three times, with a bucket error
    macie = simulate(outcome="BUCKET_ACCESS_DENIED", log_copies=3)

    # When a job runs
    job_id = create(macie)

    # Then the creation events appear once, then the error and JOB_COMPLETED three times each, as identical copies
    assert logged(job_id, 8)[:2] == CREATION_EVENTS
    terminal = job_log(job_id)[2:]
    assert sorted(m["eventType"] for m in terminal) == ["BUCKET_ACCESS_DENIED"] * 3 + ["JOB_COMPLETED"] * 3
    assert len({json.dumps(m, sort_keys=True) for m in terminal}) == 2


def test_drop_logs_completes_the_job_without_a_terminal_log_line(simulate: Any) -> None:
    # Given a simulator that loses the terminal log lines, and a document with personal data
    macie = simulate(drop_logs=True)
    put_documents(in__a=PERSONAL)

    # When a job runs
    job_id = create(macie)

    # Then DescribeClassificationJob says COMPLETE and the finding exists, but the log never says so
    assert finished(macie, job_id)["jobStatus"] == "COMPLETE"
    assert len(findings_of(macie, job_id)) == 1
    settle_all()  # the job's last step has run: whatever it would log is in the log by now
    assert event_types(job_id) == CREATION_EVENTS


def test_a_subscribed_lambda_receives_the_filtered_terminal_events(simulate: Any, monkeypatch: Any) -> None:
    # Given a Lambda subscribed to Macie's log group with the JSON filter a workflow would use, delivering through
    # the offline cloud's subscription path (localcloud.fixes.logs), captured here instead of invoked
    delivered: list[tuple[str, dict[str, Any]]] = []
    delivery = cloud_logs.subscription_delivery(lambda arn, payload: delivered.append((arn, payload)))
    monkeypatch.setattr(LambdaBackend, "send_log_event", delivery)  # restored afterwards
    function_arn = _function("forward-macie-logs")
    client("logs").create_log_group(logGroupName=LOG_GROUP)  # deploying the subscription needs the group
    client("logs").put_subscription_filter(
        logGroupName=LOG_GROUP,
        filterName="macie-job-events",
        filterPattern='{ $.eventType = "JOB_COMPLETED" || $.eventType = "BUCKET_ACCESS_DENIED" }',
        destinationArn=function_arn,
    )
    macie = simulate(outcome="BUCKET_ACCESS_DENIED")

    # When a job runs
    job_id = create(macie)

    # Then the function gets one awslogs batch from the job's stream with the error and JOB_COMPLETED only
    wait_for(lambda: delivered, what="the subscription delivery")
    settle_all()  # the job's every step has run: any other delivery has been made
    [(arn, payload)] = delivered
    data = json.loads(gzip.decompress(base64.b64decode(payload["awslogs"]["data"])))
    assert arn == function_arn and (data["logGroup"], data["logStream"]) == (LOG_GROUP, job_id)
    assert [json.loads(e["message"])["eventType"] for e in data["logEvents"]] == [
        "BUCKET_ACCESS_DENIED",
        "JOB_COMPLETED",
    ]


def _function(name: str) -> str:
    """A Lambda function in moto (its code never runs here)."""
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    role = client("iam").create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("app.py", "def handler(event, context):\n    return event\n")
    created = client("lambda").create_function(
        FunctionName=name, Runtime="python3.13", Role=role, Handler="app.handler", Code={"ZipFile": code.getvalue()}
    )
    return str(created["FunctionArn"])
