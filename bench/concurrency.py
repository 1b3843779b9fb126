"""Concurrency control, the three approaches side by side on the offline cloud (docs/concurrency.md).

    python -m bench.concurrency      # or: make bench-concurrency

1. Cost: the same load for each approach (contenders started at once, 3 at a time, each holding the resource for
   30 s): state transitions per contender (and how many of them are polling), Lambda invocations, ListExecutions
   and DynamoDB calls, and how long the whole load took on the cloud's clock.
2. Safety of the callback semaphore: 200 contenders for 5 permits, random critical sections, random holders aborted,
   some of them with their status change event lost on purpose (the release rule disabled until the permit is back):
   an invariant checker samples the permit table throughout; every contender must end; the time from a lost event
   to the permit being recovered by the sweeper is reported.
Results: .aws-sam/bench/concurrency.json, and the tables printed (copied into docs/concurrency.md by hand).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from moto.dynamodb.responses import DynamoHandler
from moto.stepfunctions.responses import StepFunctionResponse

from bench.bench import counted, history, invocations, wait_ended
from localcloud.client import route_logs
from localcloud.cloud import CloudConfig, LocalCloud

ROOT = Path(__file__).resolve().parents[1]
SPEEDUP = 60.0
LIMIT = 3
SECTION_SECONDS = 30
DYNAMODB_CALLS = ("put_item", "get_item", "update_item", "delete_item", "query", "scan", "transact_write_items")


HARNESS_LISTS: Counter[str] = Counter()  # the harness's own ListExecutions calls, not counted as the approach's


def executions_of(cloud: LocalCloud, machine: str) -> list[str]:
    arns = []
    for page in cloud.client("stepfunctions").get_paginator("list_executions").paginate(stateMachineArn=machine):
        HARNESS_LISTS["list_executions"] += 1
        arns += [e["executionArn"] for e in page["executions"]]
    return arns


# --- the three ways to start the same load ----------------------------------------------------------------------
def admission(cloud: LocalCloud, contenders: int) -> list[str]:
    machine = cloud.stack.outputs["AdmittedWorkflowArn"]
    before = set(executions_of(cloud, machine))
    for _ in range(contenders):
        request_id = uuid.uuid4().hex
        cloud.client("sqs").send_message(
            QueueUrl=cloud.stack.outputs["AdmissionQueueUrl"],
            MessageBody=json.dumps({"requestId": request_id, "input": {"seconds": SECTION_SECONDS}}),
            MessageGroupId="bench",
            MessageDeduplicationId=request_id,
        )
    deadline = time.monotonic() + 600
    while len(arns := [a for a in executions_of(cloud, machine) if a not in before]) < contenders:
        assert time.monotonic() < deadline, "the starter did not start every request"
        time.sleep(0.1)
    return arns


def started(cloud: LocalCloud, output: str, contenders: int, input_: dict[str, Any]) -> list[str]:
    sfn, machine = cloud.client("stepfunctions"), cloud.stack.outputs[output]
    return [
        sfn.start_execution(stateMachineArn=machine, input=json.dumps(input_))["executionArn"]
        for _ in range(contenders)
    ]


def gate(cloud: LocalCloud, contenders: int) -> list[str]:
    return started(cloud, "GatedWorkflowArn", contenders, {"seconds": SECTION_SECONDS})


def semaphore(cloud: LocalCloud, contenders: int) -> list[str]:
    resource = f"bench-{uuid.uuid4().hex[:8]}"
    return started(cloud, "BoundedWorkflowArn", contenders, {"resource": resource, "seconds": SECTION_SECONDS})


POLLING_STATES = {"PassGate", "GateOpen", "WaitAtGate"}  # the gate's loop: entered again on every refusal


def cost(cloud: LocalCloud, name: str, run: Callable[[LocalCloud, int], list[str]], contenders: int) -> dict[str, Any]:
    invoked, harness_lists = invocations(cloud), HARNESS_LISTS["list_executions"]
    began = cloud.clock.now()
    with (
        counted(DynamoHandler, DYNAMODB_CALLS) as dynamodb,
        counted(StepFunctionResponse, ("list_executions",)) as sfn,
    ):
        arns = run(cloud, contenders)
        ends = [wait_ended(cloud, arn, timeout=600) for arn in arns]
    took = (cloud.clock.now() - began).total_seconds()
    transitions = []
    polling = []
    for arn in arns:
        entered = [e for e in history(cloud, arn) if e["type"].endswith("StateEntered")]
        transitions.append(len(entered))
        names = Counter(e["stateEnteredEventDetails"]["name"] for e in entered)
        polling.append(sum(count - 1 for state, count in names.items() if state in POLLING_STATES))
    return {
        "approach": name,
        "contenders": contenders,
        "succeeded": sum(end["status"] == "SUCCEEDED" for end in ends),
        "transitions_per_contender": {
            "min": min(transitions),
            "mean": round(statistics.mean(transitions), 1),
            "max": max(transitions),
        },
        "polling_transitions_per_contender": round(statistics.mean(polling), 1),
        "lambda_invocations_per_contender": round((invocations(cloud) - invoked) / contenders, 1),
        "list_executions_calls": sfn["list_executions"] - (HARNESS_LISTS["list_executions"] - harness_lists),
        "dynamodb_calls_per_contender": round(sum(dynamodb.values()) / contenders, 1),
        "dynamodb_calls": dict(dynamodb),
        "simulated_seconds": round(took),
        "ideal_seconds": contenders * SECTION_SECONDS // LIMIT,
    }


# --- safety of the callback semaphore ---------------------------------------------------------------------------
def permit_items(cloud: LocalCloud, resource: str) -> list[dict[str, Any]]:
    return list(
        cloud.client("dynamodb").query(
            TableName=cloud.stack.outputs["PermitTableName"],
            KeyConditionExpression="#r = :r",
            ExpressionAttributeNames={"#r": "resource"},
            ExpressionAttributeValues={":r": {"S": resource}},
            ConsistentRead=True,
        )["Items"]
    )


def holders(cloud: LocalCloud, resource: str) -> set[str]:
    return {i["executionArn"]["S"] for i in permit_items(cloud, resource) if i["entry"]["S"].startswith("holder#")}


def safety(cloud: LocalCloud, contenders: int, permits: int, aborts: int, lost: int, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    resource = f"safety-{uuid.uuid4().hex[:8]}"
    sfn, events = cloud.client("stepfunctions"), cloud.client("events")
    machine = cloud.stack.outputs["BoundedWorkflowArn"]
    release_rule = next(
        r.physical_id for r in cloud.stack.of_type("AWS::Events::Rule") if "ReleasePermitFunction" in r.logical_id
    )
    seen = {"max_holders": 0, "samples": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.01):  # about as often as it can without starving the cloud it samples
            seen["max_holders"] = max(seen["max_holders"], len(holders(cloud, resource)))
            seen["samples"] += 1

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    arns = [
        sfn.start_execution(
            stateMachineArn=machine, input=json.dumps({"resource": resource, "seconds": rng.randint(0, 120)})
        )["executionArn"]
        for _ in range(contenders)
    ]
    recoveries = []
    aborted: set[str] = set()
    for n in range(aborts):
        candidates = sorted(holders(cloud, resource) - aborted)
        if not candidates:
            time.sleep(0.2)
            continue
        victim = rng.choice(candidates)
        aborted.add(victim)
        if n < lost:  # its status change event is lost: the rule is off while it is stopped
            events.disable_rule(Name=release_rule)
            sfn.stop_execution(executionArn=victim)
            stopped = time.monotonic()
            wait_ended(cloud, victim)
            while victim in holders(cloud, resource):  # only the sweeper can give it back now
                time.sleep(0.05)
            recoveries.append((time.monotonic() - stopped) * SPEEDUP)  # simulated seconds, as the sweep interval
            events.enable_rule(Name=release_rule)
        else:
            sfn.stop_execution(executionArn=victim)
        time.sleep(rng.uniform(0.1, 0.5))
    ends = [wait_ended(cloud, arn, timeout=900) for arn in arns]
    done.set()
    sampler.join()
    statuses = Counter(end["status"] for end in ends)
    return {
        "contenders": contenders,
        "permits": permits,
        "max_holders_seen": seen["max_holders"],
        "samples": seen["samples"],
        "ended": dict(statuses),
        "errors": dict(
            Counter(f"{end.get('error')}: {end.get('cause', '')[:300]}" for end in ends if end["status"] == "FAILED")
        ),
        "stuck": statuses.get("RUNNING", 0),
        "aborted": len(aborted),
        "lost_status_events": len(recoveries),
        "recovery_simulated_seconds": [round(r) for r in recoveries],
        "left_in_table": [  # all but the resource's head: must be none
            {"entry": i["entry"]["S"].split("#")[0], "status": wait_ended(cloud, i["executionArn"]["S"])["status"]}
            for i in permit_items(cloud, resource)
            if "executionArn" in i
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.concurrency", description=__doc__)
    parser.add_argument("--contenders", type=int, default=20)
    parser.add_argument("--safety", type=int, default=200)
    parser.add_argument("--safety-only", action="store_true")
    args = parser.parse_args(argv)
    out = ROOT / ".aws-sam" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    route_logs(out / "concurrency-functions.log")
    parameters = {
        "LogLevel": "WARN",
        "AdmissionMaxRunning": str(LIMIT),
        "AdmissionSchedule": "rate(1 minute)",
        "GateLimit": str(LIMIT),
        "GateWaitSeconds": "60",
        "GateMaxAttempts": "1000",
        "SemaphorePermits": str(LIMIT),
        "ReconcileSchedule": "rate(7 days)",
    }
    results: dict[str, Any] = {}
    config = CloudConfig(
        template=ROOT / "template.yaml",
        stack_name="bench-concurrency",
        aws_port=0,
        http_port=0,
        speedup=SPEEDUP,
        parameters=parameters,
        async_retry_delay_seconds=0.1,
        function_log=out / "concurrency-functions.log",
    )
    if not args.safety_only:
        with LocalCloud(config) as cloud:
            results["cost"] = [
                cost(cloud, name, run, args.contenders)
                for name, run in (("admission queue", admission), ("gate", gate), ("callback semaphore", semaphore))
            ]
        for row in results["cost"]:
            print(json.dumps(row), flush=True)
    # 200 contenders for 5 permits: the last waits over an hour (simulated), longer than the default wait; and a
    # sweep heartbeats ~200 waiters one call after another, which takes seconds of real time, minutes at 60x: the
    # default 15-minute heartbeat would be 15 real seconds here
    safety_parameters = {
        **parameters,
        "SemaphorePermits": "5",
        "SemaphoreWaitSeconds": "86400",
        "SemaphoreHeartbeatSeconds": "3600",
    }
    safety_config = replace(config, stack_name="bench-safety", parameters=safety_parameters)
    with LocalCloud(safety_config) as cloud:
        results["safety"] = safety(cloud, contenders=args.safety, permits=5, aborts=20, lost=5)
        print(json.dumps(results["safety"]), flush=True)
    (out / "concurrency.json").write_text(json.dumps(results, indent=2))
    safe = results["safety"]
    return int(safe["max_holders_seen"] > safe["permits"] or safe["stuck"] > 0 or bool(safe["left_in_table"]))


if __name__ == "__main__":
    raise SystemExit(main())
