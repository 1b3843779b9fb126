"""The gate state, as the executions behind it see it: the GateLimit oldest RUNNING executions of a state machine go
on, the others wait and ask again; one that waited goes on once an older one has ended; after GateMaxAttempts
refusals the workflow fails with `Semaphore.Timeout`. The contender is the execution whose `$$.Execution.Id` the
gate task passes: nothing about it is in the input.

The function is tested against real executions on moto (waiting tasks); the fragment as statemachines/gated.asl.json
writes it, on a test copy of the gated workflow whose gate task runs the real handler in-process (moto's Lambda only
echoes) and whose Waits run on the `clock` fixture's manual clock. Handlers are imported inside the tests (see
support.check_observability).
"""

from __future__ import annotations

import importlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto.awslambda_simple.models import LambdaSimpleBackend

from localcloud.clock import ManualClock
from localcloud.runtime.lambda_bootstrap import LambdaContext
from tests.unit.support import ACCOUNT, EVENTS, REGION, REPO, Aws, invoke
from tests.unit.waiting import WaitingTask, wait_until

LIMIT = 3
WAIT_SECONDS = 60


def gate(attempts: int = 0, limit: int = LIMIT, max_attempts: int = 60) -> dict[str, Any]:
    return {"limit": limit, "maxAttempts": max_attempts, "waitSeconds": WAIT_SECONDS, "attempts": attempts}


def pass_gate(contender: WaitingTask, attempts: int = 0, max_attempts: int = 60) -> dict[str, Any]:
    return dict(
        invoke("pass_gate", {"executionArn": contender.execution_arn, "gate": gate(attempts, LIMIT, max_attempts)})
    )


# ----------------------------------------------------------------------------------------------------------------
# The function, against real RUNNING executions
# ----------------------------------------------------------------------------------------------------------------
def test_the_oldest_contenders_proceed_and_the_rest_wait(waiting_task: Callable[..., WaitingTask]) -> None:
    # Given five running executions of one state machine, started one after the other
    contenders = [waiting_task() for _ in range(5)]
    # When each asks the gate (youngest first)
    answers = {c.execution_arn: pass_gate(c) for c in reversed(contenders)}
    # Then the three oldest may go on, the two youngest wait, and each attempt is counted
    assert [answers[c.execution_arn]["proceed"] for c in contenders] == [True, True, True, False, False]
    assert {answers[c.execution_arn]["attempts"] for c in contenders} == {1}
    assert not any(answer["expired"] for answer in answers.values())


def test_a_waiting_contender_proceeds_once_an_older_one_has_ended(waiting_task: Callable[..., WaitingTask]) -> None:
    # Given four running executions, the fourth refused at the gate
    contenders = [waiting_task() for _ in range(4)]
    assert pass_gate(contenders[3])["proceed"] is False
    # When one of the three oldest ends
    contenders[1].stop()
    # Then the fourth may go on at its next attempt
    assert pass_gate(contenders[3], attempts=1) | {"position": None} == {
        **gate(attempts=2),
        "position": None,
        "proceed": True,
        "expired": False,
    }


def test_the_last_refused_attempt_expires(waiting_task: Callable[..., WaitingTask]) -> None:
    # Given four running executions, and the fourth at its last allowed attempt
    contenders = [waiting_task() for _ in range(4)]
    # When it is refused again
    answer = pass_gate(contenders[3], attempts=4, max_attempts=5)
    # Then the gate says its wait has expired (the workflow fails with Semaphore.Timeout)
    assert (answer["proceed"], answer["attempts"], answer["expired"]) == (False, 5, True)


def test_a_throttled_list_executions_is_a_named_error_the_workflow_retries(aws: Aws, stubbed: Any) -> None:
    # Given ListExecutions throttled (after botocore's own retries)
    sfn: Stubber = stubbed("stepfunctions")
    sfn.add_client_error("list_executions", "ThrottlingException", "Rate exceeded", 400)
    sample = json.loads((EVENTS / "pass_gate.first-attempt.json").read_text())
    # When the gate is asked
    exceptions = importlib.import_module("shared.exceptions")
    with pytest.raises(exceptions.ExecutionsThrottledError):
        invoke("pass_gate", sample)
    # Then the error is one the gate task retries with backoff
    retry = gated_definition()["States"]["PassGate"]["Retry"][0]
    assert "ExecutionsThrottledError" in retry["ErrorEquals"]
    assert retry["BackoffRate"] > 1


@pytest.mark.parametrize(("sample", "expired"), [("first-attempt", False), ("last-attempt", True)])
def test_the_samples_ask_the_gate(aws: Aws, sample: str, expired: bool) -> None:
    # Given a sample naming an execution of the gated workflow that is not running
    event = json.loads((EVENTS / f"pass_gate.{sample}.json").read_text())
    # When it is replayed
    answer = invoke("pass_gate", event)
    # Then the execution may not go on; at its last attempt the wait has expired
    assert (answer["proceed"], answer["expired"]) == (False, expired)


# ----------------------------------------------------------------------------------------------------------------
# The fragment (statemachines/gated.asl.json), run by moto's interpreter
# ----------------------------------------------------------------------------------------------------------------
def gated_definition(**substitutions: str) -> dict[str, Any]:
    text = (REPO / "statemachines" / "gated.asl.json").read_text()
    for name, value in substitutions.items():
        text = text.replace("${" + name + "}", value)
    return dict(json.loads(text))


@dataclass
class Gated:
    """A copy of the gated workflow (GateLimit 1, GateMaxAttempts 2) whose gate task runs the real handler."""

    state_machine_arn: str
    sfn: Any = field(repr=False)
    invocations: list[dict[str, Any]] = field(default_factory=list)

    def start(self, seconds: int = 3600) -> str:
        return str(
            self.sfn.start_execution(
                stateMachineArn=self.state_machine_arn, name=f"c-{uuid.uuid4()}", input=json.dumps({"seconds": seconds})
            )["executionArn"]
        )

    def entered(self, execution_arn: str) -> list[str]:
        events = self.sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
        return [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]

    def reaches(self, execution_arn: str, state: str, times: int = 1) -> None:
        wait_until(lambda: self.entered(execution_arn).count(state) >= times, f"{state} entered {times}x")

    def ended(self, execution_arn: str) -> dict[str, Any]:
        return dict(
            wait_until(
                lambda: (d := self.sfn.describe_execution(executionArn=execution_arn))["status"] != "RUNNING" and d,
                "the execution's end",
            )
        )


@pytest.fixture
def gated(aws: Aws, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gated]:
    function = aws.stack.function("pass_gate")
    function_arn = aws.stack.function_arn("pass_gate")
    for name, value in {
        "AWS_LAMBDA_FUNCTION_NAME": function.physical_id,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function.physical_id}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "2026/01/15/[$LATEST]unittest",
    }.items():
        monkeypatch.setenv(name, value)
    sfn = boto3.client("stepfunctions", region_name=REGION)
    definition = gated_definition(
        PassGateFunctionArn=function_arn, GateLimit="1", GateMaxAttempts="2", GateWaitSeconds=str(WAIT_SECONDS)
    )
    arn = sfn.create_state_machine(
        name=f"callback-kit-gated-{uuid.uuid4().hex[:8]}",
        definition=json.dumps(definition),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/callback-kit-gated",
    )["stateMachineArn"]
    account = Gated(arn, sfn)
    handler = importlib.import_module("handlers.pass_gate").handler

    def run_handler(
        backend: LambdaSimpleBackend, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
    ) -> bytes:
        assert function_name in {function_arn, function.physical_id}, function_name
        payload = json.loads(body)
        account.invocations.append(payload)
        context = LambdaContext(
            {
                "requestId": str(uuid.uuid4()),
                "functionArn": function_arn,
                "deadlineMs": int(time.time() * 1000) + 30_000,
            }
        )
        return json.dumps(handler(payload, context)).encode()

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", run_handler)
    try:
        yield account
    finally:
        for execution in sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"]:
            sfn.stop_execution(executionArn=execution["executionArn"])
            account.ended(execution["executionArn"])


def test_the_workflow_passes_its_own_execution_id_to_the_gate(gated: Gated) -> None:
    # When an execution (whose input names nothing but `seconds`) reaches the gate
    execution = gated.start()
    gated.reaches(execution, "UseResource")
    # Then the gate was asked about that execution, which went on into the critical section
    assert [invocation["executionArn"] for invocation in gated.invocations] == [execution]


def test_a_contender_waits_at_the_gate_and_goes_on_once_the_holder_ends(gated: Gated, clock: ManualClock) -> None:
    # Given one execution past the gate (GateLimit 1) and a younger one refused, waiting at the gate
    holder = gated.start()
    gated.reaches(holder, "UseResource")
    contender = gated.start()
    gated.reaches(contender, "WaitAtGate")
    # When the holder ends and the contender's wait is over
    gated.sfn.stop_execution(executionArn=holder)
    gated.ended(holder)
    clock.armed(1)
    clock.advance(WAIT_SECONDS)
    # Then the contender asks again and goes on
    gated.reaches(contender, "UseResource")
    assert gated.entered(contender) == [
        "EnterGate", "PassGate", "GateOpen", "WaitAtGate", "PassGate", "GateOpen", "UseResource"
    ]  # fmt: skip


def test_a_contender_refused_too_often_fails_with_semaphore_timeout(gated: Gated, clock: ManualClock) -> None:
    # Given one execution past the gate that keeps the resource
    holder = gated.start()
    gated.reaches(holder, "UseResource")
    # When a younger one is refused GateMaxAttempts (2) times
    contender = gated.start()
    gated.reaches(contender, "WaitAtGate")
    clock.armed(2)  # the holder's use of the resource and the contender's wait
    clock.advance(WAIT_SECONDS)
    described = gated.ended(contender)
    # Then it fails with Semaphore.Timeout, never having entered the critical section; the holder runs on
    assert (described["status"], described.get("error")) == ("FAILED", "Semaphore.Timeout")
    assert "UseResource" not in gated.entered(contender)
    assert gated.sfn.describe_execution(executionArn=holder)["status"] == "RUNNING"
