"""`make bench`: the design's numbers, measured on the offline cloud in one run.

    python -m bench.bench [--sizes 1000,2000,5000] [--quick] [--p1-only]

P1  state transitions, Lambda invocations and service calls per async job, whole workflows (the job started, waited
    for, ended): callback (StartJob -> WaitForJob -> Done) vs a polling loop (StartJob -> Wait 30 s ->
    DescribeTextTranslationJob -> Choice ... -> Done) on the same engine, for jobs of 1, 15 and 60 minutes (simulated
    time), with the waiting state's (or loop's) share;
P2  resume latency (completion event put -> the waiting task closed), p50/p95/p99 and its segments, for 1, 20 and 100
    resumes that overlap: that many jobs wait at once and their completions are put together, round after round, once
    the resume function's environments are warm;
P3  cold start of the packaged handler of every function the bench deploys (the export is off there): its package
    and its layer on the path of the clean runtime interpreter, read-only, as Lambda imports it / a bare `import
    boto3` from the layer (medians of runs that alternate the two); with the bytecode the build ships and without it;
    with the top import costs of the slowest;
P4  N callback jobs all waiting at once (no in-flight cap; their completions put together once every one is
    registered): wall time, lost, duplicated, peak threads of the cloud's process, peak memory of the cloud's process
    and of its functions' workers, time(2N)/time(N);
P5  cost per 1,000 jobs on AWS from the P1 counts (whole workflows, the waiting share beside) and the public prices in
    PRICES;
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
import shutil
import statistics
import subprocess
import sys
import tempfile
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

from bench.callbacks import (
    SEGMENTS,
    JobsResult,
    function_name,
    resume_segments,
    run_jobs,
    wait_for_job,
    waiting_machine,
)
from localcloud.account import ACCOUNT_ID
from localcloud.client import SignedClient, route_logs
from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.runtime.lambdas import FunctionSpec, runtime_python
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator
from tools.demo import seed_documents

ROOT = Path(__file__).resolve().parents[1]
# Public on-demand list prices, us-east-1, as read from the AWS pricing pages on 2026-11-23 (check before quoting).
PRICES = {
    "read_on": "2026-11-23",
    "sfn_standard_per_transition": 0.025 / 1000,
    "lambda_per_request": 0.20 / 1_000_000,
    "lambda_per_gb_second": 0.0000166667,
    "dynamodb_per_write_request": 0.625 / 1_000_000,
    "dynamodb_per_read_request": 0.125 / 1_000_000,
    # Lambda durable functions: per durable operation (a step, a callback, a child context...), the Lambda pricing
    # page's rate as a transcription of it dated 2026-09-20 quotes it; its GB of data written and retained are not
    # priced here (a documents execution checkpoints a few KB)
    "lambda_durable_per_operation": 8.00 / 1_000_000,
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
WAITING_STATES = {"WaitForJob", "Wait30", "Describe", "Done?"}  # what waits for the job in either workflow


def start_job(cloud: LocalCloud, next_state: str) -> dict[str, Any]:
    """The state that starts the job, as the documents workflow starts its translation (named after the execution,
    in this stack's way: `<stack>.<name>`); its id at $.job.JobId."""
    bucket = cloud.stack.outputs["DocumentBucketName"]
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::aws-sdk:translate:startTextTranslationJob",
        "Parameters": {
            "JobName.$": f"States.Format('{cloud.stack.name}.{{}}', $$.Execution.Name)",
            "ClientToken.$": "$$.Execution.Name",
            "InputDataConfig": {"S3Uri": f"s3://{bucket}/bench/in/", "ContentType": "text/plain"},
            "OutputDataConfig": {"S3Uri": f"s3://{bucket}/bench/out/"},
            "DataAccessRoleArn": f"arn:aws:iam::{ACCOUNT_ID}:role/translate",
            "SourceLanguageCode": "en",
            "TargetLanguageCodes": ["es"],
        },
        "ResultSelector": {"JobId.$": "$.JobId"},
        "ResultPath": "$.job",
        "Next": next_state,
    }


def p1_machines(cloud: LocalCloud) -> tuple[str, str]:
    """The whole workflow of one job, callback and polling: the job started, waited for, ended."""
    callback = {
        "StartAt": "StartJob",
        "States": {
            "StartJob": start_job(cloud, "WaitForJob"),
            "WaitForJob": {**wait_for_job(cloud, "$.job.JobId", 2 * 3600), "ResultPath": None, "Next": "Done"},
            "Done": {"Type": "Succeed"},
        },
    }
    polling = {
        "StartAt": "StartJob",
        "States": {
            "StartJob": start_job(cloud, "Wait30"),
            "Wait30": {"Type": "Wait", "Seconds": POLL_SECONDS, "Next": "Describe"},
            "Describe": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:translate:describeTextTranslationJob",
                "Parameters": {"JobId.$": "$.job.JobId"},
                "ResultSelector": {"status.$": "$.TextTranslationJobProperties.JobStatus"},
                "ResultPath": "$.described",
                "Next": "Done?",
            },
            "Done?": {
                "Type": "Choice",
                "Choices": [
                    {"Variable": "$.described.status", "StringEquals": "COMPLETED", "Next": "Done"},
                    {"Variable": "$.described.status", "StringEquals": "FAILED", "Next": "Failed"},
                ],
                "Default": "Wait30",
            },
            "Done": {"Type": "Succeed"},
            "Failed": {"Type": "Fail", "Error": "Translate.FAILED"},
        },
    }
    sfn, suffix = cloud.client("stepfunctions"), uuid.uuid4().hex[:6]

    def create(variant: str, definition: dict[str, Any]) -> str:
        created = sfn.create_state_machine(
            name=f"callback-kit-bench-{variant}-{suffix}",
            definition=json.dumps(definition),
            roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/bench",
        )
        return str(created["stateMachineArn"])

    return create("callback", callback), create("polling", polling)


def p1_transitions(cloud: LocalCloud) -> list[dict[str, Any]]:
    """Both variants run each job length for real on the cloud's clock (SPEEDUP), the polling loop's Wait at its
    AWS value, 30 s. The schedules are off in P1's cloud: the scheduled functions' invocations are not the job's."""
    callback, polling = p1_machines(cloud)
    cloud.client("s3").put_object(Bucket=cloud.stack.outputs["DocumentBucketName"], Key="bench/in/a.txt", Body=b"a")
    sfn = cloud.client("stepfunctions")

    def run(machine: str, minutes: int) -> dict[str, Any]:
        # A polling design has no completion event (the stack's rule would resume nothing, at a cost of its own)
        simulator = TranslateSimulator(
            cloud.config.region, delay_seconds=minutes * 60, clock=cloud.clock, drop_events=machine == polling
        )
        cloud.add_simulator(simulator)
        invocations_before = invocations(cloud)
        with counted(DynamoDBBackend, ("put_item", "get_item", "update_item", "delete_item")) as ddb:
            arn = sfn.start_execution(stateMachineArn=machine, input="{}")["executionArn"]
            described = wait_ended(cloud, arn)
            cloud.runtime.drain()
        assert described["status"] == "SUCCEEDED", described
        states = Counter(
            e["stateEnteredEventDetails"]["name"] for e in history(cloud, arn) if e["type"].endswith("StateEntered")
        )
        return {
            "transitions": sum(states.values()),
            "waiting_transitions": sum(n for state, n in states.items() if state in WAITING_STATES),
            "lambda_invocations": invocations(cloud) - invocations_before,
            "dynamodb_writes": ddb["put_item"] + ddb["update_item"] + ddb["delete_item"],
            "dynamodb_reads": ddb["get_item"],
            "describe_calls": states["Describe"],
        }

    rows = []
    for minutes in (1, 15, 60):
        callback_row, polling_row = run(callback, minutes), run(polling, minutes)
        rows.append(
            {
                "job_minutes": minutes,
                "callback": {**callback_row, "events": 1},
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


def first_invocations(cloud: LocalCloud, function: str) -> int:
    """The function's environments that have served an invocation so far: its REPORT lines with an Init Duration
    (the first invocation of each environment's) in the function log."""
    return sum(
        line.startswith(f"[{function}] REPORT ") and "Init Duration" in line
        for line in cloud.function_log.read_text().splitlines()
    )


# --- P2 ----------------------------------------------------------------------------------------------------------
def p2_latency(cloud: LocalCloud, overlap: int, rounds: int) -> dict[str, Any]:
    """Completion event put -> the waiting task closed, for resumes that overlap: `overlap` jobs wait at once and
    their completions are put together, `rounds` times over, once the resume function's environments are warm (not
    measured): such rounds are run until one starts no environment and every environment has served an invocation.
    On Lambda an environment serves the invocation it was started for; here an invocation takes whichever worker
    frees first, so an environment can start for a round and serve none of it, and its first invocation (hundreds of
    ms here: the handler builds its clients) would fall in the measured rounds. The resume function's environments
    started, and first used, during the measured rounds are counted."""
    resume = function_name(cloud, "ResumeJobFunction")
    for _ in range(5):
        cold_starts = cloud.runtime.cold_starts(resume)
        run_jobs(cloud, jobs=overlap, in_flight=overlap, together=True)
        while cloud.runtime.starting():
            time.sleep(0.05)
        if cloud.runtime.cold_starts(resume) == cold_starts == first_invocations(cloud, resume):
            break
    cold_starts, first_used = cloud.runtime.cold_starts(resume), first_invocations(cloud, resume)
    result = JobsResult(jobs=overlap * rounds, in_flight=overlap, seconds=0.0)
    with resume_segments(cloud, result) as segments:
        for _ in range(rounds):
            run_jobs(cloud, jobs=overlap, in_flight=overlap, together=True, result=result)
    return {
        "overlap": overlap,
        "jobs": result.jobs,
        "measured": len(result.resume_ms),
        "lost": result.lost,
        "cold_starts": cloud.runtime.cold_starts(resume) - cold_starts,
        "first_used": first_invocations(cloud, resume) - first_used,
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
P3_FLOORS = {  # name -> (the function whose package and layers it is imported from, the code)
    "boto3 + Powertools Logger, Metrics + one pydantic model": ("TaskApiFunction", _HOUSE),
    "that + Powertools' HTTP resolver with validation (TaskApi's)": (
        "TaskApiFunction",
        _HOUSE
        + "from aws_lambda_powertools.event_handler import APIGatewayHttpResolver\n"
        + "APIGatewayHttpResolver(enable_validation=True)\n",
    ),
    "that + the durable execution SDK (DocumentsDurableFunction's)": (
        "DocumentsDurableFunction",
        _HOUSE + "from aws_durable_execution_sdk_python import durable_execution\n",
    ),
}


def p3_cold_starts(cloud: LocalCloud, runs: int) -> dict[str, Any]:
    """Each function's handler imported as a cold start on Lambda imports it: its package, then its layers, first on
    the path of the runtime's interpreter, read-only (-B). Once with the bytecode the build shipped, once from a copy
    without it (what a package without bytecode costs: every module compiled at every cold start)."""
    python = str(runtime_python())
    build = ROOT / ".aws-sam" / "build"
    plain = Path(tempfile.mkdtemp(prefix="p3-")) / "build"  # the same packages and layers, without their bytecode
    shutil.copytree(build, plain, ignore=shutil.ignore_patterns("__pycache__"))

    def once(code: str, env: dict[str, str]) -> float:
        started = time.perf_counter()
        subprocess.run([python, "-I", "-B", "-c", code], check=True, env=env)
        return (time.perf_counter() - started) * 1000

    def importing(root: Path, spec: FunctionSpec, statement: str) -> str:
        """`statement` run where Lambda's runtime runs the handler's import: /var/task, then /opt's paths."""
        package = root / spec.code_dir.name
        layers = [root / layer.name for layer in spec.layer_dirs]
        paths = [str(package), *(f"{layer}/python" for layer in layers)]
        return f"import sys; sys.path[0:0] = {paths!r}\n{statement}"

    bare: dict[str, list[float]] = {"bytecode": [], "none": []}  # every `import boto3` (the layer's), per build

    def versus_boto3(root: Path, spec: FunctionSpec, code: str, env: dict[str, str]) -> dict[str, float]:
        """`code`'s median time and its ratio to a bare `import boto3` from the same layer: the two alternate, so a
        change in the machine's load falls on both sides of the ratio."""
        boto3_ms, code_ms = [], []
        for _ in range(runs):
            boto3_ms.append(once(importing(root, spec, "import boto3"), env))
            code_ms.append(once(importing(root, spec, code), env))
        bare["bytecode" if root == build else "none"].extend(boto3_ms)
        ms = statistics.median(code_ms)
        return {"ms": round(ms), "vs_boto3": round(ms / statistics.median(boto3_ms), 2)}

    rows, specs, environments = {}, {}, {}
    for resource_ in cloud.stack.of_type("AWS::Lambda::Function"):
        handler = resource_.properties["Handler"].rsplit(".", 1)[0]
        function = cloud.runtime.function(resource_.physical_id)
        spec = specs[resource_.logical_id] = FunctionSpec.of(
            function, build / resource_.logical_id, {}, cloud.runtime.layers(function)
        )
        # Lambda's environment matters: Powertools reads it at import (service name, log level, metrics namespace)
        env = environments[resource_.logical_id] = spec.lambda_environment(cloud.aws_endpoint, cloud.config.region)
        rows[resource_.logical_id] = {
            **versus_boto3(build, spec, f"import {handler}", env),
            "without_bytecode": versus_boto3(plain, spec, f"import {handler}", env),
            "module": handler,
        }
    slowest_id, slowest = max(rows.items(), key=lambda item: item[1]["ms"])
    floors = {
        name: versus_boto3(build, specs[function], code, environments[function])
        for name, (function, code) in P3_FLOORS.items()
        if function in specs  # a function the stack deployed
    }
    trace = subprocess.run(
        [
            python,
            "-I",
            "-B",
            "-X",
            "importtime",
            "-c",
            importing(build, specs[slowest_id], "import " + slowest["module"]),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=environments[slowest_id],
    ).stderr
    shutil.rmtree(plain.parent)
    top: Counter[str] = Counter()
    for line in trace.splitlines()[1:]:
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2].count(".") == 0 and not parts[2].startswith(" "):
            top[parts[2]] = max(top[parts[2]], int(parts[1]))
    return {
        "boto3_ms": round(statistics.median(bare["bytecode"])),
        "boto3_without_bytecode_ms": round(statistics.median(bare["none"])),
        "handlers": rows,
        "floors": floors,
        "slowest": slowest["module"],
        "top_imports_us": dict(top.most_common(8)),
    }


# --- P4 ----------------------------------------------------------------------------------------------------------
def p4_scale(cloud: LocalCloud, sizes: list[int]) -> list[dict[str, Any]]:
    """For each size N, N callback jobs all waiting at once: every execution started and registered before any
    completion is put, then all N completions put together. Threads and memory are sampled while it runs."""
    machine = waiting_machine(cloud, timeout_seconds=3600, name="callback-kit-bench-all-waiting")
    rows = []
    for size in sizes:
        peaks = {"threads": 0, "cloud_mb": 0.0, "workers_mb": 0.0, "total_mb": 0.0}
        stop = threading.Event()

        def sample(peaks: dict[str, Any] = peaks, stop: threading.Event = stop) -> None:
            while not stop.wait(0.5):
                cloud_mb, workers_mb = memory_mb()
                now = {"threads": threads(), "cloud_mb": cloud_mb, "workers_mb": workers_mb}
                peaks.update({k: max(peaks[k], v) for k, v in now.items()})
                peaks["total_mb"] = max(peaks["total_mb"], cloud_mb + workers_mb)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        cpu_before = cpu_seconds()
        result = run_jobs(cloud, jobs=size, in_flight=size, seed=size, job_timeout=1800, machine=machine, together=True)
        stop.set()
        sampler.join()
        cpu = [(after - before) * 1000 / size for before, after in zip(cpu_before, cpu_seconds(), strict=True)]
        rows.append(
            {
                **result.as_dict(),
                "seconds": round(result.seconds, 1),
                "all_waiting_seconds": round(result.all_waiting_seconds, 1),
                "peak_threads": peaks["threads"],
                "peak_mb": {k.removesuffix("_mb"): round(v) for k, v in peaks.items() if k.endswith("_mb")},
                "cpu_ms_per_job": {"cloud": round(cpu[0], 1), "functions": round(cpu[1], 1)},
            }
        )
    for smaller, larger in itertools.pairwise(rows):
        if larger["jobs"] == 2 * smaller["jobs"]:
            larger["time_ratio_to_half"] = round(larger["seconds"] / smaller["seconds"], 2)
    return rows


def children() -> list[int]:
    """The process ids of this process's children: the functions' workers."""
    me, pids = os.getpid(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) == me:  # ppid
                pids.append(int(pid))
    return pids


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds used so far by this process (the offline cloud) and by its children (the functions' workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    children_seconds = os.times().children_user + os.times().children_system  # workers already gone
    for pid in children():
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            children_seconds += (int(fields[11]) + int(fields[12])) / ticks
    mine = os.times()
    return mine.user + mine.system, children_seconds


def rss_mb(pid: int | str = "self") -> float:
    """A process's resident memory now (by default this one's: the offline cloud serves from it)."""
    with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
        return round(int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def memory_mb() -> tuple[float, float]:
    """Resident memory now of this process (the offline cloud) and summed over its children (the functions' workers,
    each an execution environment with memory of its own on Lambda)."""
    workers = 0.0
    for pid in children():
        with contextlib.suppress(OSError, IndexError, ValueError):
            workers += rss_mb(pid)
    return rss_mb(), workers


def threads() -> int:
    """This process's threads now (every one of them, not only those Python's threading module started)."""
    with open("/proc/self/status", encoding="ascii") as status:
        return int(next(line for line in status if line.startswith("Threads:")).split()[1])


# --- HTTP --------------------------------------------------------------------------------------------------------
TERMINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "CANCELLED"}


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
    """USD per 1,000 jobs on AWS, from P1's counts (Lambda billed `duration_ms` per invocation at 256 MB): the whole
    workflow, and its waiting share (the waiting state's or loop's transitions, with every Lambda and DynamoDB
    call: all of them are the waiting's)."""

    def usd(counts: dict[str, Any], transitions: int) -> float:
        return round(
            1000
            * (
                transitions * PRICES["sfn_standard_per_transition"]
                + counts["lambda_invocations"]
                * (PRICES["lambda_per_request"] + LAMBDA_GB * duration_ms / 1000 * PRICES["lambda_per_gb_second"])
                + counts["dynamodb_writes"] * PRICES["dynamodb_per_write_request"]
                + counts["dynamodb_reads"] * PRICES["dynamodb_per_read_request"]
            ),
            4,
        )

    return [
        {
            "job_minutes": row["job_minutes"],
            **{
                f"{variant}_{share}usd_per_1000_jobs": usd(row[variant], row[variant][f"{share}transitions"])
                for variant in ("callback", "polling")
                for share in ("", "waiting_")
            },
        }
        for row in p1
    ]


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
        "offline cloud of this repository (moto's Step Functions interpreter, the functions' packages in workers) as",
        "an established account (Lambda quota 1,000: a new account's 10 at once could not run P2's 100 on AWS either).",
        "Offline figures say how the design behaves, not what AWS's own latencies are.",
        "Raw figures: .aws-sam/bench/results.json.",
    ]
    lines += table(
        "P1 per async job, whole workflows: callback (StartJob -> WaitForJob -> Done) vs polling (StartJob -> "
        "Wait 30 s -> Describe -> Choice ... -> Done)"
        + (f" (measured again {results['p1_date']}, with P5)" if "p1_date" in results else ""),
        [
            "job",
            "callback transitions (waiting state)",
            "polling transitions (waiting loop)",
            "ratio",
            "callback Lambda / DynamoDB w+r / events",
            "polling Describe calls",
        ],
        [
            [
                f"{row['job_minutes']} min",
                f"{row['callback']['transitions']} ({row['callback']['waiting_transitions']})",
                f"{row['polling']['transitions']} ({row['polling']['waiting_transitions']})",
                f"{row['transitions_ratio_polling_to_callback']}x",
                f"{row['callback']['lambda_invocations']} / {row['callback']['dynamodb_writes']}+"
                f"{row['callback']['dynamodb_reads']} / {row['callback']['events']}",
                row["polling"]["describe_calls"],
            ]
            for row in results["p1"]
        ],
    )
    lines += table(
        "P2 resume latency (event put -> task closed), resumes overlapping: N jobs wait at once, their N completions "
        "put together, round after round, the resume function's environments warm",
        ["overlapping", "jobs", "p50", "p95", "p99", "environments started / first used in the rounds"],
        [
            [
                row["overlap"],
                row["jobs"],
                f"{row['p50_ms']} ms",
                f"{row['p95_ms']} ms",
                f"{row['p99_ms']} ms",
                f"{row['cold_starts']} / {row['first_used']}",
            ]
            for row in results["p2"]
        ],
    )
    lines += table(
        "P2 segments, p50 / p99 (each from the end of the one before; the first from the event put; first AWS call: "
        "the resume function's read of the token)",
        ["overlapping", *SEGMENTS],
        [
            [row["overlap"], *(f"{row['segments_ms'][s]['p50']} / {row['segments_ms'][s]['p99']} ms" for s in SEGMENTS)]
            for row in results["p2"]
        ],
    )
    lines += table(
        f"P3 cold start: the handler imported from its package and layer, read-only, as Lambda imports it / bare "
        f"`import boto3` from the layer ({p3['boto3_ms']} ms; {p3['boto3_without_bytecode_ms']} ms without bytecode)",
        ["function", "ms", "x boto3", "without bytecode: ms", "x boto3"],
        [
            [name, row["ms"], row["vs_boto3"], row["without_bytecode"]["ms"], row["without_bytecode"]["vs_boto3"]]
            for name, row in sorted(p3["handlers"].items())
        ]
        + [[f"(floor) {name}", row["ms"], row["vs_boto3"], "", ""] for name, row in p3.get("floors", {}).items()],
    )
    top = ", ".join(f"{name} {us / 1000:.0f} ms" for name, us in p3["top_imports_us"].items())
    lines += ["", f"Top imports of {p3['slowest']} (cumulative): {top}."]
    lines += table(
        "P4 N callback jobs all waiting at once (no in-flight cap; the N completions put once every job is registered)",
        [
            "N",
            "seconds",
            "of which until all waiting",
            "lost",
            "duplicated",
            "failed",
            "peak threads (cloud)",
            "peak MB: cloud + workers = total",
            "time(N)/time(N/2)",
            "CPU ms per job: cloud / functions",
        ],
        [
            [
                row["jobs"],
                row["seconds"],
                row["all_waiting_seconds"],
                row["lost"],
                row["duplicated"],
                row["failed"],
                row["peak_threads"],
                f"{row['peak_mb']['cloud']} + {row['peak_mb']['workers']} = {row['peak_mb']['total']}",
                row.get("time_ratio_to_half", ""),
                f"{row['cpu_ms_per_job']['cloud']} / {row['cpu_ms_per_job']['functions']}",
            ]
            for row in results["p4"]
        ],
    )
    lines += table(
        f"P5 cost per 1,000 jobs on AWS, whole workflows (prices read {PRICES['read_on']}, us-east-1, in "
        "bench/bench.py)",
        ["job", "callback USD (waiting state)", "polling USD (waiting loop)"],
        [
            [
                f"{row['job_minutes']} min",
                f"{row['callback_usd_per_1000_jobs']} ({row['callback_waiting_usd_per_1000_jobs']})",
                f"{row['polling_usd_per_1000_jobs']} ({row['polling_waiting_usd_per_1000_jobs']})",
            ]
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
    parser = argparse.ArgumentParser(prog="python -m bench.bench", description=__doc__)
    parser.add_argument("--sizes", default="1000,2000,5000", help="P4's job counts")
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the bench itself")
    parser.add_argument(
        "--p1-only", action="store_true", help="measure P1 (and P5, its prices) again into the last run's results"
    )
    args = parser.parse_args(argv)
    sizes = [50, 100] if args.quick else [int(s) for s in args.sizes.split(",")]
    parameters = {"ReconcileAfterSeconds": "100000", "LogLevel": "WARN", "TaskTimeoutSeconds": "3600"}
    out = ROOT / ".aws-sam" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    # An established account (Lambda quota 1,000; Macie on, for the HTTP load's documents tasks): a new account's 10
    # concurrent executions, for all functions together, could not run P2's 100 resumes at once on AWS either.
    config = CloudConfig(
        template=ROOT / "template.yaml",
        stack_name="bench",
        account="established",
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
            p2_latency(cloud, overlap=overlap, rounds=max(1, int(rounds * scale)))
            for overlap, rounds in ((1, 50), (20, 10), (100, 5))
        ]
        print(f"P4 scale {sizes}", flush=True)
        results["p4"] = p4_scale(cloud, sizes)
        print("HTTP load", flush=True)
        results["http"] = http_load(cloud, tasks=40 if args.quick else 200, clients=20)
    return report(results, out)


KEPT = "<!-- Below this line: written by hand; make bench replaces only what is above it. -->"


def report(results: dict[str, Any], out: Path) -> int:
    """Write results.json and docs/performance.md's figures (what follows its KEPT line stays); 1 if a job was lost or
    duplicated, or a task never ended."""
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    text = markdown(results)
    page = ROOT / "docs" / "performance.md"
    _, marker, kept = page.read_text().partition(KEPT) if page.exists() else ("", "", "")
    page.write_text(f"{text.rstrip()}\n\n{marker}{kept}" if marker else text)
    print(text)
    lost = sum(row["lost"] + row["duplicated"] for row in results["p4"])
    return 1 if lost or results["http"]["not_ended"] else 0


if __name__ == "__main__":
    sys.exit(main())
