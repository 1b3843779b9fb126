"""`make redrive` on the offline cloud: a job's completion that failed into the resume dead-letter queue is replayed
to the resume function, and the job's workflow goes on."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from localcloud.client import wait_for_execution
from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.runtime.lambdas import FunctionError
from tests.localcloud.simulated import wait_for
from tests.workflows.conftest import REGION, ROOT, SPEEDUP
from tests.workflows.test_documents import CLEAN, Run, dead_letters, job_ids, simulate, tokens_left
from tools.redrive import redrive


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    """A stack of its own whose reconciler only runs daily: nothing but a redrive resumes a lost completion."""
    config = CloudConfig(
        template=ROOT / "template.yaml",
        stack_name="redrive",
        region=REGION,
        aws_port=0,
        http_port=0,
        speedup=SPEEDUP,
        parameters={
            "ReconcileSchedule": "rate(1 day)",
            # with no reconciler to heartbeat them, waiting tasks outlive the test (a day is 24 real minutes)
            "HeartbeatSeconds": "86400",
            "LogLevel": "WARN",
        },
        async_retry_delay_seconds=0.1,
        account="established",
    )
    with LocalCloud(config) as running:
        yield running


class Outage:
    """The resume function fails every invocation while `on` (a dependency it needs is down)."""

    def __init__(self, cloud: LocalCloud, monkeypatch: pytest.MonkeyPatch) -> None:
        self.on = True
        runtime, real_invoke = cloud.runtime, cloud.runtime.invoke
        (resume,) = [
            r.physical_id for r in cloud.stack.of_type("AWS::Lambda::Function") if r.logical_id == "ResumeJobFunction"
        ]

        def invoke(name_or_arn: str, event: Any, wait: bool = False) -> Any:
            if self.on and runtime.function(name_or_arn).function_name == resume:
                raise FunctionError({"errorType": "ServiceUnavailable", "errorMessage": "outage", "stackTrace": []})
            return real_invoke(name_or_arn, event, wait)

        monkeypatch.setattr(runtime, "invoke", invoke)


def queued(cloud: LocalCloud, output: str) -> int:
    attributes = cloud.client("sqs").get_queue_attributes(
        QueueUrl=cloud.stack.outputs[output], AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def test_a_completion_dead_lettered_by_the_resume_function_is_replayed_and_the_workflow_resumes(
    cloud: LocalCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the resume function down while a documents workflow's Translate and Macie jobs finish
    simulate(cloud)
    outage = Outage(cloud, monkeypatch)
    run = Run(cloud, {"clean.txt": CLEAN})
    execution = run.start()

    # Then both completions fail every retry into the resume dead-letter queue, and the workflow keeps waiting
    # (the default bus is the account's: completions of other tests' jobs may dead-letter here too, so count ours)
    def both_started() -> list[str] | None:
        return jobs if len(jobs := job_ids(cloud, execution)) == 2 else None

    jobs = wait_for(both_started, timeout=30, what="the Translate and Macie jobs to start")
    wait_for(lambda: len(dead_letters(cloud, *jobs)) == 2, timeout=30, what="both jobs' completions dead-lettered")
    assert cloud.client("stepfunctions").describe_execution(executionArn=execution)["status"] == "RUNNING"

    # When the redrive runs while the function still fails
    counts = redrive(cloud.client, "redrive")["ResumeDeadLetterQueueUrl"]
    # Then nothing is deleted: every record is back in the queue for the next run
    assert (counts.replayed, counts.left) == (0, []) and counts.failed >= 2
    assert len(dead_letters(cloud, *jobs)) == 2

    # When the function is back and the redrive runs again
    outage.on = False
    counts = redrive(cloud.client, "redrive")["ResumeDeadLetterQueueUrl"]
    # Then our completions are replayed with their original events and deleted (another test's completion, if one
    # dead-lettered here, may fail again: its job is not this stack's)
    assert counts.replayed >= 2 and counts.left == []
    assert dead_letters(cloud, *jobs) == []
    # And the workflow resumes from both waits and finishes, its tokens used up
    described = wait_for_execution(cloud, execution, timeout=40, show=False)
    assert described["status"] == "SUCCEEDED", (described.get("error"), described.get("cause"))
    output = json.loads(described["output"])
    assert not tokens_left(cloud, f"translate#{output['translation']['jobId']}")
    assert not tokens_left(cloud, f"macie#{output['classification']['jobId']}")


def test_a_request_the_admission_queue_gave_up_on_goes_back_to_it_and_is_admitted(cloud: LocalCloud) -> None:
    # Given a request in the admission dead-letter queue, as SQS leaves it after maxReceiveCount receives
    sqs, sfn = cloud.client("sqs"), cloud.client("stepfunctions")
    request_id = f"req-{uuid.uuid4().hex[:12]}"
    sqs.send_message(
        QueueUrl=cloud.stack.outputs["AdmissionDeadLetterQueueUrl"],
        MessageBody=json.dumps({"requestId": request_id, "input": {"seconds": 1}}),
        MessageGroupId="tenant-1",
        MessageDeduplicationId=request_id,
    )
    # When the redrive runs
    counts = redrive(cloud.client, "redrive")["AdmissionDeadLetterQueueUrl"]
    # Then it goes back to the admission queue (its source) and is deleted from the dead-letter queue
    assert (counts.replayed, counts.failed, counts.left) == (1, 0, [])
    assert queued(cloud, "AdmissionDeadLetterQueueUrl") == 0
    # And the scheduled starter admits it: an execution named after the request runs to its end
    machine = cloud.stack.outputs["AdmittedWorkflowArn"]

    def admitted() -> list[dict[str, Any]]:
        listed = sfn.list_executions(stateMachineArn=machine, maxResults=1000)["executions"]
        return [e for e in listed if e["name"] == request_id and e["status"] == "SUCCEEDED"]

    wait_for(admitted, timeout=30, what="the redriven request's execution to succeed")
