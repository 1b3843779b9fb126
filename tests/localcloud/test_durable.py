"""Lambda durable functions offline (localcloud.durable): invoking a function with DurableConfig starts a durable
execution, which runs the function's built package in a worker, suspends while it waits for a callback, and replays
it when the callback closes; Lambda's durable execution API answers on the endpoint in Lambda's shapes, and the
callback's timeout falls due on the cloud's clock."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from localcloud.clock import ManualClock
from localcloud.cloud import CloudConfig, LocalCloud
from tests.localcloud.simulated import wait_for

FIXTURE = Path(__file__).parent / "fixtures" / "durable" / "template.yaml"
DEADLINE_S = 30.0  # a safety net for the positive signals below; each comes within a second or two
HOUR = 3600
CLOSED = "The callback ID token has either expired or the callback associated with the token has already been closed."


@pytest.fixture(scope="module")
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory, clock: ManualClock) -> Iterator[LocalCloud]:
    log = tmp_path_factory.mktemp("durable") / "functions.log"
    config = CloudConfig(template=FIXTURE, stack_name="durable", aws_port=0, http_port=0, function_log=log)
    with LocalCloud(config, clock=clock) as running:
        yield running


@pytest.fixture
def lambda_(cloud: LocalCloud) -> Any:
    return cloud.client("lambda")


LATEST = "$LATEST"  # a durable function is invoked qualified: this cloud publishes no version


def _function(cloud: LocalCloud, logical_id: str = "WaitingFunction") -> str:
    return next(r.physical_id for r in cloud.stack.resources if r.logical_id == logical_id)


def _start(cloud: LocalCloud, job: str, timeout_seconds: int = HOUR, **invoke: Any) -> str:
    """Invoke the durable function asynchronously for `job`: the ARN of the execution it started."""
    response = cloud.client("lambda").invoke(
        FunctionName=_function(cloud),
        Qualifier=LATEST,
        InvocationType="Event",
        Payload=json.dumps({"job": job, "timeoutSeconds": timeout_seconds}),
        **invoke,
    )
    assert response["StatusCode"] == 202
    return str(response["DurableExecutionArn"])


def _callback_id(cloud: LocalCloud, job: str) -> str:
    """The callback id the function's submitter recorded for `job` (once it has)."""
    s3, bucket = cloud.client("s3"), cloud.stack.outputs["CallbackBucketName"]

    def recorded() -> str | None:
        try:
            return str(s3.get_object(Bucket=bucket, Key=f"callbacks/{job}")["Body"].read().decode())
        except s3.exceptions.NoSuchKey:
            return None

    return str(wait_for(recorded, DEADLINE_S, "the callback id"))


def _ended(lambda_: Any, execution_arn: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        execution = lambda_.get_durable_execution(DurableExecutionArn=execution_arn)
        return None if execution["Status"] == "RUNNING" else dict(execution)

    return dict(wait_for(ended, DEADLINE_S, "the execution's end"))


def _events(lambda_: Any, execution_arn: str) -> list[str]:
    history = lambda_.get_durable_execution_history(DurableExecutionArn=execution_arn)
    return [event["EventType"] for event in history["Events"]]


def _suspended(lambda_: Any, execution_arn: str) -> None:
    """Wait until the execution's first invocation has ended: it waits with nothing running (an execution stopped
    while its function still runs fails that function's next checkpoint, and the executor retries it later)."""
    wait_for(lambda: "InvocationCompleted" in _events(lambda_, execution_arn), DEADLINE_S, "an invocation")


def _starts(cloud: LocalCloud) -> int:
    """How many invocations of the durable function began, from its START log lines."""
    lines = cloud.function_log.read_text().splitlines()
    return sum(line.startswith(f"[{_function(cloud)}] START ") for line in lines)


def test_an_execution_waits_for_its_callback_and_succeeds_with_what_the_callback_sent(
    cloud: LocalCloud, lambda_: Any
) -> None:
    # Given an execution of the durable function, started by an asynchronous Invoke, whose callback id is recorded
    before = _starts(cloud)
    execution_arn = _start(cloud, "approve")
    callback_id = _callback_id(cloud, "approve")
    assert execution_arn.startswith(f"arn:aws:lambda:us-east-1:123456789012:function:{_function(cloud)}:$LATEST/")

    # Then it waits: its first invocation has ended, its callback is open
    _suspended(lambda_, execution_arn)
    assert lambda_.get_durable_execution(DurableExecutionArn=execution_arn)["Status"] == "RUNNING"
    assert "CallbackSucceeded" not in _events(lambda_, execution_arn)

    # When the callback succeeds with a result
    lambda_.send_durable_execution_callback_success(CallbackId=callback_id, Result=b'{"approved": true}')

    # Then the function is invoked again, replays to its wait, and the execution succeeds with what was sent
    ended = _ended(lambda_, execution_arn)
    assert ended["Status"] == "SUCCEEDED"
    assert json.loads(ended["Result"]) == {"job": "approve", "result": '{"approved": true}'}
    assert _starts(cloud) - before == 2  # the first run and one replay
    assert {"CallbackSucceeded", "ExecutionSucceeded"} <= set(_events(lambda_, execution_arn))


def test_a_synchronous_invoke_answers_when_its_execution_ends(cloud: LocalCloud, lambda_: Any) -> None:
    # Given a synchronous Invoke of the durable function, still waiting for its answer
    answered: dict[str, Any] = {}

    def invoke() -> None:
        payload = json.dumps({"job": "sync", "timeoutSeconds": HOUR})
        answered.update(lambda_.invoke(FunctionName=_function(cloud), Qualifier=LATEST, Payload=payload))

    caller = threading.Thread(target=invoke)
    caller.start()
    callback_id = _callback_id(cloud, "sync")
    assert not answered

    # When its callback succeeds
    lambda_.send_durable_execution_callback_success(CallbackId=callback_id, Result=b'"done"')
    caller.join(DEADLINE_S)

    # Then the Invoke answers with the execution's result and its ARN
    assert answered["StatusCode"] == 200
    assert json.loads(answered["Payload"].read()) == {"job": "sync", "result": '"done"'}
    assert lambda_.get_durable_execution(DurableExecutionArn=answered["DurableExecutionArn"])["Status"] == "SUCCEEDED"


def test_a_durable_function_whose_package_lacks_the_sdk_runs_on_the_runtimes_copy(
    cloud: LocalCloud, lambda_: Any
) -> None:
    # Given a durable function whose package brings no durable execution SDK (Lambda's runtime carries one)
    # When it is invoked synchronously
    stepping = f"{_function(cloud, 'SteppingFunction')}:{LATEST}"  # a qualified name, as the ARN's suffix
    response = lambda_.invoke(FunctionName=stepping, Payload=json.dumps({"value": 21}))

    # Then it ran on the runtime's copy, its step checkpointed, and the Invoke answers with the execution's result
    assert "FunctionError" not in response
    assert json.loads(response["Payload"].read()) == {"sdk": "runtime", "doubled": 42}
    assert {"StepSucceeded", "ExecutionSucceeded"} <= set(_events(lambda_, response["DurableExecutionArn"]))


def test_a_callback_failure_fails_the_execution_with_the_error_sent(cloud: LocalCloud, lambda_: Any) -> None:
    # Given an execution waiting for its callback
    execution_arn = _start(cloud, "reject")
    callback_id = _callback_id(cloud, "reject")

    # When the callback fails
    lambda_.send_durable_execution_callback_failure(
        CallbackId=callback_id, Error={"ErrorType": "Job.Failed", "ErrorMessage": "the job failed"}
    )

    # Then the execution fails with the callback's error, as the SDK raises it in the function
    ended = _ended(lambda_, execution_arn)
    assert ended["Status"] == "FAILED"
    assert ended["Error"] == {
        "ErrorType": "aws_durable_execution_sdk_python.exceptions.CallbackExternalError",
        "ErrorMessage": "the job failed",
    }


def test_a_callback_closed_once_refuses_every_later_call_as_lambda_does(cloud: LocalCloud, lambda_: Any) -> None:
    # Given a callback that succeeded
    execution_arn = _start(cloud, "twice")
    callback_id = _callback_id(cloud, "twice")
    lambda_.send_durable_execution_callback_success(CallbackId=callback_id, Result=b"1")
    assert _ended(lambda_, execution_arn)["Status"] == "SUCCEEDED"

    # When it is sent a success, a failure or a heartbeat again, each is refused with Lambda's error
    for call in (
        lambda: lambda_.send_durable_execution_callback_success(CallbackId=callback_id, Result=b"2"),
        lambda: lambda_.send_durable_execution_callback_failure(CallbackId=callback_id, Error={"ErrorMessage": "x"}),
        lambda: lambda_.send_durable_execution_callback_heartbeat(CallbackId=callback_id),
    ):
        with pytest.raises(lambda_.exceptions.CallbackTimeoutException) as refused:
            call()
        assert refused.value.response["Error"]["Message"] == CLOSED
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400

    # And the execution keeps the first result
    assert json.loads(_ended(lambda_, execution_arn)["Result"])["result"] == "1"


@pytest.mark.parametrize(
    ("qualifier", "error"),
    [(None, "InvalidParameterValueException"), ("1", "ResourceNotFoundException")],
    ids=["unqualified", "unpublished-version"],
)
def test_an_invoke_that_names_no_version_it_can_run_is_refused(
    cloud: LocalCloud, lambda_: Any, qualifier: str | None, error: str
) -> None:
    # When a durable function is invoked unqualified (Lambda: "You cannot invoke a durable function using an
    # unqualified ARN"), or with a version nobody published
    with pytest.raises(ClientError) as refused:
        lambda_.invoke(FunctionName=_function(cloud), Payload=b"{}", **({"Qualifier": qualifier} if qualifier else {}))
    # Then Lambda's error answers, and no execution started
    assert refused.value.response["Error"]["Code"] == error
    if qualifier is None:
        assert "unqualified ARN" in refused.value.response["Error"]["Message"]


def test_a_callback_id_lambda_never_issued_is_refused(lambda_: Any) -> None:
    # Given a callback id no execution issued (base64, as Lambda's are)
    forged = base64.b64encode(b"no such callback").decode()

    # When a success is sent for it, then it is refused as an invalid parameter
    with pytest.raises(lambda_.exceptions.InvalidParameterValueException) as refused:
        lambda_.send_durable_execution_callback_success(CallbackId=forged, Result=b"1")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_a_stopped_execution_ends_stopped_and_its_callback_is_closed(cloud: LocalCloud, lambda_: Any) -> None:
    # Given an execution waiting for its callback
    execution_arn = _start(cloud, "stop")
    callback_id = _callback_id(cloud, "stop")
    _suspended(lambda_, execution_arn)

    # When it is stopped
    lambda_.stop_durable_execution(DurableExecutionArn=execution_arn, Error={"ErrorMessage": "no longer needed"})

    # Then it has ended STOPPED, and its callback refuses a late success
    assert _ended(lambda_, execution_arn)["Status"] == "STOPPED"
    with pytest.raises(lambda_.exceptions.CallbackTimeoutException):
        lambda_.send_durable_execution_callback_success(CallbackId=callback_id, Result=b"1")


def test_a_name_an_open_execution_holds_cannot_start_another(cloud: LocalCloud, lambda_: Any) -> None:
    # Given an execution named order-1, waiting
    first = _start(cloud, "named", DurableExecutionName="order-1")
    _callback_id(cloud, "named")
    _suspended(lambda_, first)

    # When the function is invoked again with that name, it is refused; once the first has ended, the name is free
    with pytest.raises(lambda_.exceptions.DurableExecutionAlreadyStartedException):
        _start(cloud, "named-again", DurableExecutionName="order-1")
    lambda_.stop_durable_execution(DurableExecutionArn=first)
    second = _start(cloud, "named-later", DurableExecutionName="order-1")
    assert second != first and "/durable-execution/order-1/" in second
    _callback_id(cloud, "named-later")
    _suspended(lambda_, second)
    lambda_.stop_durable_execution(DurableExecutionArn=second)


def test_a_callback_times_out_on_the_clouds_clock_and_fails_the_execution(
    cloud: LocalCloud, clock: ManualClock, lambda_: Any
) -> None:
    # Given no timer left over from another test, and an execution whose callback times out after 10 minutes
    wait_for(lambda: clock.waiting_at(clock.now()) == 0, DEADLINE_S, "no timer waiting")
    execution_arn = _start(cloud, "late", timeout_seconds=600)
    callback_id = _callback_id(cloud, "late")
    clock.armed(2)  # the callback's timeout and the execution's

    # When 9 minutes 59 seconds pass it still waits (its timers have seen the new time); at 10 minutes it times out
    clock.advance(599)
    wait_for(lambda: clock.waiting_at(clock.now()) == 2, DEADLINE_S, "two timers waiting")
    assert lambda_.get_durable_execution(DurableExecutionArn=execution_arn)["Status"] == "RUNNING"
    clock.advance(1)

    # Then the function replays, the SDK raises the timeout in it, and the execution fails with that error
    ended = _ended(lambda_, execution_arn)
    assert ended["Status"] == "FAILED"
    assert ended["Error"]["ErrorType"] == "aws_durable_execution_sdk_python.exceptions.CallbackTimeoutError"
    # And a completion that arrives after the timeout is refused as expired
    with pytest.raises(lambda_.exceptions.CallbackTimeoutException):
        lambda_.send_durable_execution_callback_success(CallbackId=callback_id, Result=b"1")
