"""The Translate workflow end to end: StartTextTranslationJob, wait on a task token, resume on the event."""

import json
import uuid
from typing import Any

from localcloud.cloud import LocalCloud
from localcloud.demo import wait_for_execution
from localcloud.simulators.translate import TranslateSimulator

REQUEST = {"inputPrefix": "in/", "outputPrefix": "out/", "sourceLanguage": "en", "targetLanguages": ["de"]}


def _run(cloud: LocalCloud, simulator: TranslateSimulator, name: str | None = None) -> dict[str, Any]:
    cloud.add_simulator(simulator)
    cloud.client("s3").put_object(Bucket=cloud.stack.outputs["DocumentBucketName"], Key="in/doc.txt", Body=b"hi")
    execution = cloud.client("stepfunctions").start_execution(
        stateMachineArn=cloud.stack.outputs["TranslateWorkflowArn"],
        name=name or str(uuid.uuid4()),
        input=json.dumps(REQUEST),
    )
    return wait_for_execution(cloud, execution["executionArn"], timeout=30, show=False)


def _token_items(cloud: LocalCloud) -> list[dict[str, Any]]:
    return cloud.client("dynamodb").scan(TableName=cloud.stack.outputs["TokenTableName"], ConsistentRead=True)["Items"]


def _translate(cloud: LocalCloud, **knobs: Any) -> TranslateSimulator:
    return TranslateSimulator(cloud.config.region, speedup=cloud.config.speedup, **knobs)


def test_completed_job_resumes_the_workflow_with_the_job_result(cloud: LocalCloud) -> None:
    # Given a Translate job that completes after 2 simulated minutes
    # When the workflow runs
    described = _run(cloud, _translate(cloud, delay_seconds=120))
    # Then it succeeds with the job's result, and no token is left behind
    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    assert output["status"] == "COMPLETED"
    assert output["output"].endswith("/out/")
    assert not [i for i in _token_items(cloud) if i["jobKey"]["S"] == f"translate#{output['jobId']}"]


def test_failed_job_fails_the_workflow_with_the_status_as_error(cloud: LocalCloud) -> None:
    # Given a job that Translate ends FAILED (JobName = execution name starting with "fail-")
    described = _run(cloud, _translate(cloud, delay_seconds=60), name=f"fail-{uuid.uuid4()}")
    # Then the workflow fails with Translate.FAILED
    assert described["status"] == "FAILED"
    assert described["error"] == "Translate.FAILED"


def test_completed_with_error_is_a_failure(cloud: LocalCloud) -> None:
    described = _run(cloud, _translate(cloud, delay_seconds=60, outcome="COMPLETED_WITH_ERROR"))
    assert described["status"] == "FAILED"
    assert described["error"] == "Translate.COMPLETED_WITH_ERROR"


def test_completion_before_registration_still_resumes(cloud: LocalCloud) -> None:
    # Given a job whose completion event is emitted as soon as it starts, before the token is registered
    described = _run(cloud, _translate(cloud, delay_seconds=0))
    # Then the registration finds the recorded completion and resumes the workflow at once
    assert described["status"] == "SUCCEEDED", described


def test_event_delivered_three_times_resumes_once(cloud: LocalCloud) -> None:
    # Given the completion event arrives three times
    described = _run(cloud, _translate(cloud, delay_seconds=60, event_copies=3))
    # Then the workflow succeeds once and its wait task succeeded exactly once
    assert described["status"] == "SUCCEEDED", described
    history = cloud.client("stepfunctions").get_execution_history(executionArn=described["executionArn"])["events"]
    assert sum(1 for e in history if e["type"] == "TaskSucceeded") == 2  # StartTranslation + WaitForTranslation
    cloud.runtime.drain()
    dead = cloud.client("sqs").receive_message(QueueUrl=cloud.stack.outputs["ResumeDeadLetterQueueUrl"])
    assert "Messages" not in dead, "a duplicate event must not end in the dead-letter queue"


def test_lost_event_times_out_into_a_named_failure(cloud: LocalCloud) -> None:
    # Given a job that completes but whose event is lost (and TaskTimeoutSeconds is 8 s here)
    described = _run(cloud, _translate(cloud, delay_seconds=0, drop_events=True))
    # Then the waiting task times out and the workflow fails with a named error instead of hanging
    assert described["status"] == "FAILED"
    assert described["error"] == "Translate.Timeout"
