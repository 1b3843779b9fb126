"""The state machines' own Retry rules on throttled aws-sdk calls, on the offline cloud: a call the service refuses
for its request rate fails its Task with the error AWS names (`Translate.TooManyRequestsException`,
`Macie2.ThrottlingException`, `S3.S3Exception` for S3's SlowDown), the Retry on that name calls again, and the
workflow succeeds (docs/offline-cloud.md, gap 1).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

from botocore.awsrequest import AWSPreparedRequest, AWSResponse

from localcloud.client import wait_for_execution
from localcloud.cloud import LocalCloud
from localcloud.fixes.sfn import shared_boto_client_for
from localcloud.simulators import active
from localcloud.simulators.bda import BdaSimulator
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator
from tests.workflows.test_documents import CLEAN, Run, history, simulate


def attempts(cloud: LocalCloud, execution_arn: str, resource: str) -> list[str]:
    """What became of each call of an aws-sdk resource (`translate:startTextTranslationJob`), in order: `Scheduled`,
    then `Succeeded` or the error it failed with."""
    service, _, action = resource.partition(":")
    seen = []
    for event in history(cloud, execution_arn):
        if event["type"] not in ("TaskScheduled", "TaskFailed", "TaskSucceeded"):
            continue
        details = event[f"task{event['type'].removeprefix('Task')}EventDetails"]
        if (details["resourceType"], details["resource"]) == (f"aws-sdk:{service}", action):
            seen.append(details["error"] if event["type"] == "TaskFailed" else event["type"].removeprefix("Task"))
    return seen


def test_a_throttled_translate_start_and_macie_calls_are_retried_and_the_documents_workflow_succeeds(
    cloud: LocalCloud,
) -> None:
    # Given Translate and Macie that each refuse the workflow's first call of an operation for its request rate
    simulate(cloud)
    translate, macie = active("translate"), active("macie2")
    assert isinstance(translate, TranslateSimulator) and isinstance(macie, MacieSimulator)
    translate.throttle("StartTextTranslationJob")
    macie.throttle("GetMacieSession")
    macie.throttle("CreateClassificationJob")
    run = Run(cloud, {"clean.txt": CLEAN})

    # When the documents workflow runs
    execution = run.start()
    described = wait_for_execution(cloud, execution, timeout=60, show=False)

    # Then it succeeds
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"])["tagged"] == {"documents": 1, "translations": 1, "withPii": 0}
    # And each refused call failed its Task with AWS's name for the error, which the state's Retry named: it was
    # called again and succeeded
    throttled = ["Scheduled", "Translate.TooManyRequestsException", "Scheduled", "Succeeded"]
    assert attempts(cloud, execution, "translate:startTextTranslationJob") == throttled
    throttled = ["Scheduled", "Macie2.ThrottlingException", "Scheduled", "Succeeded"]
    assert attempts(cloud, execution, "macie2:getMacieSession") == throttled
    assert attempts(cloud, execution, "macie2:createClassificationJob") == throttled
    # And the refused starts started nothing: one job each
    assert (len(translate.jobs), len(macie.jobs)) == (1, 1)


class _Body:
    """The raw body an AWSResponse reads."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


@contextlib.contextmanager
def s3_slows_down(cloud: LocalCloud, operation: str) -> Iterator[None]:
    """The Step Functions interpreter's next S3 call of `operation` answered as S3 answers a caller over its request
    rate: HTTP 503 SlowDown, an error S3's model does not name (the interpreter's client does not retry, as Step
    Functions' does not)."""
    client = shared_boto_client_for(cloud.config.region, "s3")
    event = f"before-send.s3.{operation}"
    refused: list[str] = []

    def slow_down(request: AWSPreparedRequest, **_: Any) -> AWSResponse | None:
        if refused:
            return None
        refused.append(request.url)
        request_id = uuid.uuid4().hex[:16].upper()
        body = (
            "<?xml version='1.0' encoding='UTF-8'?>\n<Error><Code>SlowDown</Code>"
            f"<Message>Please reduce your request rate.</Message><RequestId>{request_id}</RequestId></Error>"
        )
        headers = {"Content-Type": "application/xml", "x-amz-request-id": request_id, "x-amz-id-2": request_id}
        return AWSResponse(request.url, 503, headers, _Body(body.encode()))

    client.meta.events.register_first(event, slow_down)
    try:
        yield
    finally:
        client.meta.events.unregister(event, slow_down)
    assert refused, f"the interpreter made no S3 {operation} call"


def test_a_throttled_s3_listing_is_retried_and_the_extract_workflow_succeeds(cloud: LocalCloud) -> None:
    # Given two documents under a prefix, Bedrock Data Automation, and S3 that answers the interpreter's next listing
    # with SlowDown
    bda = BdaSimulator(cloud.config.region, clock=cloud.clock, delay_seconds=60)
    cloud.add_simulator(bda)
    s3, bucket, prefix = cloud.client("s3"), cloud.stack.outputs["DocumentBucketName"], f"retry-test/{uuid.uuid4()}/"
    for name in ("a.pdf", "b.pdf"):
        s3.put_object(Bucket=bucket, Key=f"{prefix}{name}", Body=f"Invoice {name}".encode())

    # When the extract workflow lists the prefix
    with s3_slows_down(cloud, "ListObjectsV2"):
        execution = cloud.client("stepfunctions").start_execution(
            stateMachineArn=cloud.stack.outputs["ExtractWorkflowArn"],
            name=f"extract-{uuid.uuid4().hex[:12]}",
            input=json.dumps({"prefix": prefix}),
        )["executionArn"]
        described = wait_for_execution(cloud, execution, timeout=60, show=False)

    # Then it succeeds, every document extracted
    assert described["status"] == "SUCCEEDED", described
    documents = json.loads(described["output"])["documents"]
    assert sorted((d["document"], d["status"]) for d in documents) == [
        (f"{prefix}a.pdf", "SUCCEEDED"),
        (f"{prefix}b.pdf", "SUCCEEDED"),
    ]
    # And the refused listing failed its Task as S3.S3Exception, which ListDocuments' Retry named: listed again
    assert attempts(cloud, execution, "s3:listObjectsV2") == ["Scheduled", "S3.S3Exception", "Scheduled", "Succeeded"]
