"""Recovery from a burst of lost completion events: how long the reconciler takes to resume N jobs whose events were
all lost at once, and whether any of them times out first.

    python -m bench.recovery --jobs 100 --heartbeat 6     # or: make bench-recovery BURST=100 HEARTBEAT=6

The run has an offline cloud of its own (the template as deployed, the scheduled ReconcileJobsFunction every real
second, ReconcileAfterSeconds 0). N executions of bench/callbacks.py's minimal waiting workflow start, each waiting
with HeartbeatSeconds (`--heartbeat` real seconds) and registering it, as the documents workflow does, for a Translate
job (the simulator) that runs on: the reconciler keeps them alive with heartbeats. Once all N are registered, all N
jobs end at once (TranslateSimulator.finish) and every event is lost: a true burst, N finished jobs the reconciler
finds together. Only it can resume them, each within one heartbeat window of its last heartbeat, or the task times
out (States.Timeout, which the real workflows turn into `Translate.Timeout`) although its job had finished.

Reported: timeouts (the target is 0), executions still waiting, resumed twice, the burst's recovery time (the jobs'
end to the last task closed) and each job's wait after the burst (p50, p99, max), and the reconciler's dead letters.
One summary line is printed; everything is written to .aws-sam/bench/recovery.json. docs/callback.md has the
capacity this measures against.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.bench import machine
from bench.callbacks import CLOSES, TranslateJobs, run_jobs, waiting_machine
from localcloud.client import route_logs
from localcloud.cloud import CloudConfig, LocalCloud

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".aws-sam" / "bench"
RECOVERY_MACHINE = "callback-kit-recovery-waiting"
SPEEDUP = 60.0  # the reconciler's schedule (one simulated minute) fires every real second
PARAMETERS = {"ReconcileSchedule": "rate(1 minute)", "ReconcileAfterSeconds": "0", "LogLevel": "WARNING"}
TIMEOUTS = ("States.Timeout", "States.HeartbeatTimeout")


@dataclass
class RecoveryResult:
    jobs: int
    heartbeat_seconds: float  # real seconds
    described: bool = False  # every job described on its own (the listing denied)
    timeouts: int = 0  # tasks that timed out: their job's progress went unconfirmed, or its end unseen, too long
    timeouts_before_burst: int = 0  # of them, while the jobs still ran (heartbeats that came too late)
    resumed: int = 0
    waiting: int = 0  # executions still running when the run gave up on them
    duplicated: int = 0
    dead_letters: int = 0
    recovery_seconds: float = math.nan  # the jobs ended -> last task closed
    wait_seconds: dict[str, float] = field(default_factory=dict)  # the jobs ended -> each task closed: p50, p99, max
    registered_seconds: float = math.nan  # first execution started -> all N registered (the burst)
    load: dict[str, list[float]] = field(default_factory=dict)  # the machine's load average before and after

    def summary(self) -> str:
        waits = " ".join(f"{name}={seconds:.2f}" for name, seconds in self.wait_seconds.items())
        return (
            f"recovery jobs={self.jobs} heartbeat={self.heartbeat_seconds:g}s"
            f"{' described one by one' if self.described else ''} | timeouts={self.timeouts} "
            f"(before the burst {self.timeouts_before_burst}) "
            f"resumed={self.resumed} waiting={self.waiting} duplicated={self.duplicated} dlq={self.dead_letters} "
            f"| all registered after {self.registered_seconds:.1f}s; recovered {self.recovery_seconds:.1f}s after the"
            f" burst, each task's wait after it: {waits}"
        )


def recovery_config(**overrides: Any) -> CloudConfig:
    """The offline cloud of a recovery run: the template, the reconciler every real second."""
    values: dict[str, Any] = {
        "template": ROOT / "template.yaml",
        "stack_name": "recovery",
        "aws_port": 0,
        "http_port": 0,
        "speedup": SPEEDUP,
        "parameters": PARAMETERS,
        "async_retry_delay_seconds": 0.1,
    }
    return CloudConfig(**(values | overrides))


def heartbeat_machine(cloud: LocalCloud, heartbeat_seconds: float) -> str:
    """callbacks.py's waiting workflow, its task waiting with
    HeartbeatSeconds (on the cloud's clock) and registering them, as the documents workflow's tasks do."""
    sfn = cloud.client("stepfunctions")
    base = waiting_machine(cloud, name=f"{RECOVERY_MACHINE}-base")
    definition = json.loads(sfn.describe_state_machine(stateMachineArn=base)["definition"])
    task = definition["States"]["WaitForJob"]
    task["HeartbeatSeconds"] = round(heartbeat_seconds * cloud.clock.speedup)
    task["Parameters"]["Payload"]["heartbeatSeconds"] = task["HeartbeatSeconds"]
    created = sfn.create_state_machine(
        name=RECOVERY_MACHINE,
        definition=json.dumps(definition),
        roleArn=sfn.describe_state_machine(stateMachineArn=base)["roleArn"],
    )
    return str(created["stateMachineArn"])


def run_recovery(cloud: LocalCloud, jobs: int, heartbeat_seconds: float, describe: bool = False) -> RecoveryResult:
    """Start `jobs` executions whose jobs run on; once all are registered, end every job at once with its event lost;
    account how the executions ended."""
    result = RecoveryResult(
        jobs=jobs, heartbeat_seconds=heartbeat_seconds, described=describe, load={"before": list(os.getloadavg())}
    )
    # ends only in the burst; with `describe`, Translate cannot list them (every job is described on its own, as a
    # service that lists none: Macie, BDA, HealthLake)
    translate_jobs = TranslateJobs(cloud, delay_seconds=math.inf, drop_events=True, list_denied=describe)
    machine_arn = heartbeat_machine(cloud, heartbeat_seconds)
    burst: list[datetime] = []

    def end_all(job_ids: list[str]) -> None:
        burst.append(datetime.now(UTC))
        translate_jobs.simulator.finish(job_ids)

    accounted = run_jobs(
        cloud,
        jobs,
        in_flight=jobs,
        job_timeout=3 * heartbeat_seconds + 60,
        machine=machine_arn,
        new_job=translate_jobs.new,
        together=True,
        end_together=end_all,
    )
    result.registered_seconds = round(accounted.all_waiting_seconds, 2)
    result.waiting, result.duplicated, result.dead_letters = (
        accounted.lost,
        accounted.duplicated,
        accounted.dead_letters,
    )
    result.timeouts = sum(status == "FAILED" and error in TIMEOUTS for status, error in accounted.ends.values())
    result.resumed = sum(status == "SUCCEEDED" for status, _ in accounted.ends.values())
    sfn = cloud.client("stepfunctions")
    waits = []
    for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=machine_arn):
        for execution in page["executions"]:
            events = sfn.get_execution_history(executionArn=execution["executionArn"], maxResults=1000)["events"]
            ends = [e["timestamp"] for e in events if e["type"] in CLOSES]
            timed_out = [e["timestamp"] for e in events if e["type"] == "TaskTimedOut"]
            result.timeouts_before_burst += bool(timed_out and (not burst or timed_out[0] < burst[0]))
            if ends and burst:
                waits.append((ends[-1] - burst[0]).total_seconds())
    if waits:
        result.recovery_seconds = round(max(waits), 2)
    waits.sort()
    if waits:
        percentile = {"p50": 0.5, "p99": 0.99, "max": 1.0}
        result.wait_seconds = {
            k: round(waits[min(len(waits) - 1, int(p * len(waits)))], 2) for k, p in percentile.items()
        }
    result.load["after"] = list(os.getloadavg())
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--heartbeat", type=float, default=6.0, help="HeartbeatSeconds, in real seconds")
    parser.add_argument(
        "--describe", action="store_true", help="Translate cannot list the jobs: each is described on its own"
    )
    parser.add_argument(
        "--out", type=Path, default=OUT / "recovery.json", help="the JSON report (the functions' log beside)"
    )
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    log = args.out.with_name("recovery-functions.log")
    log.write_text("")  # this run's logs only
    route_logs(log)
    with LocalCloud(recovery_config(function_log=log)) as cloud:
        result = run_recovery(cloud, args.jobs, args.heartbeat, args.describe)
    print(result.summary(), flush=True)
    args.out.write_text(json.dumps({"machine": machine()} | asdict(result), indent=2))
    return int(result.timeouts > 0 or result.waiting > 0 or result.duplicated > 0)


if __name__ == "__main__":
    raise SystemExit(main())
