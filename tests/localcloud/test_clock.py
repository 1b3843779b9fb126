"""The offline cloud's one clock (localcloud/clock.py, gap 19): the Step Functions timers and the simulated jobs wait
on it, so a test moves an hour forward with `ManualClock.advance` instead of waiting for it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from samtranslator.yaml_helper import yaml_parse

from localcloud.__main__ import _on_the_wall_clock
from localcloud.clock import ManualClock
from localcloud.cloud import CloudConfig
from localcloud.fixes import patches
from localcloud.simulators import register, unregister_all
from localcloud.simulators.translate import TranslateSimulator

REGION = "us-east-1"
ROLE_ARN = "arn:aws:iam::123456789012:role/clock"
HOUR = 3600
DEADLINE_S = 10.0  # a safety net for the positive signals below; normally they come within milliseconds


@pytest.fixture
def clock() -> Iterator[ManualClock]:
    """moto with the Step Functions fixes, its timers on a manual clock."""
    manual = ManualClock()
    config: Any = {"stepfunctions": {"execute_state_machine": True}}
    with mock_aws(config=config), patches.Patches([*patches.step_functions(), *patches.step_function_timers(manual)]):
        yield manual


def _execution(definition: dict[str, Any]) -> tuple[Any, str]:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    machine = sfn.create_state_machine(name="clocked", definition=json.dumps(definition), roleArn=ROLE_ARN)
    return sfn, sfn.start_execution(stateMachineArn=machine["stateMachineArn"])["executionArn"]


def _until(check: Any) -> Any:
    """Poll `check` until it returns something truthy (a positive signal), within DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while not (found := check()):
        assert time.monotonic() < deadline, "no signal within the deadline"
        time.sleep(0.01)
    return found


def _entered(sfn: Any, execution_arn: str, event_type: str) -> bool:
    events = sfn.get_execution_history(executionArn=execution_arn)["events"]
    return any(event["type"] == event_type for event in events)


def _ended(sfn: Any, execution_arn: str) -> dict[str, Any] | None:
    described = sfn.describe_execution(executionArn=execution_arn)
    return None if described["status"] == "RUNNING" else dict(described)


def test_a_wait_of_an_hour_ends_when_the_clock_has_moved_an_hour(clock: ManualClock) -> None:
    # Given an execution in a Wait state of one hour
    sfn, execution_arn = _execution(
        {"StartAt": "Pause", "States": {"Pause": {"Type": "Wait", "Seconds": HOUR, "End": True}}}
    )
    _until(lambda: _entered(sfn, execution_arn, "WaitStateEntered"))
    clock.armed()

    # When 59 minutes pass it still waits (it has seen the new time); when the hour is full it goes on
    clock.advance(HOUR - 60)
    _until(lambda: clock.waiting_at(clock.now()))
    assert _ended(sfn, execution_arn) is None
    clock.advance(60)
    assert _until(lambda: _ended(sfn, execution_arn))["status"] == "SUCCEEDED"


def test_a_stopped_execution_leaves_its_wait_at_once_whatever_the_clock_says(clock: ManualClock) -> None:
    # Given an execution in a Wait state of one hour, on a clock that does not move
    pause = {"Type": "Wait", "Seconds": HOUR, "End": True}
    sfn, execution_arn = _execution({"StartAt": "Pause", "States": {"Pause": pause}})
    _until(lambda: _entered(sfn, execution_arn, "WaitStateEntered"))
    clock.armed()

    # When it is stopped (moto sets the wait's event and clears it at once)
    sfn.stop_execution(executionArn=execution_arn)

    # Then it ends ABORTED and its wait is over
    assert _until(lambda: _ended(sfn, execution_arn))["status"] == "ABORTED"
    _until(lambda: clock.waiting_at(clock.now()) == 0)


def test_a_callback_wait_times_out_when_the_clock_passes_its_timeout(clock: ManualClock) -> None:
    # Given a task waiting for its token with TimeoutSeconds of one hour
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url = sqs.create_queue(QueueName="tokens")["QueueUrl"]
    task = {
        "Type": "Task",
        "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
        "Parameters": {"QueueUrl": queue_url, "MessageBody": {"token.$": "$$.Task.Token"}},
        "TimeoutSeconds": HOUR,
        "End": True,
    }
    sfn, execution_arn = _execution({"StartAt": "WaitForJob", "States": {"WaitForJob": task}})
    _until(lambda: sqs.receive_message(QueueUrl=queue_url).get("Messages"))
    clock.armed()

    # When the clock passes the hour
    clock.advance(HOUR + 1)

    # Then the task has timed out, as on AWS after an hour
    ended = _until(lambda: _ended(sfn, execution_arn))
    assert (ended["status"], ended["error"]) == ("FAILED", "States.Timeout")


def test_a_simulated_job_ends_when_the_clock_reaches_its_duration(clock: ManualClock) -> None:
    # Given a simulated Translate job of two minutes on the clock
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="documents")
    s3.put_object(Bucket="documents", Key="in/letter.txt", Body=b"Dear reader")
    register(TranslateSimulator(REGION, delay_seconds=120, clock=clock))
    translate = boto3.client("translate", region_name=REGION)
    try:
        job_id = translate.start_text_translation_job(
            InputDataConfig={"S3Uri": "s3://documents/in/", "ContentType": "text/plain"},
            OutputDataConfig={"S3Uri": "s3://documents/out/"},
            DataAccessRoleArn=ROLE_ARN,
            SourceLanguageCode="en",
            TargetLanguageCodes=["fr"],
            ClientToken="clock-test",
        )["JobId"]

        def status() -> str:
            return str(
                translate.describe_text_translation_job(JobId=job_id)["TextTranslationJobProperties"]["JobStatus"]
            )

        # When half of it has passed, it runs; when all of it has, it is done
        clock.armed(2)  # its two steps
        clock.advance(60)
        _until(lambda: status() == "IN_PROGRESS")
        clock.advance(60)
        _until(lambda: status() == "COMPLETED")
    finally:
        unregister_all()


def test_make_local_at_a_speedup_keeps_each_wall_clock_duration_inside_the_timer_it_belongs_to() -> None:
    # Given `LOCALCLOUD_SPEEDUP=60 make local` on the project's template (its Step Functions timers at 60x)
    template = Path(__file__).resolve().parents[2] / "template.yaml"
    config = CloudConfig(template=template, speedup=60.0)
    declared = yaml_parse(template.read_text())["Parameters"]
    seconds = {name: int(p["Default"]) for name, p in declared.items() if str(p.get("Default", "")).isdigit()}

    # When serve scales the durations measured on the wall clock
    seconds |= {name: int(value) for name, value in _on_the_wall_clock(config).items()}

    # Then an export is re-checked (SQS DelaySeconds, real seconds) before its heartbeat (clock seconds) runs out, and
    # the reconciler looks at a waiting job (real seconds) before the job's heartbeat runs out
    assert seconds["ExportRecheckDelaySeconds"] < seconds["ExportHeartbeatSeconds"] / config.speedup
    assert seconds["ReconcileAfterSeconds"] < seconds["HeartbeatSeconds"] / config.speedup
