"""Chaos: callback jobs on the offline cloud under a seeded, randomized fault load, accounted job by job.

    python -m bench.chaos --jobs 1000 --seed 7     # or: make chaos JOBS=1000 SEED=7

Each run has an offline cloud of its own, in its own process: its workers inject faults, and nothing of it (moto's
backends, the simulators, the default bus) is shared with another cloud.

The jobs are bench/callbacks.py's (a minimal waiting workflow registering through RegisterTokenFunction,
completion events put on the default bus as Translate puts them, ResumeJobFunction resuming), with real Translate
jobs behind them (the simulator, localcloud/simulators/translate.py: some COMPLETED, some FAILED, some
COMPLETED_WITH_ERROR) so that the scheduled ReconcileJobsFunction can describe them. Faults:
- at the wire under the SDK in every Lambda worker (localcloud/runtime/lambda_faults.py): throttling, 5xx, connection
  resets, answers lost after the write happened, and runtime crashes before or after the handler ran;
- in the events (this file): completion events lost (the reconciler must find the job ended), put before the
  registration, duplicated, put late after the job's task closed (a copy, or a contrary status: a FAILED after a
  COMPLETED, a COMPLETED after a FAILED), and forged while the job waits (a client's PutEvents with Translate's
  reserved source, refused; the same event under a custom source, which no rule matches).
Each job is accounted from its execution's history against the simulator's truth: lost (never ended), double (its
task closed twice), wrong (the execution's end differs from the job's: SUCCEEDED for COMPLETED, FAILED with
`Translate.<status>` otherwise), and the messages the run left in the resume dead-letter queue (where the
functions' on-failure destinations and the rules' dead-letter configs send what they gave up on).
One summary line is printed; everything is written to .aws-sam/bench/chaos.json. docs/reliability.md has the model.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.bench import machine
from bench.callbacks import JobsResult, TranslateJobs, complete, dead_letter_count, run_jobs, waiting_machine
from localcloud.client import route_logs
from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.runtime.lambda_faults import KINDS
from localcloud.simulators.translate import ACTIVE, EVENT_DETAIL_TYPE, EVENT_SOURCE, TranslateSimulator

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".aws-sam" / "bench"
CHAOS_MACHINE = "callback-kit-chaos-waiting"
SPEEDUP = 60.0  # the reconciler's schedule (one simulated minute) fires every real second
PARAMETERS = {
    "ReconcileSchedule": "rate(1 minute)",
    # Real seconds (the workers' clock): an event that is only slow gets a moment to win before the reconciler looks.
    "ReconcileAfterSeconds": "2",
    "LogLevel": "WARNING",
}
# The wire faults of every worker (localcloud/runtime/lambda_faults.py), per AWS call or per invocation (crash).
WIRE_FAULTS = {"throttle": 0.05, "server_error": 0.02, "reset": 0.02, "lost_answer": 0.02, "crash": 0.02}


@dataclass(frozen=True)
class EventFaults:
    """Per job, each drawn on its own (`early` is run_jobs's: the completion put at once, racing the registration)."""

    lost: float = 0.25
    early: float = 0.2
    duplicated: float = 0.3
    late: float = 0.1  # one more copy, put after every job's task has closed
    contrary: float = 0.1  # the opposite status, put after every job's task has closed (reordered)
    forged: float = 0.1  # a forged completion with the opposite status, put while the job waits


@dataclass(frozen=True)
class Plan:
    """What happens to one job's events."""

    lost: bool
    duplicated: bool
    late: bool
    contrary: bool
    forged: str | None  # "spoofed" (Translate's reserved source), "custom" (a lookalike source) or None

    @classmethod
    def draw(cls, rng: random.Random, faults: EventFaults) -> Plan:
        lost, duplicated, late, contrary = (
            rng.random() < p for p in (faults.lost, faults.duplicated, faults.late, faults.contrary)
        )
        forged = rng.choice(("spoofed", "custom")) if rng.random() < faults.forged else None
        return cls(lost, duplicated, late, contrary, forged)


@dataclass
class ChaosResult:
    seed: int
    jobs: int
    in_flight: int
    seconds: float = 0.0
    lost: int = 0
    double: int = 0
    wrong: int = 0
    dlq: int = 0
    succeeded: int = 0
    failed: int = 0
    truth: Counter[str] = field(default_factory=Counter)  # the jobs' true ends, in the simulator
    wire: Counter[str] = field(default_factory=Counter)  # faults injected in the workers, by kind
    events: Counter[str] = field(default_factory=Counter)  # event faults, by kind
    wrong_ends: Counter[str] = field(default_factory=Counter)  # "<truth> -> <status> <error>" of wrong jobs
    dead_letters: Counter[str] = field(default_factory=Counter)  # what the dead-letter messages are
    load: dict[str, list[float]] = field(default_factory=dict)  # the machine's load average before and after

    def as_dict(self) -> dict[str, Any]:
        return {k: dict(v) if isinstance(v, Counter) else v for k, v in self.__dict__.items()}

    def summary(self) -> str:
        wire = " ".join(f"{kind}={self.wire[kind]}" for kind in KINDS)
        events = " ".join(f"{kind}={n}" for kind, n in sorted(self.events.items()))
        return (
            f"chaos seed={self.seed} jobs={self.jobs} in_flight={self.in_flight} seconds={self.seconds:.0f} "
            f"| wire: {wire} | events: {events} "
            f"| lost={self.lost} double={self.double} wrong={self.wrong} dlq={self.dlq}"
        )


def chaos_config(seed: int, wire: dict[str, float] | None = None, **overrides: Any) -> CloudConfig:
    """The offline cloud of a chaos run: the template, the reconciler every real second, faults in every worker."""
    faults = {"seed": seed, **(WIRE_FAULTS if wire is None else wire)}
    values: dict[str, Any] = {
        "template": ROOT / "template.yaml",
        "stack_name": "chaos",
        "aws_port": 0,
        "http_port": 0,
        "speedup": SPEEDUP,
        "parameters": PARAMETERS,
        "async_retry_delay_seconds": 0.1,
        "faults": json.dumps(faults),
    }
    return CloudConfig(**(values | overrides))


def run_chaos(
    cloud: LocalCloud,
    jobs: int,
    in_flight: int,
    seed: int,
    faults: EventFaults = EventFaults(),
) -> ChaosResult:
    """Run `jobs` callback jobs under the event faults (and the cloud's wire faults); account them."""
    translate_jobs = TranslateJobs(cloud, delay_seconds=0, drop_events=True)  # jobs end at once; their events are
    simulator = translate_jobs.simulator  # this run's to put (or lose)
    machine_arn = waiting_machine(cloud, name=CHAOS_MACHINE)
    rng = random.Random(seed)
    plans: dict[str, Plan] = {}
    late: list[tuple[str, str]] = []  # (job id, status) put once every task has closed
    result = ChaosResult(seed=seed, jobs=jobs, in_flight=in_flight, load={"before": list(os.getloadavg())})
    accounted = JobsResult(jobs=jobs, in_flight=in_flight, seconds=0.0)
    wire_before = Counter(cloud.faults)

    def new_job() -> str:
        prefix = rng.choices(("", "fail-", "partial-"), weights=(70, 15, 15))[0]
        job_id = translate_jobs.start(f"{prefix}chaos-{len(plans)}", str(uuid.UUID(int=rng.getrandbits(128))))
        plans[job_id] = Plan.draw(rng, faults)
        return job_id

    def complete_job(job_id: str) -> None:
        plan, status = plans[job_id], ended(simulator, job_id)
        if plan.forged:
            result.events[forge(cloud, job_id, opposite(status), plan.forged)] += 1
        if plan.contrary:
            late.append((job_id, opposite(status)))
        if plan.lost:
            result.events["lost"] += 1
            del accounted.put_at[job_id]  # never put: neither early nor late
            return
        complete(cloud, job_id, status)
        if plan.duplicated:
            result.events["duplicated"] += 1
            complete(cloud, job_id, status)
        if plan.late:
            late.append((job_id, status))

    def put_late() -> None:
        """Copies and contrary statuses, after every task has closed: each must change nothing."""
        for job_id, status in late:
            result.events["late" if status == simulator.jobs[job_id].status else "contrary"] += 1
            complete(cloud, job_id, status)
        cloud.runtime.drain(timeout=120)  # their resume invocations (and retries) have run

    dead_before = dead_letter_count(cloud)
    jobs_result = run_jobs(
        cloud,
        jobs,
        in_flight,
        seed=seed,
        job_timeout=300.0,
        early=faults.early,
        job_seconds=(0.1, 1.0),
        machine=machine_arn,
        new_job=new_job,
        complete_job=complete_job,
        after_ends=put_late,
        result=accounted,
    )
    result.seconds = jobs_result.seconds
    result.events["early"] = jobs_result.early
    result.lost, result.double = jobs_result.lost, jobs_result.duplicated
    result.succeeded, result.failed = jobs_result.succeeded, jobs_result.failed
    for job_id, (status, error) in jobs_result.ends.items():
        truth = simulator.jobs[job_id].status
        result.truth[truth] += 1
        expected = ("SUCCEEDED", None) if truth == "COMPLETED" else ("FAILED", f"Translate.{truth}")
        if status != "RUNNING" and (status, error) != expected:
            result.wrong += 1
            result.wrong_ends[f"{truth} -> {status} {error}"] += 1
    result.dlq = dead_letter_count(cloud) - dead_before
    result.dead_letters = dead_letter_reasons(cloud)
    result.wire = Counter(cloud.faults) - wire_before
    result.load["after"] = list(os.getloadavg())
    return result


def ended(simulator: TranslateSimulator, job_id: str, timeout: float = 30.0) -> str:
    """The job's terminal status, once the simulator has ended it (jobs end at once; this waits for the signal)."""
    deadline = time.monotonic() + timeout
    while simulator.jobs[job_id].status in ACTIVE:
        if time.monotonic() > deadline:
            raise TimeoutError(f"translation job {job_id} did not end")
        time.sleep(0.005)
    return str(simulator.jobs[job_id].status)


def opposite(status: str) -> str:
    return "FAILED" if status == "COMPLETED" else "COMPLETED"


def forge(cloud: LocalCloud, job_id: str, status: str, kind: str) -> str:
    """A completion with the wrong status while the job waits, put by a client, not by Translate: with Translate's
    reserved source (`spoofed`: EventBridge must refuse it) or under a lookalike custom source (`custom`: accepted,
    no rule may match it). Returns what became of it: forged_refused, forged_accepted (spoofed, yet accepted)
    or forged_custom."""
    entry = {
        "Source": EVENT_SOURCE if kind == "spoofed" else "custom.translate",
        "DetailType": EVENT_DETAIL_TYPE,
        "Detail": json.dumps({"jobId": job_id, "jobStatus": status}),
    }
    refused = cloud.client("events").put_events(Entries=[entry])["FailedEntryCount"] == 1
    return "forged_custom" if kind == "custom" else "forged_refused" if refused else "forged_accepted"


def dead_letter_reasons(cloud: LocalCloud) -> Counter[str]:
    """What the resume dead-letter queue holds: `<function> <errorType>` of a Lambda destination record, or
    `<source> event` of an event a rule gave up on (read, then left visible again for whoever looks next)."""
    sqs, url = cloud.client("sqs"), cloud.stack.outputs["ResumeDeadLetterQueueUrl"]
    functions = {r.physical_id: r.logical_id for r in cloud.stack.of_type("AWS::Lambda::Function")}
    reasons: Counter[str] = Counter()
    handles: list[str] = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60).get(
        "Messages", []
    ):
        for message in messages:
            handles.append(message["ReceiptHandle"])
            body = json.loads(message["Body"])
            if "requestContext" in body:
                function = functions.get(body["requestContext"]["functionArn"].split(":")[6], "?")
                reasons[f"{function} {body['responsePayload'].get('errorType')}"] += 1
            else:
                reasons[f"{body.get('source')} event"] += 1
    for handle in handles:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    return reasons


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--in-flight", type=int, default=50)
    parser.add_argument("--wire", type=json.loads, default=WIRE_FAULTS, help="wire faults (JSON), default %(default)s")
    parser.add_argument(
        "--out", type=Path, default=OUT / "chaos.json", help="the JSON report (the functions' log beside)"
    )
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    log = args.out.with_name("chaos-functions.log")
    log.write_text("")  # this run's logs only
    route_logs(log)
    with LocalCloud(chaos_config(args.seed, args.wire, function_log=log)) as cloud:
        result = run_chaos(cloud, args.jobs, args.in_flight, args.seed)
    print(result.summary(), flush=True)
    report = {"machine": machine(), "wire_faults": args.wire, "event_faults": asdict(EventFaults())}
    args.out.write_text(json.dumps(report | result.as_dict(), indent=2))
    return int(result.lost > 0 or result.double > 0 or result.wrong > 0)


if __name__ == "__main__":
    raise SystemExit(main())
