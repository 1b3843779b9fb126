"""The status recorder: one terminal entry per task, whatever reports the end and however often."""

from __future__ import annotations

import json

import pytest

from shared.exceptions import ExecutionNotEndedError
from tests.unit.support import Deployed, invoke
from tests.unit.task_support import GOOD_INPUT, TaskAccount, http_event, status_change


def submitted(tasks: TaskAccount) -> str:
    response = invoke("task_api", http_event("POST", "/task", {"type": "documents", "input": GOOD_INPUT}))
    return str(json.loads(response["body"])["id"])


def test_an_execution_that_is_not_a_task_writes_nothing(tasks: TaskAccount) -> None:
    # Given an execution started directly (no task in the log under its name)
    execution = tasks.sfn.start_execution(stateMachineArn=tasks.state_machine, name="direct-start", input="{}")

    result = invoke("record_task_status", status_change(execution["executionArn"], "SUCCEEDED", output="{}"))

    assert result["recorded"] is False
    assert tasks.all_entries() == []
    tasks.sfn.stop_execution(executionArn=execution["executionArn"])


def test_an_end_without_the_output_in_the_event_takes_it_from_the_execution(tasks: TaskAccount) -> None:
    # Given a task whose execution succeeded with an output the event left out (too large for an event)
    definition = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "Result": {"rows": 3}, "End": True}}}
    tasks.sfn.update_state_machine(stateMachineArn=tasks.state_machine, definition=json.dumps(definition))
    try:
        task_id = submitted(tasks)
        tasks.wait_until_stopped(task_id)

        result = invoke("record_task_status", status_change(tasks.execution_arn(task_id), "SUCCEEDED"))
    finally:
        definition = {"StartAt": "Work", "States": {"Work": {"Type": "Wait", "Seconds": 30, "End": True}}}
        tasks.sfn.update_state_machine(stateMachineArn=tasks.state_machine, definition=json.dumps(definition))

    assert result["recorded"] is True
    assert json.loads(tasks.log(task_id)[-1]["output"]) == {"rows": 3}


def test_a_failure_keeps_the_events_error_and_cause(tasks: TaskAccount) -> None:
    task_id = submitted(tasks)
    event = status_change(tasks.execution_arn(task_id), "FAILED", error="Macie.JOB_CANCELLED", cause="cancelled")

    invoke("record_task_status", event)

    end = tasks.log(task_id)[-1]
    assert (end["status"], end["detail"]) == ("FAILED", {"error": "Macie.JOB_CANCELLED", "cause": "cancelled"})


def test_the_first_end_wins_and_later_ones_change_nothing(tasks: TaskAccount) -> None:
    task_id = submitted(tasks)
    arn = tasks.execution_arn(task_id)

    results = [
        invoke("record_task_status", status_change(arn, "TIMED_OUT", error="States.Timeout")),
        invoke("record_task_status", status_change(arn, "SUCCEEDED", output="{}")),
        invoke("record_task_status", status_change(arn, "TIMED_OUT", error="States.Timeout")),
    ]

    assert [r["recorded"] for r in results] == [True, False, False]
    assert [e["status"] for e in tasks.log(task_id)] == ["SUBMITTED", "RUNNING", "TIMED_OUT"]


@pytest.mark.parametrize("status", ["RUNNING", "PENDING_REDRIVE"])
def test_a_status_that_does_not_end_the_execution_is_refused_and_writes_nothing(
    status: str, tasks: TaskAccount
) -> None:
    # Given a running task
    task_id = submitted(tasks)
    before = tasks.log(task_id)

    # When the recorder is handed a status change that is not an end (the rule never delivers one)
    with pytest.raises(ExecutionNotEndedError) as refused:
        invoke("record_task_status", status_change(tasks.execution_arn(task_id), status))

    # Then it is refused by name, and the task is still running as it was
    assert status in str(refused.value)
    assert tasks.log(task_id) == before


def test_the_status_rule_delivers_exactly_the_ends_the_recorder_takes(stack: Deployed) -> None:
    from shared.aws import EXECUTION_ENDS

    (rule,) = stack.rule_patterns("record_task_status").values()

    assert set(rule["detail"]["status"]) == EXECUTION_ENDS
