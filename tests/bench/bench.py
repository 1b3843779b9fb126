"""`make bench`: the design's numbers, measured on the offline cloud in one run.

    python -m tests.bench.bench [--sizes 500,1000,2000,5000] [--quick] [--p1-only]

P1  state transitions, Lambda invocations and service calls per async job: callback vs a polling loop (Wait 30 s ->
    DescribeTextTranslationJob -> Choice) on the same engine, for jobs of 1, 15 and 60 minutes (simulated time);
P2  resume latency (completion event put -> the waiting task closed), p50/p95/p99, sequential and 20 / 100 in flight;
P3  cold start of the packaged handler of every function the bench deploys (the export is off there) on the clean
    runtime interpreter / a bare `import boto3` (medians of runs that alternate the two), with the top import costs
    of the slowest;
P4  N callback jobs at once: wall time, lost, duplicated, peak RSS, peak threads, time(2N)/time(N);
P5  cost per 1,000 jobs on AWS from the P1 counts and the public prices in PRICES;
HTTP 200 signed POST /task (documents tasks) from 20 clients at once: POST latency, tasks ended, the serving
    process's memory before and after.
Results: .aws-sam/bench/results.json and docs/performance.md. A report, not a test: tests assert correctness only.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from moto.dynamodb.models import DynamoDBBackend

from localcloud.account import ACCOUNT_ID
from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.demo import SignedClient, route_logs, seed_documents
from localcloud.lambdas import FunctionSpec, runtime_python
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator
from tests.bench.callbacks import SEGMENTS, JobsResult, resume_segments, run_jobs, waiting_machine

ROOT = Path(__file__).resolve().parents[2]
# Public on-demand list prices, us-east-1, as read from the AWS pricing pages on 2026-11-23 (check before quoting).
PRICES = {
    "read_on": "2026-11-23",
    "sfn_standard_per_transition": 0.025 / 1000,
    "lambda_per_request": 0.20 / 1_000_000,
    "lambda_per_gb_second": 0.0000166667,
    "dynamodb_per_write_request": 0.625 / 1_000_000,
    "dynamodb_per_read_request": 0.125 / 1_000_000,
    "eventbridge_aws_service_event": 0.0,  # events from AWS services to the default bus are free
    "translate_describe_call": 0.0,  # API calls that start no job are not billed
}
LAMBDA_GB = 0.25  # the template's MemorySize 256
POLL_SECONDS = 30
# P1's own cloud runs its clock this much faster than real time: a 60-minute job takes a minute. Each poll also
# spends ~15 ms of real time in the engine, ~1 simulated second at this speed, so a job gets ~3 % fewer polls than
# on AWS, where that overhead is nothing beside the 30-second Wait.
SPEEDUP = 60.0


# --- counting ----------------------------------------------------------------------------------------------------
@contextmanager
def counted(owner: type, names: tuple[str, ...]) -> Iterator[Counter[str]]:
    """Count calls to `owner`'s methods `names` (every caller's: the functions' workers reach the same backend)."""
    counts: Counter[str] = Counter()
    originals = {name: getattr(owner, name) for name in names}

    def counting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def operation(self: Any, *args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return original(self, *args, **kwargs)

        return operation

    for name, original in originals.items():
        setattr(owner, name, counting(name, original))
    try:
        yield counts
    finally:
        for name, original in originals.items():
            setattr(owner, name, original)


def history(cloud: LocalCloud, arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
    while True:
        page = cloud.client("stepfunctions").get_execution_history(**kwargs)
        events += page["events"]
        if not page.get("nextToken"):
            return events
        kwargs["nextToken"] = page["nextToken"]


def wait_ended(cloud: LocalCloud, arn: str, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        described: dict[str, Any] = cloud.client("stepfunctions").describe_execution(executionArn=arn)
        if described["status"] != "RUNNING" or time.monotonic() > deadline:
            return described
        time.sleep(0.02)


# --- P1 ----------------------------------------------------------------------------------------------------------
def polling_machine(cloud: LocalCloud) -> str:
    definition = {
        "StartAt": "Wait30",
        "States": {
            "Wait30": {"Type": "Wait", "SecondsPath": "$.pollSeconds", "Next": "Describe"},
            "Describe": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:translate:describeTextTranslationJob",
                "Parameters": {"JobId.$": "$.jobId"},
                "ResultSelector": {"status.$": "$.TextTranslationJobProperties.JobStatus"},
                "ResultPath": "$.job",
                "Next": "Done?",
            },
            "Done?": {
                "Type": "Choice",
                "Choices": [
                    {"Variable": "$.job.status", "StringEquals": "COMPLETED", "Next": "Done"},
                    {"Variable": "$.job.status", "StringEquals": "FAILED", "Next": "Failed"},
                ],
                "Default": "Wait30",
            },
            "Done": {"Type": "Succeed"},
            "Failed": {"Type": "Fail", "Error": "Translate.FAILED"},
        },
    }
    created = cloud.client("stepfunctions").create_state_machine(
        name=f"callback-kit-bench-polling-{uuid.uuid4().hex[:6]}",
        definition=json.dumps(definition),
        roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/bench",
    )
    return str(created["stateMachineArn"])


def start_translation(cloud: LocalCloud) -> str:
    bucket = cloud.stack.outputs["DocumentBucketName"]
    cloud.client("s3").put_object(Bucket=bucket, Key="bench/in/a.txt", Body=b"benchmark")
    job = cloud.client("translate").start_text_translation_job(
        InputDataConfig={"S3Uri": f"s3://{bucket}/bench/in/", "ContentType": "text/plain"},
        OutputDataConfig={"S3Uri": f"s3://{bucket}/bench/out/"},
        DataAccessRoleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/translate",
        SourceLanguageCode="en",
        TargetLanguageCodes=["es"],
        ClientToken=uuid.uuid4().hex,
    )
    return str(job["JobId"])


def p1_transitions(cloud: LocalCloud) -> list[dict[str, Any]]:
    """Both variants run each job length for real on the cloud's clock (SPEEDUP), the polling loop's Wait at its
    AWS value, 30 s. The schedules are off in P1's cloud: the scheduled functions' invocations are not the job's."""
    callback, polling = waiting_machine(cloud, timeout_seconds=2 * 3600), polling_machine(cloud)
    sfn = cloud.client("stepfunctions")

    def run(machine: str, minutes: int) -> tuple[list[dict[str, Any]], Counter[str], int]:
        cloud.add_simulator(TranslateSimulator(cloud.config.region, delay_seconds=minutes * 60, clock=cloud.clock))
        job_id = start_translation(cloud)
        invocations_before = invocations(cloud)
        with counted(DynamoDBBackend, ("put_item", "get_item", "update_item", "delete_item")) as ddb:
            arn = sfn.start_execution(
                stateMachineArn=machine, input=json.dumps({"jobId": job_id, "pollSeconds": POLL_SECONDS})
            )["executionArn"]
            described = wait_ended(cloud, arn)
            cloud.runtime.drain()
        assert described["status"] == "SUCCEEDED", described
        return history(cloud, arn), ddb, invocations(cloud) - invocations_before

    def entered(events: list[dict[str, Any]]) -> Counter[str]:
        return Counter(e["stateEnteredEventDetails"]["name"] for e in events if e["type"].endswith("StateEntered"))

    rows = []
    for minutes in (1, 15, 60):
        events, ddb, invoked = run(callback, minutes)
        callback_row = {
            "transitions": sum(entered(events).values()),
            "lambda_invocations": invoked,
            "dynamodb_writes": ddb["put_item"] + ddb["update_item"] + ddb["delete_item"],
            "dynamodb_reads": ddb["get_item"],
            "events": 1,
        }
        events, ddb, invoked = run(polling, minutes)
        states = entered(events)
        polling_row = {
            "transitions": sum(states.values()),
            "lambda_invocations": invoked,
            "describe_calls": states["Describe"],
            "dynamodb_writes": ddb["put_item"] + ddb["update_item"] + ddb["delete_item"],
            "dynamodb_reads": ddb["get_item"],
        }
        rows.append(
            {
                "job_minutes": minutes,
                "callback": callback_row,
                "polling": polling_row,
                "transitions_ratio_polling_to_callback": round(
                    polling_row["transitions"] / callback_row["transitions"]
                ),
            }
        )
    return rows


def invocations(cloud: LocalCloud) -> int:
    """Invocations so far, from the START lines of the function log."""
    return sum(" START RequestId: " in line for line in cloud.function_log.read_text().splitlines())


# --- P2 ----------------------------------------------------------------------------------------------------------
def p2_latency(cloud: LocalCloud, jobs: int, in_flight: int) -> dict[str, Any]:
    """Completion event put -> the waiting task closed (TaskSucceeded in its history), for jobs whose token was
    registered before their completion came (each job lasts 1.5-2 s, so nearly all are)."""
    run_jobs(cloud, jobs=min(jobs, in_flight), in_flight=in_flight, early=0.0)  # warm: every environment started
    result = JobsResult(jobs=jobs, in_flight=in_flight, seconds=0.0)
    with resume_segments(cloud, result) as segments:
        result = run_jobs(cloud, jobs=jobs, in_flight=in_flight, early=0.0, job_seconds=(1.5, 2.0), result=result)
    return {
        "jobs": jobs,
        "in_flight": in_flight,
        "measured": len(result.resume_ms),
        "lost": result.lost,
        "p50_ms": result.percentile(0.5),
        "p95_ms": result.percentile(0.95),
        "p99_ms": result.percentile(0.99),
        "segments_ms": {
            name: {"p50": _percentile(times, 0.5), "p99": _percentile(times, 0.99)} for name, times in segments.items()
        },
    }


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 1) if ordered else float("nan")


# --- P3 ----------------------------------------------------------------------------------------------------------
# What a handler stands on before a line of its own runs (house-style.md's libraries), imported from a function's
# package like the handlers: the floor under their ratios.
_HOUSE = (
    "import boto3\nfrom aws_lambda_powertools import Logger, Metrics\nfrom pydantic import BaseModel\n"
    "Logger(); Metrics()\nclass Event(BaseModel):\n    id: str\n"
)
P3_FLOORS = {
    "boto3 + Powertools Logger, Metrics + one pydantic model": _HOUSE,
    "that + Powertools' HTTP resolver with validation (TaskApi's)": _HOUSE
    + "from aws_lambda_powertools.event_handler import APIGatewayHttpResolver\n"
    + "APIGatewayHttpResolver(enable_validation=True)\n",
}


def p3_cold_starts(cloud: LocalCloud, runs: int) -> dict[str, Any]:
    python = str(runtime_python())
    build = ROOT / ".aws-sam" / "build"

    environments: dict[str, dict[str, str]] = {}  # logical ID -> the process environment Lambda gives it

    def once(code: str, cwd: Path, env: dict[str, str]) -> float:
        started = time.perf_counter()
        subprocess.run([python, "-I", "-c", code], cwd=cwd, check=True, env=env)
        return (time.perf_counter() - started) * 1000

    bare: list[float] = []  # every `import boto3`, for the figure in the title

    def versus_boto3(code: str, cwd: Path, env: dict[str, str]) -> dict[str, float]:
        """`code`'s median time and its ratio to a bare `import boto3`: the two alternate, so a change in the
        machine's load falls on both sides of the ratio."""
        boto3_ms, code_ms = [], []
        for _ in range(runs):
            boto3_ms.append(once("import boto3", build, {"AWS_DEFAULT_REGION": cloud.config.region}))
            code_ms.append(once(f"import sys; sys.path.insert(0, '.')\n{code}", cwd, env))
        bare.extend(boto3_ms)
        ms = statistics.median(code_ms)
        return {"ms": round(ms), "vs_boto3": round(ms / statistics.median(boto3_ms), 2)}

    rows = {}
    for resource_ in cloud.stack.of_type("AWS::Lambda::Function"):
        handler = resource_.properties["Handler"].rsplit(".", 1)[0]
        code_dir = build / resource_.logical_id
        spec = FunctionSpec.of(cloud.runtime.function(resource_.physical_id), code_dir, {})
        # Lambda's environment matters: Powertools reads it at import (service name, log level, metrics namespace)
        environments[resource_.logical_id] = spec.lambda_environment(cloud.aws_endpoint, cloud.config.region)
        rows[resource_.logical_id] = {
            **versus_boto3(f"import {handler}", code_dir, environments[resource_.logical_id]),
            "module": handler,
        }
    slowest_id, slowest = max(rows.items(), key=lambda item: item[1]["ms"])
    floors = {
        name: versus_boto3(code, build / slowest_id, environments[slowest_id]) for name, code in P3_FLOORS.items()
    }
    trace = subprocess.run(
        [python, "-I", "-X", "importtime", "-c", f"import sys; sys.path.insert(0, '.'); import {slowest['module']}"],
        cwd=build / slowest_id,
        capture_output=True,
        text=True,
        check=True,
        env=environments[slowest_id],
    ).stderr
    top: Counter[str] = Counter()
    for line in trace.splitlines()[1:]:
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2].count(".") == 0 and not parts[2].startswith(" "):
            top[parts[2]] = max(top[parts[2]], int(parts[1]))
    return {
        "boto3_ms": round(statistics.median(bare)),
        "handlers": rows,
        "floors": floors,
        "slowest": slowest["module"],
        "top_imports_us": dict(top.most_common(8)),
    }


# --- P4 ----------------------------------------------------------------------------------------------------------
def p4_scale(cloud: LocalCloud, sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        peak_threads = [threading.active_count()]
        stop = threading.Event()

        def sample(peak: list[int] = peak_threads, stop: threading.Event = stop) -> None:
            while not stop.wait(0.2):
                peak[0] = max(peak[0], threading.active_count())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        cpu_before = cpu_seconds()
        result = run_jobs(cloud, jobs=size, in_flight=min(size, 100), seed=size, job_timeout=600)
        stop.set()
        cpu = [(after - before) * 1000 / size for before, after in zip(cpu_before, cpu_seconds(), strict=True)]
        rows.append(
            {
                **result.as_dict(),
                "seconds": round(result.seconds, 1),
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                "peak_threads": peak_threads[0],
                "cpu_ms_per_job": {"cloud": round(cpu[0], 1), "functions": round(cpu[1], 1)},
            }
        )
    for smaller, larger in itertools.pairwise(rows):
        if larger["jobs"] == 2 * smaller["jobs"]:
            larger["time_ratio_to_half"] = round(larger["seconds"] / smaller["seconds"], 2)
    return rows


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds used so far by this process (the offline cloud) and by its children (the functions' workers)."""
    me, ticks = os.getpid(), os.sysconf("SC_CLK_TCK")
    children = os.times().children_user + os.times().children_system  # workers already gone
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == me:  # ppid
                children += (int(fields[11]) + int(fields[12])) / ticks
    mine = os.times()
    return mine.user + mine.system, children


# --- HTTP --------------------------------------------------------------------------------------------------------
TERMINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "CANCELLED"}


def rss_mb() -> float:
    """This process's resident memory now (the offline cloud serves from it)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        return round(int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def http_load(cloud: LocalCloud, tasks: int, clients: int, timeout: float = 600) -> dict[str, Any]:
    """`tasks` signed POST /task from `clients` clients at once, then each task followed to its end."""
    assert cloud.http is not None, "template.yaml declares no HTTP API"
    region = cloud.config.region
    cloud.add_simulator(TranslateSimulator(region, delay_seconds=1, clock=cloud.clock))
    cloud.add_simulator(MacieSimulator(region, delay_seconds=1, clock=cloud.clock))
    requests = []
    for n in range(tasks):  # each task its own folder of the sample documents, as a user's tasks have
        seed_documents(cloud, f"bench-http/{n}/in/")
        requests.append(
            {
                "type": "documents",
                "input": {
                    "inputPrefix": f"bench-http/{n}/in/",
                    "outputPrefix": f"bench-http/{n}/out/",
                    "sourceLanguage": "en",
                    "targetLanguages": ["de"],
                },
            }
        )
    apis = [SignedClient(cloud.http.url, cloud.config.credentials[0], region) for _ in range(clients)]
    gc.collect()
    before = rss_mb()

    def post(n: int) -> tuple[float, int, str]:
        started = time.perf_counter()
        answer = apis[n % clients].request("POST", "/task", requests[n])
        return (time.perf_counter() - started) * 1000, answer.status_code, answer.headers.get("Location", "")

    started = time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        posts = list(pool.map(post, range(tasks)))
    posted = time.monotonic() - started
    locations = [location for _, status, location in posts if status == 202]
    ended: Counter[str] = Counter()
    deadline = time.monotonic() + timeout
    while locations and time.monotonic() < deadline:
        statuses = {loc: apis[0].request("GET", loc).json()["status"] for loc in locations}
        ended.update(status for status in statuses.values() if status in TERMINAL)
        locations = [loc for loc, status in statuses.items() if status not in TERMINAL]
        time.sleep(0.5)
    cloud.runtime.drain()
    gc.collect()
    ms = sorted(m for m, _, _ in posts)
    return {
        "tasks": tasks,
        "clients": clients,
        "accepted": sum(status == 202 for _, status, _ in posts),
        "post_p50_ms": round(statistics.median(ms), 1),
        "post_p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 1),
        "posted_seconds": round(posted, 1),
        "ended": dict(ended),
        "not_ended": len(locations),
        "rss_before_mb": before,
        "rss_after_mb": rss_mb(),
    }


# --- P5 ----------------------------------------------------------------------------------------------------------
def p5_cost(p1: list[dict[str, Any]], duration_ms: float = 150.0) -> list[dict[str, Any]]:
    """USD per 1,000 jobs on AWS, from P1's counts (Lambda billed `duration_ms` per invocation at 256 MB)."""
    rows = []
    for row in p1:
        costs = {}
        for variant in ("callback", "polling"):
            counts = row[variant]
            costs[variant] = round(
                1000
                * (
                    counts["transitions"] * PRICES["sfn_standard_per_transition"]
                    + counts["lambda_invocations"]
                    * (PRICES["lambda_per_request"] + LAMBDA_GB * duration_ms / 1000 * PRICES["lambda_per_gb_second"])
                    + counts["dynamodb_writes"] * PRICES["dynamodb_per_write_request"]
                    + counts["dynamodb_reads"] * PRICES["dynamodb_per_read_request"]
                ),
                4,
            )
        rows.append({"job_minutes": row["job_minutes"], **{f"{k}_usd_per_1000_jobs": v for k, v in costs.items()}})
    return rows


# --- report ------------------------------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }


def table(title: str, columns: list[str], rows: list[list[Any]]) -> list[str]:
    """A Markdown section: its title, then one table."""
    lines = ["", f"## {title}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def markdown(results: dict[str, Any]) -> str:
    m, p3, h = results["machine"], results["p3"], results["http"]
    lines = [
        "# Performance (make bench)",
        "",
        f"Measured {m['date']} on {m['cpus']} cores, {m['memory_gb']} GB, Python {m['python']}, {m['platform']}; the",
        "offline cloud of this repository (moto's Step Functions interpreter, the functions' packages in workers).",
        "Offline figures say how the design behaves, not what AWS's own latencies are.",
        "Raw figures: .aws-sam/bench/results.json.",
    ]
    lines += table(
        "P1 per async job: callback vs polling (Wait 30 s -> Describe -> Choice)"
        + (f" (measured again {results['p1_date']}, with P5)" if "p1_date" in results else ""),
        [
            "job",
            "callback transitions",
            "polling transitions",
            "ratio",
            "callback Lambda / DynamoDB w+r / events",
            "polling Describe calls",
        ],
        [
            [
                f"{row['job_minutes']} min",
                row["callback"]["transitions"],
                row["polling"]["transitions"],
                f"{row['transitions_ratio_polling_to_callback']}x",
                f"{row['callback']['lambda_invocations']} / {row['callback']['dynamodb_writes']}+"
                f"{row['callback']['dynamodb_reads']} / {row['callback']['events']}",
                row["polling"]["describe_calls"],
            ]
            for row in results["p1"]
        ],
    )
    lines += table(
        "P2 resume latency (event put -> task closed)",
        ["in flight", "jobs", "p50", "p95", "p99"],
        [
            [row["in_flight"], row["jobs"], f"{row['p50_ms']} ms", f"{row['p95_ms']} ms", f"{row['p99_ms']} ms"]
            for row in results["p2"]
        ],
    )
    lines += table(
        "P2 segments, p50 / p99 (each from the end of the one before; the first from the event put)",
        ["in flight", *SEGMENTS],
        [
            [
                row["in_flight"],
                *(f"{row['segments_ms'][s]['p50']} / {row['segments_ms'][s]['p99']} ms" for s in SEGMENTS),
            ]
            for row in results["p2"]
            if "segments_ms" in row
        ],
    )
    lines += table(
        f"P3 cold start (import of the packaged handler) / bare `import boto3` ({p3['boto3_ms']} ms)",
        ["function", "ms", "x boto3"],
        [[name, row["ms"], row["vs_boto3"]] for name, row in sorted(p3["handlers"].items())]
        + [[f"(floor) {name}", row["ms"], row["vs_boto3"]] for name, row in p3.get("floors", {}).items()],
    )
    top = ", ".join(f"{name} {us / 1000:.0f} ms" for name, us in p3["top_imports_us"].items())
    lines += ["", f"Top imports of {p3['slowest']} (cumulative): {top}."]
    lines += table(
        "P4 N callback jobs (100 in flight)",
        [
            "N",
            "seconds",
            "lost",
            "duplicated",
            "failed",
            "peak RSS MB",
            "peak threads",
            "time(N)/time(N/2)",
            "CPU ms per job: cloud / functions",
        ],
        [
            [
                row["jobs"],
                row["seconds"],
                row["lost"],
                row["duplicated"],
                row["failed"],
                row["peak_rss_mb"],
                row["peak_threads"],
                row.get("time_ratio_to_half", ""),
                f"{row['cpu_ms_per_job']['cloud']} / {row['cpu_ms_per_job']['functions']}"
                if "cpu_ms_per_job" in row
                else "",
            ]
            for row in results["p4"]
        ],
    )
    lines += table(
        f"P5 cost per 1,000 jobs on AWS (prices read {PRICES['read_on']}, us-east-1, in tests/bench/bench.py)",
        ["job", "callback USD", "polling USD"],
        [
            [f"{row['job_minutes']} min", row["callback_usd_per_1000_jobs"], row["polling_usd_per_1000_jobs"]]
            for row in results["p5"]
        ],
    )
    lines += table(
        f"HTTP: {h['tasks']} signed POST /task (documents tasks) from {h['clients']} clients at once",
        ["accepted", "POST p50", "POST p99", "tasks ended", "not ended", "serving RSS before / after"],
        [
            [
                h["accepted"],
                f"{h['post_p50_ms']} ms",
                f"{h['post_p99_ms']} ms",
                ", ".join(f"{n} {s}" for s, n in sorted(h["ended"].items())),
                h["not_ended"],
                f"{h['rss_before_mb']} / {h['rss_after_mb']} MB",
            ]
        ],
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench", description=__doc__)
    parser.add_argument("--sizes", default="500,1000,2000,5000", help="P4's job counts")
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the bench itself")
    parser.add_argument(
        "--p1-only", action="store_true", help="measure P1 (and P5, its prices) again into the last run's results"
    )
    args = parser.parse_args(argv)
    sizes = [50, 100] if args.quick else [int(s) for s in args.sizes.split(",")]
    # EnableMacie: the cloud is a new account (Macie off); the HTTP load runs documents tasks.
    parameters = {
        "ReconcileAfterSeconds": "100000",
        "LogLevel": "WARN",
        "TaskTimeoutSeconds": "3600",
        "EnableMacie": "true",
    }
    out = ROOT / ".aws-sam" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    config = CloudConfig(
        template=ROOT / "template.yaml",
        stack_name="bench",
        aws_port=0,
        http_port=0,
        parameters=parameters,
        async_retry_delay_seconds=0.1,
        function_log=out / "functions.log",
    )
    (out / "functions.log").write_text("")  # this run's logs only
    route_logs(out / "functions.log")  # moto's warnings and internal errors with the functions' logs, not on screen
    # P1 counts a job's own invocations: the scheduled functions' (a fixed cost of the deployment, not per job) are off
    p1_parameters = {
        **parameters,
        **{name: "rate(7 days)" for name in ("ReconcileSchedule", "SemaphoreSweepSchedule", "AdmissionSchedule")},
    }
    results: dict[str, Any] = {"machine": machine(), "prices": PRICES}
    if args.p1_only:
        results = {**json.loads((out / "results.json").read_text()), "p1_date": results["machine"]["date"]}
    with LocalCloud(replace(config, stack_name="bench-p1", speedup=SPEEDUP, parameters=p1_parameters)) as cloud:
        print("P1 transitions per job", flush=True)
        results["p1"] = p1_transitions(cloud)
    results["p5"] = p5_cost(results["p1"])
    if args.p1_only:
        return report(results, out)
    with LocalCloud(config) as cloud:
        print("P3 cold starts", flush=True)
        results["p3"] = p3_cold_starts(cloud, runs=3 if args.quick else 7)
        print("P2 resume latency", flush=True)
        scale = 0.2 if args.quick else 1.0
        results["p2"] = [
            p2_latency(cloud, jobs=int(jobs * scale), in_flight=in_flight)
            for jobs, in_flight in ((50, 1), (200, 20), (500, 100))
        ]
        print(f"P4 scale {sizes}", flush=True)
        results["p4"] = p4_scale(cloud, sizes)
        print("HTTP load", flush=True)
        results["http"] = http_load(cloud, tasks=40 if args.quick else 200, clients=20)
    return report(results, out)


def report(results: dict[str, Any], out: Path) -> int:
    """Write results.json and docs/performance.md; 1 if a job was lost or duplicated, or a task never ended."""
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    text = markdown(results)
    (ROOT / "docs" / "performance.md").write_text(text)
    print(text)
    lost = sum(row["lost"] + row["duplicated"] for row in results["p4"])
    return 1 if lost or results["http"]["not_ended"] else 0


if __name__ == "__main__":
    sys.exit(main())
