"""The extract workflow on the offline cloud: batches of documents through Bedrock Data Automation, whose simulated
runtime refuses any job beyond its concurrent-job quota (DataAutomationMaxConcurrentJobs = 5 in the session)."""

from __future__ import annotations

import json
import random
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from localcloud.client import SignedClient
from localcloud.cloud import LocalCloud
from localcloud.simulators.bda import BdaSimulator
from tests.workflows.conftest import REGION

QUOTA = 5  # the session's DataAutomationMaxConcurrentJobs
WAIT_S = 240.0  # real seconds a batch may take on a busy 2-core machine


@pytest.fixture
def bda(cloud: LocalCloud) -> Iterator[BdaSimulator]:
    """BDA with the quota the stack was given; each job takes 1-3 simulated minutes (1-3 s at the session's
    speed-up), chosen per document and fixed by a seed."""
    durations: dict[str, float] = {}
    rng = random.Random(13)

    def duration(uri: str) -> float:
        return durations.setdefault(uri, rng.uniform(60, 180))

    simulator = BdaSimulator(REGION, clock=cloud.clock, max_concurrent_jobs=QUOTA, durations=duration)
    cloud.add_simulator(simulator)
    yield simulator
    simulator.stop()


def put_documents(cloud: LocalCloud, prefix: str, names: list[str]) -> list[str]:
    s3, bucket = cloud.client("s3"), cloud.stack.outputs["DocumentBucketName"]
    for name in names:
        s3.put_object(Bucket=bucket, Key=f"{prefix}{name}", Body=f"Invoice {name}: 3 widgets".encode())
    return [f"{prefix}{name}" for name in names]


def start(cloud: LocalCloud, request: dict[str, Any]) -> str:
    return str(
        cloud.client("stepfunctions").start_execution(
            stateMachineArn=cloud.stack.outputs["ExtractWorkflowArn"],
            name=f"extract-{uuid.uuid4().hex[:12]}",
            input=json.dumps(request),
        )["executionArn"]
    )


def finished(cloud: LocalCloud, arns: list[str]) -> list[dict[str, Any]]:
    """Wait until every execution has ended; their descriptions."""
    sfn, deadline = cloud.client("stepfunctions"), time.monotonic() + WAIT_S
    ended: dict[str, dict[str, Any]] = {}
    while len(ended) < len(arns):
        assert time.monotonic() < deadline, f"{len(arns) - len(ended)} batches still running after {WAIT_S} s"
        for arn in set(arns) - set(ended):
            described = sfn.describe_execution(executionArn=arn)
            if described["status"] != "RUNNING":
                ended[arn] = described
        time.sleep(0.2)
    return [ended[arn] for arn in arns]


def listed_times(cloud: LocalCloud, execution_arn: str) -> list[str]:
    """The LastModified of each object the execution's ListDocuments state listed, as its history records them."""
    events = cloud.client("stepfunctions").get_execution_history(executionArn=execution_arn)["events"]
    [listing] = [
        json.loads(event["taskSucceededEventDetails"]["output"])
        for event in events
        if event["type"] == "TaskSucceeded" and event["taskSucceededEventDetails"]["resource"] == "listObjectsV2"
    ]
    return [str(listed["LastModified"]) for listed in listing["Contents"]]


def by_status(documents: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for document in documents:
        grouped.setdefault(document["status"], []).append(document)
    return grouped


def held(cloud: LocalCloud, resource: str) -> int:
    item = cloud.client("dynamodb").get_item(
        TableName=cloud.stack.outputs["PermitTableName"],
        Key={"resource": {"S": resource}, "entry": {"S": "#"}},
        ConsistentRead=True,
    )
    return int(item.get("Item", {}).get("held", {}).get("N", "0"))


def test_two_batches_share_the_quota_and_list_successes_and_failures(cloud: LocalCloud, bda: BdaSimulator) -> None:
    # Given 20 documents in two batches started at once: one by prefix (with one document BDA cannot read), one by list
    run = uuid.uuid4().hex[:8]
    by_prefix = put_documents(cloud, f"extract-test/{run}/a/", [f"doc-{n}.pdf" for n in range(9)] + ["fail-x.pdf"])
    listed = put_documents(cloud, f"extract-test/{run}/b/", [f"doc-{n}.pdf" for n in range(10)])

    # When both batches run
    arns = [start(cloud, {"prefix": f"extract-test/{run}/a/"}), start(cloud, {"documents": listed})]
    batches = finished(cloud, arns)

    # Then BDA ran 5 jobs at once at its peak, never more, and refused none: the semaphore kept the batches under it
    assert (bda.peak_jobs, bda.rejected) == (QUOTA, 0)
    assert len(bda.jobs) == 20

    # And each batch succeeded, listing every document: successes with where BDA wrote them, the failure with its error
    assert [b["status"] for b in batches] == ["SUCCEEDED", "SUCCEEDED"]
    first, second = (by_status(json.loads(b["output"])["documents"]) for b in batches)
    assert sorted(d["document"] for d in first["SUCCEEDED"]) == sorted(by_prefix[:9])
    [failed] = first["FAILED"]
    assert failed["document"] == by_prefix[9] and failed["error"] == "BedrockDataAutomation.ClientError"
    assert sorted(d["document"] for d in second["SUCCEEDED"]) == sorted(listed) and "FAILED" not in second
    s3, bucket = cloud.client("s3"), cloud.stack.outputs["DocumentBucketName"]
    for document in first["SUCCEEDED"] + second["SUCCEEDED"]:
        assert document["output"].startswith(f"s3://{bucket}/extract/") and document["output"].endswith(
            f"/{document['jobId']}/job_metadata.json"
        )
        key = document["output"].removeprefix(f"s3://{bucket}/")
        assert json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())["job_id"] == document["jobId"]

    # And the batch by prefix listed its documents with their times as AWS writes an aws-sdk result's: ISO 8601
    # strings, which any later state may output (a datetime object there failed DescribeExecution, gap 33)
    times = listed_times(cloud, arns[0])
    assert len(times) == len(by_prefix), times
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z", at) for at in times), times

    # And every permit was given back
    assert held(cloud, f"bda:{REGION}") == 0

    # (the throughput, for docs/extract.md: elapsed simulated time over the quota-bound ideal)
    jobs = list(bda.jobs.values())
    elapsed = max(j.end for j in jobs if j.end) - min(j.submitted for j in jobs)
    ideal = sum(j.duration for j in jobs) / QUOTA
    print(f"extract: 20 documents, quota {QUOTA}: efficiency {ideal / elapsed.total_seconds():.2f}")


def test_a_batch_of_none_or_too_many_documents_fails_with_a_named_error_and_starts_nothing(
    cloud: LocalCloud, bda: BdaSimulator
) -> None:
    # Given a prefix with 501 documents, one over a batch's 500 (its result must fit in a 256 KB payload)
    crowded = f"extract-test/{uuid.uuid4().hex}/"
    keys = put_documents(cloud, crowded, [f"{n:03d}.pdf" for n in range(501)])

    # When batches name an empty prefix, an empty list, that prefix, and its 501 keys
    empty_prefix, empty_list, too_many, too_long = finished(
        cloud,
        [
            start(cloud, {"prefix": f"extract-test/{uuid.uuid4().hex}/"}),
            start(cloud, {"documents": []}),
            start(cloud, {"prefix": crowded}),
            start(cloud, {"documents": keys}),
        ],
    )

    # Then each fails with a named error saying why, and no job was started
    assert [(b["status"], b["error"]) for b in (empty_prefix, empty_list)] == [("FAILED", "Extract.NoDocuments")] * 2
    assert [(b["status"], b["error"]) for b in (too_many, too_long)] == [("FAILED", "Extract.TooManyDocuments")] * 2
    assert bda.jobs == {}


def test_an_extract_task_through_the_api_counts_its_documents_done(cloud: LocalCloud, bda: BdaSimulator) -> None:
    assert cloud.http is not None
    api = SignedClient(cloud.http.url, cloud.config.credentials[0], cloud.config.region)
    # Given 6 documents under a prefix, one of which BDA cannot read
    prefix = f"extract-test/{uuid.uuid4().hex[:8]}/"
    documents = put_documents(cloud, prefix, [f"doc-{n}.pdf" for n in range(5)] + ["fail-y.pdf"])

    # When a client submits an extract task for the prefix and follows it until it ends
    submitted = api.request("POST", "/task", {"type": "extract", "input": {"prefix": prefix}})
    assert submitted.status_code == 202, submitted.text
    deadline, seen = time.monotonic() + WAIT_S, []
    while (task := api.request("GET", submitted.headers["Location"]).json())["status"] not in {"SUCCEEDED", "FAILED"}:
        assert time.monotonic() < deadline, task
        seen.append(task["status"])
        time.sleep(0.1)

    # Then the task succeeded and its result lists every document, the failed one with its error
    assert task["status"] == "SUCCEEDED", task
    result = by_status(api.request("GET", task["resultUrl"]).json()["documents"])
    assert sorted(d["document"] for d in result["SUCCEEDED"]) == documents[:5]
    assert [d["document"] for d in result["FAILED"]] == documents[5:]

    # And its log counted the documents done, 0 to 6 of 6, each count once, naming each document once
    history = api.request("GET", f"{submitted.headers['Location']}/history").json()["entries"]
    progress = [e["detail"] for e in history if e["status"] == "EXTRACTING"]
    assert progress[0] == {"done": 0, "total": 6}
    assert sorted(p["done"] for p in progress[1:]) == [1, 2, 3, 4, 5, 6]
    assert {p["total"] for p in progress} == {6}
    assert sorted(p["document"] for p in progress[1:]) == documents
    assert {p["document"]: p["documentStatus"] for p in progress[1:]}[documents[5]] == "FAILED"
    assert "EXTRACTING" in seen  # a client following the task saw the progress


def test_bad_extract_input_is_refused_at_the_api(cloud: LocalCloud, bda: BdaSimulator) -> None:
    assert cloud.http is not None
    api = SignedClient(cloud.http.url, cloud.config.credentials[0], cloud.config.region)

    for bad in ({"prefix": "a/", "documents": ["a/b.pdf"]}, {}, {"documents": ["/absolute.pdf"]}):
        answer = api.request("POST", "/task", {"type": "extract", "input": bad})
        assert answer.status_code == 422, answer.text
    assert bda.jobs == {}
