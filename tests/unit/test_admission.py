"""The admission queue, as its producers and operators see it: queued requests start in FIFO order while fewer than
AdmissionMaxRunning (3) admitted executions run; a redelivered request never starts a second execution; a request
that cannot be started stays queued, reaches the dead-letter queue after 5 receives, and holds up no other group.

The queue, its dead-letter queue and the admitted state machine are template.yaml's on moto; admitted executions
wait on the `clock` fixture's manual clock, so they run until the test ends them. moto's SQS clock is moved by the
`sqs_clock` fixture to let a visibility timeout pass. Handlers are imported inside the tests (see
support.check_observability).
"""

from __future__ import annotations

import importlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from localcloud.clock import ManualClock
from tests.unit.support import EVENTS, REGION, Aws, invoke
from tests.unit.waiting import wait_until

MAX_RUNNING = 3  # AdmissionMaxRunning's default
VISIBILITY_TIMEOUT_S = 60  # AdmissionQueue's VisibilityTimeout
SCHEDULE = json.loads((EVENTS / "start_admitted.schedule.json").read_text())


@dataclass
class AdmissionAccount:
    """The admission queue, its dead-letter queue and the admitted state machine, as deployed."""

    queue_url: str
    dead_letter_url: str
    state_machine_arn: str
    sqs: Any = field(repr=False)
    sfn: Any = field(repr=False)

    def queue(self, request_id: str, group: str = "tenant-a", body: str | None = None, **execution_input: Any) -> None:
        """What a producer does: one request per message, deduplicated by its request id."""
        request = {"requestId": request_id, "input": {"seconds": 3600, **execution_input}}
        self.sqs.send_message(
            QueueUrl=self.queue_url,
            MessageBody=body if body is not None else json.dumps(request),
            MessageGroupId=group,
            MessageDeduplicationId=request_id,
        )

    def run(self, name: str, seconds: int = 3600) -> str:
        """An admitted execution started by hand (one the starter finds RUNNING)."""
        return str(
            self.sfn.start_execution(
                stateMachineArn=self.state_machine_arn, name=name, input=json.dumps({"seconds": seconds})
            )["executionArn"]
        )

    def running(self) -> list[str]:
        executions = self.sfn.list_executions(stateMachineArn=self.state_machine_arn, statusFilter="RUNNING")
        return sorted(e["name"] for e in executions["executions"])

    def executions_named(self, name: str) -> list[dict[str, Any]]:
        executions = self.sfn.list_executions(stateMachineArn=self.state_machine_arn)["executions"]
        return [e for e in executions if e["name"] == name]

    def end(self, name: str) -> None:
        """An admitted execution ends (stopped here; any end frees its slot)."""
        arn = self.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{name}"
        self.sfn.stop_execution(executionArn=arn)
        wait_until(lambda: name not in self.running(), f"{name} ended")

    def waiting(self, queue_url: str | None = None) -> tuple[int, int]:
        """(visible, in flight) messages of the queue."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=queue_url or self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])

    def dead_letters(self) -> list[str]:
        messages = self.sqs.receive_message(QueueUrl=self.dead_letter_url, MaxNumberOfMessages=10).get("Messages", [])
        return [m["Body"] for m in messages]


class SqsClock:
    """moto's SQS time (visibility timeouts, the once-a-minute purge limit), moved by the tests."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        sqs_models = importlib.import_module("moto.sqs.models")
        self.offset = 0.0
        real_time, real_millis = sqs_models.unix_time, sqs_models.unix_time_millis
        monkeypatch.setattr(sqs_models, "unix_time", lambda *a: real_time(*a) + self.offset)
        monkeypatch.setattr(sqs_models, "unix_time_millis", lambda *a: real_millis(*a) + self.offset * 1000)

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture(scope="module")
def sqs_clock() -> Iterator[SqsClock]:
    """One SQS clock for the module: it only moves forward while the module's tests run."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield SqsClock(monkeypatch)


@pytest.fixture
def admission(aws: Aws, clock: ManualClock, sqs_clock: SqsClock) -> Iterator[AdmissionAccount]:
    sqs = boto3.client("sqs", region_name=REGION)
    account = AdmissionAccount(
        aws.environment["ADMISSION_QUEUE_URL"],
        aws.stack.physical_id("AdmissionDeadLetterQueue"),
        aws.environment["ADMISSION_STATE_MACHINE_ARN"],
        sqs,
        boto3.client("stepfunctions", region_name=REGION),
    )
    try:
        yield account
    finally:
        for name in account.running():
            account.end(name)
        sqs_clock.advance(61)  # PurgeQueue is allowed once a minute
        sqs.purge_queue(QueueUrl=account.queue_url)
        sqs.purge_queue(QueueUrl=account.dead_letter_url)


def start_admitted() -> dict[str, Any]:
    return dict(invoke("start_admitted", SCHEDULE))


def ids(prefix: str, count: int) -> list[str]:
    base = uuid.uuid4().hex[:8]
    return [f"{prefix}-{base}-{i}" for i in range(1, count + 1)]


def test_only_the_free_slots_are_filled_with_the_oldest_requests(admission: AdmissionAccount) -> None:
    # Given 2 admitted executions running and three requests queued
    first_running, second_running = ids("running", 2)
    admission.run(first_running)
    admission.run(second_running)
    requests = ids("req", 3)
    for request_id in requests:
        admission.queue(request_id)

    # When the starter runs
    result = start_admitted()

    # Then exactly one request starts, the oldest, and only its message is gone from the queue
    assert result["started"] == [requests[0]]
    assert admission.running() == sorted([first_running, second_running, requests[0]])
    assert admission.waiting() == (2, 0)


def test_the_starter_lists_the_running_executions_once_per_run(admission: AdmissionAccount) -> None:
    # Given requests queued and the starter's Step Functions client watched
    for request_id in ids("req", 5):
        admission.queue(request_id)
    sfn = importlib.import_module("shared.aws").client("stepfunctions")
    calls: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append(params)

    sfn.meta.events.register("provide-client-params.sfn.ListExecutions", record)
    try:
        # When it runs
        start_admitted()
    finally:
        sfn.meta.events.unregister("provide-client-params.sfn.ListExecutions", record)
    assert [call["statusFilter"] for call in calls] == ["RUNNING"]


def test_requests_start_in_fifo_order_across_runs(admission: AdmissionAccount) -> None:
    # Given five requests of one group queued in order
    requests = ids("req", 5)
    for request_id in requests:
        admission.queue(request_id)

    # When the starter runs, then runs again each time admitted executions have ended
    first = start_admitted()["started"]
    admission.end(requests[0])
    second = start_admitted()["started"]
    admission.end(requests[1])
    admission.end(requests[2])
    third = start_admitted()["started"]

    # Then the requests started in the order they were queued, never more than 3 running
    assert (first, second, third) == (requests[:3], [requests[3]], [requests[4]])
    assert admission.running() == sorted(requests[3:])
    assert admission.waiting() == (0, 0)


def test_a_redelivered_request_does_not_start_a_second_execution(admission: AdmissionAccount) -> None:
    # Given a request whose execution was started by an earlier run that died before deleting its message
    (request_id,) = ids("req", 1)
    admission.run(request_id)
    admission.queue(request_id)

    # When the starter receives it again
    start_admitted()

    # Then there is still one execution of that request, and its message is gone
    assert len(admission.executions_named(request_id)) == 1
    assert admission.waiting() == (0, 0)


def test_a_bad_request_is_left_for_the_dead_letter_queue_without_holding_up_other_groups(
    admission: AdmissionAccount, sqs_clock: SqsClock, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a malformed request (its body carries a secret) ahead of good requests of other groups
    bad = json.dumps({"requestId": "not a valid name!", "input": {"password": "hunter2-secret"}})
    admission.queue("bad-1", group="tenant-a", body=bad)
    good = ids("req", 2)
    admission.queue(good[0], group="tenant-b")
    admission.queue(good[1], group="tenant-c")

    # When the starter runs
    result = start_admitted()

    # Then the good requests start, the bad one stays in the queue (in flight), and its secret is not logged
    assert result["started"] == good
    assert admission.waiting() == (0, 1)
    assert "hunter2-secret" not in capsys.readouterr().out

    # And after it came back and was refused 5 times in all, it is in the dead-letter queue, not the queue
    for request_id in good:
        admission.end(request_id)
    for _ in range(5):
        sqs_clock.advance(VISIBILITY_TIMEOUT_S + 1)
        assert start_admitted()["started"] == []
    assert admission.waiting() == (0, 0)
    assert admission.dead_letters() == [bad]


def test_a_request_is_not_started_while_the_state_machine_is_missing(
    admission: AdmissionAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a queued request, and a starter whose state machine does not exist
    (request_id,) = ids("req", 1)
    admission.queue(request_id)
    monkeypatch.setenv("ADMISSION_STATE_MACHINE_ARN", admission.state_machine_arn + "-gone")

    # When the starter runs, it fails (its invocation is retried, then dead-lettered)
    with pytest.raises(ClientError, match="StateMachineDoesNotExist"):
        start_admitted()

    # Then the request is still queued, untouched
    assert admission.waiting() == (1, 0)


def test_a_throttled_start_leaves_the_request_queued(admission: AdmissionAccount, stubbed: Any) -> None:
    # Given a queued request, and StartExecution throttled
    (request_id,) = ids("req", 1)
    admission.queue(request_id)
    sfn: Stubber = stubbed("stepfunctions")
    sfn.add_response("list_executions", {"executions": []})
    sfn.add_client_error("start_execution", "ThrottlingException", "Rate exceeded", 400)

    # When the starter runs
    result = start_admitted()

    # Then nothing started and the message was not deleted: it comes back after the visibility timeout
    assert result["started"] == []
    assert admission.executions_named(request_id) == []
    assert admission.waiting() == (0, 1)


def test_the_schedule_sample_runs_the_starter(admission: AdmissionAccount) -> None:
    # Given a request queued and nothing running
    (request_id,) = ids("req", 1)
    admission.queue(request_id)
    # When the schedule's sample event is replayed
    result = start_admitted()
    # Then the request is admitted
    assert result == {"running": 0, "started": [request_id], "alreadyStarted": [], "left": []}
    assert admission.running() == [request_id]
