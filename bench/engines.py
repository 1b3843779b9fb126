"""The two engines of the documents workflow, side by side on the offline cloud: what one task costs in requests.

    python -m bench.engines --tasks 20     # or: make bench-engines TASKS=20

Each engine runs TASKS documents tasks together (one document each; Translate and Macie finish after a simulated
minute): the Step Functions workflow (DocumentsWorkflow, StartExecution) and the durable function
(DocumentsDurableFunction, an asynchronous Invoke named like a task). Both wait for their jobs through the same token
store, resume function and completion events. Counted per task, every caller's:
- state transitions (Step Functions bills each state entered), from each execution's history;
- Lambda invocations per function, from the function log (a durable function is invoked once per replay);
- durable operations (the steps, callbacks and child contexts a durable execution checkpoints, which Lambda bills),
  from each durable execution's history, and the CheckpointDurableExecution calls that carried them;
- DynamoDB reads and writes (the token store and the tasks' tables), at moto's backend.
The scheduled functions are off (their runs are no task's); every job's event arrives. Priced with bench.bench's
PRICES: transitions, durable operations, Lambda requests and the GB-seconds the REPORT lines give (offline durations:
Lambda's differ), DynamoDB requests. Written to .aws-sam/bench/engines.json; docs/callback.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from moto.dynamodb.models import DynamoDBBackend

from bench.bench import LAMBDA_GB, PRICES, counted, history, machine
from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.durable.api import LambdaApi
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".aws-sam" / "bench" / "engines.json"
SPEEDUP = 60.0
# An established account (Macie on). Every scheduled function off: their runs are no task's.
PARAMETERS = {
    name: "rate(1 day)"
    for name in ("ReconcileSchedule", "AdmissionSchedule", "SemaphoreSweepSchedule", "ExportSchedule")
} | {"LogLevel": "WARNING"}


def invocations_by_function(cloud: LocalCloud) -> tuple[Counter[str], float]:
    """START lines of the function log by function (`[<function>] START RequestId: ...`), and the milliseconds its
    REPORT lines give (Duration, offline on this machine: Lambda bills the same measure, at its own speed)."""
    lines = cloud.function_log.read_text().splitlines()
    started = Counter(line.split("]", 1)[0].lstrip("[") for line in lines if " START RequestId: " in line)
    milliseconds = sum(
        float(line.split("\tDuration: ", 1)[1].split(" ms", 1)[0]) for line in lines if "\tDuration: " in line
    )
    return started, milliseconds


def documents(cloud: LocalCloud, tasks: int) -> list[dict[str, Any]]:
    """`tasks` requests, each over its own folder holding one document."""
    bucket, requests = cloud.stack.outputs["DocumentBucketName"], []
    for _ in range(tasks):
        folder = uuid.uuid4().hex
        cloud.client("s3").put_object(Bucket=bucket, Key=f"{folder}/in/a.txt", Body=b"Write to jane@example.com.")
        requests.append(
            {"inputPrefix": f"{folder}/in/", "outputPrefix": f"{folder}/out/", "sourceLanguage": "en",
             "targetLanguages": ["de"]}
        )  # fmt: skip
    return requests


def run_step_functions(cloud: LocalCloud, request: dict[str, Any]) -> tuple[float, int]:
    """(seconds to the end, state transitions) of one execution."""
    sfn, started = cloud.client("stepfunctions"), time.monotonic()
    arn = sfn.start_execution(stateMachineArn=cloud.stack.outputs["DocumentsWorkflowArn"], input=json.dumps(request))[
        "executionArn"
    ]
    while (status := sfn.describe_execution(executionArn=arn)["status"]) == "RUNNING":
        time.sleep(0.05)
    assert status == "SUCCEEDED", (arn, status)
    return time.monotonic() - started, sum(e["type"].endswith("StateEntered") for e in history(cloud, arn))


def run_durable(cloud: LocalCloud, request: dict[str, Any]) -> tuple[float, int]:
    """(seconds to the end, durable operations) of one execution."""
    lam, started = cloud.client("lambda"), time.monotonic()
    invoked = lam.invoke(
        FunctionName=f"{cloud.stack.name}-documents-durable",
        Qualifier="$LATEST",
        InvocationType="Event",
        DurableExecutionName=uuid.uuid4().hex,
        Payload=json.dumps(request).encode(),
    )
    arn = invoked["DurableExecutionArn"]
    while (status := lam.get_durable_execution(DurableExecutionArn=arn)["Status"]) == "RUNNING":
        time.sleep(0.05)
    assert status == "SUCCEEDED", (arn, status)
    events = lam.get_durable_execution_history(DurableExecutionArn=arn)["Events"]
    operations = {e["Id"] for e in events if e.get("Id") and e["EventType"] != "ExecutionStarted"}
    return time.monotonic() - started, len(operations)


def measure(cloud: LocalCloud, engine: str, tasks: int) -> dict[str, Any]:
    """Run `tasks` executions of the engine together; what one cost, on average, and how long each took."""
    requests = documents(cloud, tasks)
    run = run_step_functions if engine == "step-functions" else run_durable
    before, before_ms = invocations_by_function(cloud)
    with (
        counted(DynamoDBBackend, ("put_item", "get_item", "update_item", "delete_item", "query")) as ddb,
        counted(LambdaApi, ("CheckpointDurableExecution", "GetDurableExecutionState")) as durable,
        ThreadPoolExecutor(max_workers=tasks) as pool,
    ):
        ran = list(pool.map(lambda request: run(cloud, request), requests))
        cloud.runtime.drain()
    after, after_ms = invocations_by_function(cloud)
    invoked, gb_seconds = after - before, (after_ms - before_ms) / 1000 * LAMBDA_GB
    per_task = {
        "seconds_p50": round(statistics.median(seconds for seconds, _ in ran), 2),
        "seconds_max": round(max(seconds for seconds, _ in ran), 2),
        "transitions" if engine == "step-functions" else "durable_operations": sum(n for _, n in ran) / tasks,
        "lambda_invocations": {function: count / tasks for function, count in sorted(invoked.items())},
        "lambda_gb_seconds": round(gb_seconds / tasks, 4),
        "checkpoint_calls": durable["CheckpointDurableExecution"] / tasks,
        "dynamodb_writes": (ddb["put_item"] + ddb["update_item"] + ddb["delete_item"]) / tasks,
        "dynamodb_reads": (ddb["get_item"] + ddb["query"]) / tasks,
    }
    requests_per_task = sum(per_task["lambda_invocations"].values())
    per_task["usd_per_1000_tasks"] = round(
        1000
        * (
            per_task.get("transitions", 0) * PRICES["sfn_standard_per_transition"]
            + per_task.get("durable_operations", 0) * PRICES["lambda_durable_per_operation"]
            + requests_per_task * PRICES["lambda_per_request"]
            + per_task["lambda_gb_seconds"] * PRICES["lambda_per_gb_second"]
            + per_task["dynamodb_writes"] * PRICES["dynamodb_per_write_request"]
            + per_task["dynamodb_reads"] * PRICES["dynamodb_per_read_request"]
        ),
        4,
    )
    return {"engine": engine, "tasks": tasks, **per_task}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tasks", type=int, default=20, help="documents tasks per engine, run together")
    args = parser.parse_args(argv)
    config = CloudConfig(
        template=ROOT / "template.yaml", region="us-east-1", aws_port=0, http_port=0, speedup=SPEEDUP,
        parameters=PARAMETERS, account="established",
    )  # fmt: skip
    with LocalCloud(config) as cloud:
        cloud.add_simulator(TranslateSimulator(cloud.config.region, delay_seconds=60, clock=cloud.clock))
        cloud.add_simulator(MacieSimulator(cloud.config.region, delay_seconds=60, clock=cloud.clock))
        measure(cloud, "durable", 1)  # every function warm once, so neither engine pays the other's cold starts
        measure(cloud, "step-functions", 1)
        rows = [measure(cloud, engine, args.tasks) for engine in ("step-functions", "durable")]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"machine": machine(), "prices": PRICES, "engines": rows}, indent=2))
    for row in rows:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
