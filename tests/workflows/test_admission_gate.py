"""Concurrency control end to end on the offline cloud (SPEEDUP 60: a simulated minute per real second): ten
contenders, at most three at once, by the admission queue (the scheduled starter, every simulated minute) and by the
gate state (GateWaitSeconds 60 between two attempts). An invariant sampler looks at the cloud as often as it can
until every contender has ended (the positive signal); at no sample may more than three be admitted / past the gate.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from localcloud.cloud import LocalCloud

CONTENDERS = 10
LIMIT = 3  # AdmissionMaxRunning and GateLimit (the template's defaults)
CRITICAL_SECONDS = 30  # each contender holds the resource for half a real second
DEADLINE_S = 60.0  # a stuck contender fails the test here, long after the ~5 real seconds it takes


def sample_until_all_ended(
    cloud: LocalCloud, executions: Callable[[], list[dict[str, Any]]], inside: Callable[[dict[str, Any]], bool]
) -> int:
    """Sample the contenders until all have ended; the most found `inside` at one sample."""
    sfn, most = cloud.client("stepfunctions"), 0
    deadline = time.monotonic() + DEADLINE_S
    while True:
        listed = executions()
        now_inside = [e["name"] for e in listed if e["status"] == "RUNNING" and inside(e)]
        assert len(now_inside) <= LIMIT, now_inside
        most = max(most, len(now_inside))
        if len(listed) == CONTENDERS and all(e["status"] != "RUNNING" for e in listed):
            return most
        assert time.monotonic() < deadline, [(e["name"], e["status"]) for e in listed]
        sfn.list_state_machines()  # the next sample follows at once; this paces it by one round trip


def entered(cloud: LocalCloud, execution_arn: str) -> list[str]:
    events = cloud.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    return [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]


def critical_section(cloud: LocalCloud, execution_arn: str) -> tuple[Any, Any]:
    """When the execution entered and left UseResource (its history's timestamps)."""
    events = cloud.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    (start,) = [e["timestamp"] for e in events if e["type"] == "WaitStateEntered" and is_critical(e)]
    (end,) = [e["timestamp"] for e in events if e["type"] == "WaitStateExited" and is_critical(e)]
    return start, end


def is_critical(event: dict[str, Any]) -> bool:
    details = event.get("stateEnteredEventDetails") or event.get("stateExitedEventDetails") or {}
    return bool(details.get("name") == "UseResource")


def most_overlapping(intervals: list[tuple[Any, Any]]) -> int:
    """The most intervals open at one moment (an exit at the moment of an entry closes first)."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = open_now = 0
    for _, change in edges:
        open_now += change
        most = max(most, open_now)
    return most


def in_critical_section(cloud: LocalCloud, execution_arn: str) -> bool:
    events = cloud.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    names = [
        (e["type"], (e.get("stateEnteredEventDetails") or e.get("stateExitedEventDetails") or {}).get("name"))
        for e in events
    ]
    return ("WaitStateEntered", "UseResource") in names and ("WaitStateExited", "UseResource") not in names


def test_the_admission_queue_runs_at_most_three_at_once_and_starts_every_request(cloud: LocalCloud) -> None:
    sqs, sfn = cloud.client("sqs"), cloud.client("stepfunctions")
    machine = cloud.stack.outputs["AdmittedWorkflowArn"]
    batch = uuid.uuid4().hex[:8]
    names = [f"req-{batch}-{i:02d}" for i in range(CONTENDERS)]
    # Given ten requests queued for two tenants
    for i, name in enumerate(names):
        sqs.send_message(
            QueueUrl=cloud.stack.outputs["AdmissionQueueUrl"],
            MessageBody=json.dumps({"requestId": name, "input": {"seconds": CRITICAL_SECONDS}}),
            MessageGroupId=f"tenant-{i % 2}",
            MessageDeduplicationId=name,
        )

    def ours() -> list[dict[str, Any]]:
        listed = sfn.list_executions(stateMachineArn=machine, maxResults=1000)["executions"]
        return [e for e in listed if e["name"] in names]

    # When the scheduled starter admits them, then at no sample are more than three running, and all succeed
    assert sample_until_all_ended(cloud, ours, lambda e: True) <= LIMIT
    assert {e["status"] for e in ours()} == {"SUCCEEDED"}
    # And each tenant's requests started in the order they were queued
    for tenant in (0, 1):
        started = sorted((e for e in ours() if int(e["name"][-2:]) % 2 == tenant), key=lambda e: e["startDate"])
        assert [e["name"] for e in started] == [n for n in names if int(n[-2:]) % 2 == tenant]
    # And an admitted execution costs only its own transitions (no waiting inside Step Functions)
    assert {len(entered(cloud, e["executionArn"])) for e in ours()} == {2}


def test_the_gate_lets_at_most_three_past_at_once_and_every_contender_through(cloud: LocalCloud) -> None:
    sfn = cloud.client("stepfunctions")
    machine = cloud.stack.outputs["GatedWorkflowArn"]
    # Given ten executions of the gated workflow started at once
    arns = [
        sfn.start_execution(
            stateMachineArn=machine, name=f"c-{uuid.uuid4()}", input=json.dumps({"seconds": CRITICAL_SECONDS})
        )["executionArn"]
        for _ in range(CONTENDERS)
    ]

    def ours() -> list[dict[str, Any]]:
        return [sfn.describe_execution(executionArn=arn) for arn in arns]

    # When they contend for the gate, then at no sample are more than three past it, and all succeed
    assert sample_until_all_ended(cloud, ours, lambda e: in_critical_section(cloud, e["executionArn"])) <= LIMIT
    # And over the whole run, not only at the samples: never more than three critical sections overlapped
    assert most_overlapping([critical_section(cloud, arn) for arn in arns]) <= LIMIT
    assert {e["status"] for e in ours()} == {"SUCCEEDED"}
    # And each contender paid 3 transitions (one ListExecutions) per refused attempt on top of its 5
    for arn in arns:
        states = entered(cloud, arn)
        refused = states.count("WaitAtGate")
        assert len(states) == 5 + 3 * refused and states.count("PassGate") == refused + 1, states
