"""statemachines/gated.asl.json: the gate fragment's ask (PassGate) and its choice: going on, waiting or giving up."""

from __future__ import annotations

import pytest

from tests.statemachines.conftest import StateCaller, caught, output, retried

MACHINE = "gated"
GATE = {"limit": 2, "maxAttempts": 5, "waitSeconds": 10, "attempts": 0}


def test_the_gates_answer_is_kept_for_the_choice(teststate: StateCaller) -> None:
    # When the gate function answers (its payload, a JSON object: Lambda's model has Payload as a blob, which STRICT
    # would refuse for an object)
    payload = {**GATE, "attempts": 1, "proceed": True, "expired": False}
    answer = teststate(MACHINE, "PassGate", {"gate": GATE}, result={"Payload": payload}, validation="NONE")
    assert (answer["status"], answer["nextState"], output(answer)["gate"]) == ("SUCCEEDED", "GateOpen", payload)


@pytest.mark.parametrize(
    "error",
    [
        "ExecutionsThrottledError",
        "Lambda.TooManyRequestsException",
        "Lambda.ServiceException",
        "Lambda.AWSLambdaException",
        "Lambda.SdkClientException",
    ],
)
def test_a_gate_that_cannot_count_is_asked_again_six_times(teststate: StateCaller, error: str) -> None:
    spent = retried(teststate, MACHINE, "PassGate", {"gate": GATE}, error, [2, 4, 8, 16, 32, 64])
    assert caught(spent) == ("FAILED", "", error)


@pytest.mark.parametrize(
    ("proceed", "expired", "then"),
    [(True, False, "UseResource"), (False, True, "GateTimedOut"), (False, False, "WaitAtGate")],
)
def test_the_gate_lets_in_turns_away_or_waits(teststate: StateCaller, proceed: bool, expired: bool, then: str) -> None:
    answer = teststate(MACHINE, "GateOpen", {"gate": {**GATE, "proceed": proceed, "expired": expired}})
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", then)
