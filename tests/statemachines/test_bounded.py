"""statemachines/bounded.asl.json, state by state: the wait for a permit of the callback semaphore, the permit given
back on every path, and the failure's naming."""

from __future__ import annotations

import pytest

from tests.statemachines.conftest import (
    LAMBDA_INVOKE_BACKOFFS,
    LAMBDA_INVOKE_ERRORS,
    StateCaller,
    caught,
    output,
    retried,
)

MACHINE = "bounded"
WAITING = {"resource": "printer", "seconds": 1, "config": {"permits": 2, "waitSeconds": 900, "heartbeatSeconds": 120}}
RELEASED = {"StatusCode": 200, "Payload": {"resource": "printer", "released": True}}  # ReleasePermitFunction's answer


def test_a_granted_permit_leads_to_the_work(teststate: StateCaller) -> None:
    # When the semaphore's grant resumes the wait (SendTaskSuccess: the callback's outcome)
    permit = {"resource": "printer", "position": 1}
    answer = teststate(MACHINE, "AcquirePermit", WAITING, result=permit)
    # Then the work comes next, the permit at $.permit
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", "UseResource")
    assert output(answer)["permit"] == permit


@pytest.mark.parametrize("error", LAMBDA_INVOKE_ERRORS)
def test_a_failed_acquire_call_is_retried_then_gives_the_place_back(teststate: StateCaller, error: str) -> None:
    spent = retried(teststate, MACHINE, "AcquirePermit", WAITING, error, LAMBDA_INVOKE_BACKOFFS, jitter=True)
    assert caught(spent) == ("CAUGHT_ERROR", "GiveUpPermit", error)
    assert output(spent)["error"]["Error"] == error


@pytest.mark.parametrize("error", ["States.Timeout", "States.HeartbeatTimeout", "Semaphore.Refused"])
def test_a_wait_that_ends_without_a_permit_gives_the_place_back_at_once(teststate: StateCaller, error: str) -> None:
    # When the wait runs out (its TimeoutSeconds, or no heartbeat from the sweeper), or the acquire function fails
    answer = teststate(MACHINE, "AcquirePermit", WAITING, error=error)
    # Then nothing retries it: the place in the queue goes back, the error at $.error
    assert caught(answer) == ("CAUGHT_ERROR", "GiveUpPermit", error)
    assert "retryIndex" not in answer["inspectionData"]["errorDetails"]


@pytest.mark.parametrize(("state", "then"), [("GiveUpPermit", "WhyNoPermit"), ("ReleasePermit", "Done")])
def test_giving_a_permit_back_is_retried_five_times_whatever_fails(
    teststate: StateCaller, state: str, then: str
) -> None:
    # When the release is answered (ReleasePermit selects from the function's payload, a JSON object: Lambda's model
    # has Payload as a blob, which STRICT would refuse for an object; the payload is checked here instead)
    released = teststate(
        MACHINE, state, {**WAITING, "error": {"Error": "States.Timeout"}}, result=RELEASED, validation="NONE"
    )
    # Then the next state comes; a failure of any kind is retried five times before the execution fails
    assert (released["status"], released["nextState"]) == ("SUCCEEDED", then)
    spent = retried(teststate, MACHINE, state, WAITING, "Lambda.Unknown", [1, 2, 4, 8, 16])
    assert caught(spent) == ("FAILED", "", "Lambda.Unknown")


def test_the_release_reports_what_it_released(teststate: StateCaller) -> None:
    answer = teststate(MACHINE, "ReleasePermit", WAITING, result=RELEASED, validation="NONE")
    assert output(answer) == {"resource": "printer", "released": True}


@pytest.mark.parametrize(
    ("error", "then"),
    [
        ("States.Timeout", "WaitedTooLong"),
        ("States.HeartbeatTimeout", "WaitedTooLong"),
        ("Lambda.ServiceException", "NoPermit"),
    ],
)
def test_a_wait_that_ran_out_is_named_semaphore_timeout(teststate: StateCaller, error: str, then: str) -> None:
    answer = teststate(MACHINE, "WhyNoPermit", {**WAITING, "error": {"Error": error, "Cause": "c"}})
    assert (answer["status"], answer["nextState"]) == ("SUCCEEDED", then)
