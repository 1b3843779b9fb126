"""Gate state: an execution goes on only while it is among the N oldest RUNNING executions of its state machine.

The workflow keeps the gate's state under `$.gate` (statemachines/gated.asl.json, docs/concurrency.md): a contender
that may not pass waits and asks again, and after `maxAttempts` refusals the workflow fails with `Semaphore.Timeout`.
Reading only (ListExecutions), so a retried invocation is harmless.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field

from shared.aws import client, error_code
from shared.exceptions import ExecutionsThrottledError

EXECUTION_ARN = r"^arn:[\w-]+:states:[\w-]+:\d{12}:execution:[\w-]+:[\w-]+$"
PAGE_SIZE = 1000  # ListExecutions' largest page


class Gate(BaseModel):
    """The gate's state in the execution (`$.gate`): its settings and how often this contender has asked."""

    model_config = ConfigDict(populate_by_name=True)

    limit: int = Field(gt=0)  # N: how many executions may be past the gate at once
    max_attempts: int = Field(alias="maxAttempts", gt=0)
    wait_seconds: int = Field(alias="waitSeconds", gt=0)  # the Wait between two attempts (read by the ASL)
    attempts: int = Field(default=0, ge=0)


class GateCheck(BaseModel):
    """What the gate task hands the function: `$$.Execution.Id` (the contender) and `$.gate`."""

    model_config = ConfigDict(populate_by_name=True)

    execution_arn: str = Field(alias="executionArn", pattern=EXECUTION_ARN)
    gate: Gate


def running_executions(state_machine_arn: str) -> list[dict[str, Any]]:
    """Every RUNNING execution of the state machine (all pages). A throttled ListExecutions, once botocore's own
    retries are spent, raises ExecutionsThrottledError."""
    pages = (
        client("stepfunctions")
        .get_paginator("list_executions")
        .paginate(stateMachineArn=state_machine_arn, statusFilter="RUNNING", PaginationConfig={"PageSize": PAGE_SIZE})
    )
    try:
        return [execution for page in pages for execution in page["executions"]]
    except ClientError as exc:
        if error_code(exc) == "ThrottlingException":
            raise ExecutionsThrottledError(str(exc)) from exc
        raise


def state_machine_of(execution_arn: str) -> str:
    """arn:...:execution:<machine>:<name> -> arn:...:stateMachine:<machine>."""
    prefix, _, machine_and_name = execution_arn.partition(":execution:")
    return f"{prefix}:stateMachine:{machine_and_name.rsplit(':', 1)[0]}"


def position(execution_arn: str) -> int | None:
    """The execution's place among its state machine's RUNNING executions, oldest first (ties by name); None if it
    is not listed (ListExecutions is eventually consistent: a contender just started may not be there yet)."""
    running = sorted(running_executions(state_machine_of(execution_arn)), key=lambda e: (e["startDate"], e["name"]))
    arns = [execution["executionArn"] for execution in running]
    return arns.index(execution_arn) if execution_arn in arns else None


def pass_gate(check: GateCheck) -> dict[str, Any]:
    """One attempt at the gate: `$.gate` with `proceed` (among the `limit` oldest), `attempts` counted and `expired`
    (refused for the `maxAttempts`-th time: the workflow fails with Semaphore.Timeout)."""
    place = position(check.execution_arn)
    proceed = place is not None and place < check.gate.limit
    attempts = check.gate.attempts + 1
    return {
        **check.gate.model_dump(by_alias=True),
        "attempts": attempts,
        "position": place,
        "proceed": proceed,
        "expired": not proceed and attempts >= check.gate.max_attempts,
    }
