"""The bounded workflow on the offline cloud: many executions contend for one resource's permits (the callback
semaphore, SemaphorePermits = 3); an invariant checker samples the permit table the whole time. The contention tests
run against both renditions of the workflow: bounded.asl.json (JSONPath) and its JSONata twin."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer

from localcloud.client import SignedClient
from localcloud.cloud import LocalCloud
from tests.workflows.conftest import SPEEDUP

PERMITS = 3  # the template's default SemaphorePermits
WAIT_S = 120.0
DESERIALIZE = TypeDeserializer()
# The stack outputs naming the two renditions: one input, one output, the same permits.
BOTH_RENDITIONS = pytest.mark.parametrize(
    "machine", ["BoundedWorkflowArn", "BoundedJsonataWorkflowArn"], ids=["jsonpath", "jsonata"]
)


def start(cloud: LocalCloud, resource: str, seconds: int, machine: str) -> str:
    started = cloud.client("stepfunctions").start_execution(
        stateMachineArn=cloud.stack.outputs[machine], input=json.dumps({"resource": resource, "seconds": seconds})
    )
    return str(started["executionArn"])


def entries(cloud: LocalCloud, resource: str) -> list[dict[str, Any]]:
    """The resource's items in the permit table: its head (`#`, `held`), its holders and its waiters."""
    items = cloud.client("dynamodb").query(
        TableName=cloud.stack.outputs["PermitTableName"],
        KeyConditionExpression="#r = :r",
        ExpressionAttributeNames={"#r": "resource"},
        ExpressionAttributeValues={":r": {"S": resource}},
        ConsistentRead=True,
    )["Items"]
    return [{name: DESERIALIZE.deserialize(value) for name, value in item.items()} for item in items]


def wait_for_entries(cloud: LocalCloud, resource: str, kinds: list[str]) -> None:
    """Until the resource's holders and waiters are `kinds` (sorted: "holder", ..., "waiter", ...)."""
    deadline = time.monotonic() + WAIT_S
    while sorted(item["entry"].split("#")[0] for item in entries(cloud, resource) if "executionArn" in item) != kinds:
        assert time.monotonic() < deadline, entries(cloud, resource)
        time.sleep(0.05)


def ended(cloud: LocalCloud, arn: str) -> dict[str, Any] | None:
    described = cloud.client("stepfunctions").describe_execution(executionArn=arn)
    return None if described["status"] == "RUNNING" else dict(described)


def grants(cloud: LocalCloud, arn: str) -> list[str]:
    """When the execution's AcquirePermit task got its permit (grantedAt of the permit), from its history."""
    events = cloud.client("stepfunctions").get_execution_history(executionArn=arn, maxResults=1000)["events"]
    return [
        json.loads(e["taskSucceededEventDetails"]["output"])["grantedAt"]
        for e in events
        if e["type"] == "TaskSucceeded" and "grantedAt" in e["taskSucceededEventDetails"]["output"]
    ]


@contextmanager
def invariant(cloud: LocalCloud, resource: str) -> Iterator[dict[str, int]]:
    """Sample the resource's permits until the block ends: the most holders seen at once, and the samples taken."""
    seen = {"max_holders": 0, "max_held": 0, "samples": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            items = entries(cloud, resource)
            holders = sum(item["entry"].startswith("holder#") for item in items)
            held = next((int(item["held"]) for item in items if item["entry"] == "#"), 0)
            seen["max_holders"] = max(seen["max_holders"], holders)
            seen["max_held"] = max(seen["max_held"], held)
            seen["samples"] += 1

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield seen
    finally:
        done.set()
        sampler.join()


def wait_all_ended(cloud: LocalCloud, arns: list[str]) -> dict[str, dict[str, Any]]:
    deadline, ends = time.monotonic() + WAIT_S, {}
    while len(ends) < len(arns):
        assert time.monotonic() < deadline, f"{len(arns) - len(ends)} executions still RUNNING after {WAIT_S} s"
        for arn in arns:
            if arn not in ends and (end := ended(cloud, arn)) is not None:
                ends[arn] = end
        time.sleep(0.05)
    return ends


@BOTH_RENDITIONS
def test_thirty_contenders_never_more_than_three_holders_admitted_in_arrival_order(
    cloud: LocalCloud, machine: str
) -> None:
    resource = f"partner-api-{uuid.uuid4().hex[:8]}"
    arns: list[str] = []
    with invariant(cloud, resource) as seen:
        for n in range(30):  # each queued (or granted) before the next starts: arrival order is start order
            arn = start(cloud, resource, seconds=(n % 4) * SPEEDUP // 4, machine=machine)  # 0 to 45 simulated s
            arns.append(arn)
            deadline = time.monotonic() + WAIT_S
            # seen in the table, or already through (a short section can end before the table is looked at)
            while not any(item.get("executionArn") == arn for item in entries(cloud, resource)) and not ended(
                cloud, arn
            ):
                assert time.monotonic() < deadline, "a contender never reached the permit table"
                time.sleep(0.01)
        ends = wait_all_ended(cloud, arns)

    assert {end["status"] for end in ends.values()} == {"SUCCEEDED"}
    assert all(json.loads(end["output"]) == {"resource": resource, "released": True} for end in ends.values())
    assert seen["samples"] > 30
    assert seen["max_holders"] == PERMITS  # the limit is reached and never passed
    assert seen["max_held"] <= PERMITS
    admitted = [grants(cloud, arn)[0] for arn in arns]
    assert admitted == sorted(admitted), "permits were not granted in arrival order"
    assert entries(cloud, resource) == [{"resource": resource, "entry": "#", "held": 0}]  # nothing is left behind


@BOTH_RENDITIONS
def test_a_holder_stopped_in_its_critical_section_hands_its_permit_on(cloud: LocalCloud, machine: str) -> None:
    resource = f"database-{uuid.uuid4().hex[:8]}"
    holders = [start(cloud, resource, seconds=3600, machine=machine) for _ in range(PERMITS)]  # an hour each
    # The waiter starts once every permit is held: executions started together acquire in any order
    wait_for_entries(cloud, resource, ["holder"] * PERMITS)
    waiter = start(cloud, resource, seconds=0, machine=machine)
    wait_for_entries(cloud, resource, [*["holder"] * PERMITS, "waiter"])

    stopped = time.monotonic()
    cloud.client("stepfunctions").stop_execution(executionArn=holders[0])

    end = wait_all_ended(cloud, [waiter])[waiter]
    assert end["status"] == "SUCCEEDED"
    recovered = time.monotonic() - stopped
    assert recovered < WAIT_S
    holding = {item["executionArn"] for item in entries(cloud, resource) if item["entry"].startswith("holder#")}
    assert holding == set(holders[1:])
    for arn in holders[1:]:
        cloud.client("stepfunctions").stop_execution(executionArn=arn)


def test_a_bounded_task_through_the_api(cloud: LocalCloud) -> None:
    assert cloud.http is not None
    api = SignedClient(cloud.http.url, cloud.config.credentials[0], cloud.config.region)

    submitted = api.request("POST", "/task", {"type": "bounded", "input": {"resource": "partner-api", "seconds": 1}})
    assert submitted.status_code == 202, submitted.text

    deadline = time.monotonic() + WAIT_S
    while (task := api.request("GET", submitted.headers["Location"]).json())["status"] not in {"SUCCEEDED", "FAILED"}:
        assert time.monotonic() < deadline, task
        time.sleep(0.1)
    assert task["status"] == "SUCCEEDED", task
    result = api.request("GET", task["resultUrl"]).json()
    assert result == {"resource": "partner-api", "released": True}


def test_bad_bounded_input_is_refused_at_the_api(cloud: LocalCloud) -> None:
    assert cloud.http is not None
    api = SignedClient(cloud.http.url, cloud.config.credentials[0], cloud.config.region)

    for bad in ({"resource": "no spaces allowed", "seconds": 1}, {"resource": "ok", "seconds": -1}, {"seconds": 1}):
        answer = api.request("POST", "/task", {"type": "bounded", "input": bad})
        assert answer.status_code == 422, answer.text
        assert answer.json()["message"].startswith("invalid request")
