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

The cloud is an established account (1,000 concurrent executions, Macie on): a new account's 10, shared offline by
workers on two cores whose invocations last far longer than on Lambda, held its slots long enough that registrations
were throttled through their whole Retry (2 of 100 jobs in one run beside another), which measured the machine, not
the faults (the new account's shared quota has tests of its own: tests/localcloud/test_function_pool.py).

Durable waiters run once those jobs have ended, before the late events (`--durable`, default a tenth of the jobs,
with the same share of the in-flight slots): documents executions of DocumentsDurableFunction
(src/shared/documents/durable.py), whose
Translate job, started by the execution and found in the simulator by its JobName, gets the same event faults as a job
above, keyed by its job id, while its Macie job completes as Macie would; the wire faults hit the function's replays
as they hit every worker. Each is accounted from its durable execution: lost (still running after the run's bound),
double (one callback closed twice: two CallbackSucceeded/Failed/TimedOut events of one callback Id), wrong (SUCCEEDED
although its Translate or Macie job did not complete, FAILED with an ErrorMessage not opening `Translate.<status>:`
for a failed Translate job, or not `Macie.` for a failed Macie job). The totals (lost, double, wrong) count both
kinds; succeeded and failed count the Step Functions jobs.
One summary line is printed; everything is written to .aws-sam/bench/chaos.json. docs/reliability.md has the model.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
import uuid
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.bench import machine
from bench.callbacks import JobsResult, TranslateJobs, complete, dead_letter_count, run_jobs, waiting_machine
from localcloud.client import durable_history, route_logs
from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.runtime.lambda_faults import KINDS
from localcloud.simulators.macie import MacieSimulator
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
DURABLE_SHARE = 0.1  # the durable waiters' default number, as a share of the jobs
CALLBACK_CLOSES = frozenset({"CallbackSucceeded", "CallbackFailed", "CallbackTimedOut"})  # close a callback
MACIE_DELAY_SECONDS = 30.0  # simulated: the durable waiters' Macie jobs end half a real second after they start


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
class DurableResult:
    """The durable waiters' accounting: documents executions of DocumentsDurableFunction."""

    jobs: int = 0
    in_flight: int = 0
    seconds: float = 0.0  # from the first start until every execution had ended (or its bound had passed)
    lost: int = 0
    double: int = 0
    wrong: int = 0
    succeeded: int = 0
    failed: int = 0
    truth: Counter[str] = field(default_factory=Counter)  # their Translate jobs' true ends, in the simulator
    events: Counter[str] = field(default_factory=Counter)  # event faults of their Translate jobs, by kind
    wrong_ends: Counter[str] = field(default_factory=Counter)  # "<truth> -> <status> <error>: <message>"

    def as_dict(self) -> dict[str, Any]:
        return {k: dict(v) if isinstance(v, Counter) else v for k, v in self.__dict__.items()}

    def summary(self) -> str:
        return f"durable: jobs={self.jobs} lost={self.lost} double={self.double} wrong={self.wrong}"


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
    durable: DurableResult = field(default_factory=DurableResult)  # counted in lost, double and wrong too

    def as_dict(self) -> dict[str, Any]:
        def plain(value: Any) -> Any:
            if isinstance(value, DurableResult):
                return value.as_dict()
            return dict(value) if isinstance(value, Counter) else value

        return {k: plain(v) for k, v in self.__dict__.items()}

    def summary(self) -> str:
        wire = " ".join(f"{kind}={self.wire[kind]}" for kind in KINDS)
        events = " ".join(f"{kind}={n}" for kind, n in sorted(self.events.items()))
        return (
            f"chaos seed={self.seed} jobs={self.jobs} in_flight={self.in_flight} seconds={self.seconds:.0f} "
            f"| wire: {wire} | events: {events} | {self.durable.summary()} "
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
        "account": "established",  # see the module's docstring
    }
    return CloudConfig(**(values | overrides))


def run_chaos(
    cloud: LocalCloud,
    jobs: int,
    in_flight: int,
    seed: int,
    faults: EventFaults = EventFaults(),
    durable: int = 0,
) -> ChaosResult:
    """Run `jobs` callback jobs, then `durable` durable waiters (DurableWaiters), under the event faults (and the
    cloud's wire faults); account them."""
    translate_jobs = TranslateJobs(cloud, delay_seconds=0, drop_events=True)  # jobs end at once; their events are
    simulator = translate_jobs.simulator  # this run's to put (or lose)
    machine_arn = waiting_machine(cloud, name=CHAOS_MACHINE)
    rng = random.Random(seed)
    plans: dict[str, Plan] = {}
    late: list[tuple[str, str]] = []  # (job id, status) put once every task has closed
    result = ChaosResult(seed=seed, jobs=jobs, in_flight=in_flight, load={"before": list(os.getloadavg())})
    accounted = JobsResult(jobs=jobs, in_flight=in_flight, seconds=0.0)
    wire_before = Counter(cloud.faults)
    durable_in_flight = max(1, math.ceil(in_flight * durable / max(jobs, 1)))  # their share of the slots
    waiters = DurableWaiters(cloud, simulator, durable, durable_in_flight, seed, faults)

    def new_job() -> str:
        prefix = rng.choices(("", "fail-", "partial-"), weights=(70, 15, 15))[0]
        job_id = translate_jobs.start(f"{prefix}chaos-{len(plans)}", str(uuid.UUID(int=rng.getrandbits(128))))
        plans[job_id] = Plan.draw(rng, faults)
        return job_id

    def complete_job(job_id: str) -> None:
        if not put_completion(cloud, simulator, job_id, plans[job_id], result.events, late):
            del accounted.put_at[job_id]  # never put: neither early nor late

    def put_late() -> None:
        """Once every job's execution has ended: the durable waiters, then copies and contrary statuses of both
        kinds' completions, after every wait has closed; each must change nothing."""
        waiters.run()
        for job_id, status in late:
            result.events["late" if status == simulator.jobs[job_id].status else "contrary"] += 1
            complete(cloud, job_id, status)
        for job_id, status in waiters.late:
            waiters.result.events["late" if status == simulator.jobs[job_id].status else "contrary"] += 1
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
    result.seconds = jobs_result.seconds + waiters.result.seconds  # until every execution of both kinds had ended
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
    result.durable = waiters.account()
    result.lost += result.durable.lost
    result.double += result.durable.double
    result.wrong += result.durable.wrong
    result.dlq = dead_letter_count(cloud) - dead_before
    result.dead_letters = dead_letter_reasons(cloud)
    result.wire = Counter(cloud.faults) - wire_before
    result.load["after"] = list(os.getloadavg())
    return result


def put_completion(
    cloud: LocalCloud,
    simulator: TranslateSimulator,
    job_id: str,
    plan: Plan,
    events: Counter[str],
    late: list[tuple[str, str]],
) -> bool:
    """Put the ended job's completion as its plan says: a forgery first (while the job waits), the completion (twice
    if duplicated), and a copy or the contrary status queued in `late` (put after every wait has closed); the event
    faults counted in `events`. False if the plan loses the completion (nothing put)."""
    status = ended(simulator, job_id)
    if plan.forged:
        events[forge(cloud, job_id, opposite(status), plan.forged)] += 1
    if plan.contrary:
        late.append((job_id, opposite(status)))
    if plan.lost:
        events["lost"] += 1
        return False
    complete(cloud, job_id, status)
    if plan.duplicated:
        events["duplicated"] += 1
        complete(cloud, job_id, status)
    if plan.late:
        late.append((job_id, status))
    return True


class DurableWaiters:
    """`count` documents executions of DocumentsDurableFunction, at most `in_flight` at a time: each execution's
    Translate job (started by the execution, in the run's simulator, where it ends at once and puts no event) gets its
    completion from here, under a Plan drawn as run_chaos's jobs' are, `job_seconds` after the job appeared (or at
    once for a share `early`, racing the callback's registration). Its Macie job runs in a simulated Macie of the run
    and completes normally (its job log relayed to the resume function). `run` returns once every execution has ended
    (or `job_timeout` real seconds have passed); `account` then accounts each one from its durable execution and
    history against the simulators' truth."""

    def __init__(
        self,
        cloud: LocalCloud,
        simulator: TranslateSimulator,
        count: int,
        in_flight: int,
        seed: int,
        faults: EventFaults,
        job_timeout: float = 300.0,
        job_seconds: tuple[float, float] = (0.1, 1.0),
    ) -> None:
        self.cloud, self.simulator, self.faults = cloud, simulator, faults
        self.in_flight, self.job_timeout, self.job_seconds = in_flight, job_timeout, job_seconds
        self.rng = random.Random(f"{seed}/durable")  # a stream of their own: the jobs' draws are as without them
        self.macie = MacieSimulator(cloud.config.region, clock=cloud.clock, delay_seconds=MACIE_DELAY_SECONDS)
        if count:
            cloud.add_simulator(self.macie)
        self.result = DurableResult(jobs=count, in_flight=in_flight if count else 0)
        self.late: list[tuple[str, str]] = []  # (job id, status) put once every wait has closed
        self.executions: dict[str, str] = {}  # execution name -> its ARN
        self.job_ids: dict[str, str] = {}  # execution name -> its Translate job's id
        self.put_at: dict[str, datetime] = {}  # job id -> when its completion was put, on the cloud's clock
        self._jobs_seen = 0
        self._by_job_name: dict[str, str] = {}  # Translate JobName -> job id

    def run(self) -> None:
        cloud, lambda_, s3 = self.cloud, self.cloud.client("lambda"), self.cloud.client("s3")
        function, bucket = f"{cloud.stack.name}-documents-durable", cloud.stack.outputs["DocumentBucketName"]
        planned: deque[tuple[str, Plan, float]] = deque()
        for n in range(self.result.jobs):
            prefix = self.rng.choices(("", "fail-", "partial-"), weights=(70, 15, 15))[0]  # the Translate job's end
            plan = Plan.draw(self.rng, self.faults)
            wait = 0.0 if self.rng.random() < self.faults.early else self.rng.uniform(*self.job_seconds)
            planned.append((f"{prefix}chaos-durable-{n}", plan, wait))
        running: dict[str, float] = {}  # execution name -> deadline
        unstarted: dict[str, tuple[Plan, float]] = {}  # running executions whose Translate job is not seen yet
        plans: dict[str, Plan] = {}  # job id -> its plan
        due: list[tuple[float, str]] = []  # (when, job id) completions to put
        started, polled = time.monotonic(), 0.0
        while planned or running or due:
            while planned and len(running) < self.in_flight:
                name, plan, wait = planned.popleft()
                s3.put_object(Bucket=bucket, Key=f"chaos/{name}/in/note.txt", Body=b"A short note to translate.")
                request = {
                    "inputPrefix": f"chaos/{name}/in/",
                    "outputPrefix": f"chaos/{name}/out/",
                    "sourceLanguage": "en",
                    "targetLanguages": ["de"],
                }
                answer = lambda_.invoke(
                    FunctionName=function,
                    Qualifier="$LATEST",
                    InvocationType="Event",
                    DurableExecutionName=name,
                    Payload=json.dumps(request).encode(),
                )
                self.executions[name] = answer["DurableExecutionArn"]
                running[name] = time.monotonic() + self.job_timeout
                unstarted[name] = (plan, wait)
            now = time.monotonic()
            for name in list(unstarted):
                job_id = self._translation_job(f"{cloud.stack.name}.{name}")
                if job_id is not None:
                    plan, wait = unstarted.pop(name)
                    self.job_ids[name], plans[job_id] = job_id, plan
                    due.append((now + wait, job_id))
            ready = sorted(job_id for when, job_id in due if when <= now)
            due[:] = [(when, job_id) for when, job_id in due if when > now]
            for job_id in ready:
                self.put_at[job_id] = cloud.clock.now()  # the histories' time: the cloud's clock
                if not put_completion(cloud, self.simulator, job_id, plans[job_id], self.result.events, self.late):
                    del self.put_at[job_id]
            if now - polled > 0.2:
                polled = now
                for name in list(running):
                    status = lambda_.get_durable_execution(DurableExecutionArn=self.executions[name])["Status"]
                    if status != "RUNNING" or running[name] < now:
                        del running[name]
                        unstarted.pop(name, None)  # ended before it started its Translate job: nothing to put
            time.sleep(0.01)
        self.result.seconds = time.monotonic() - started

    def _translation_job(self, job_name: str) -> str | None:
        """The id of the simulator's Translate job named `job_name` (the stack names its jobs `<stack>.<execution>`),
        once the execution has started it."""
        jobs = list(self.simulator.jobs.items())  # one C-level copy: the simulator's threads add jobs meanwhile
        for job_id, job in jobs[self._jobs_seen :]:
            self._by_job_name[str(job.request.get("JobName"))] = job_id
        self._jobs_seen = len(jobs)
        return self._by_job_name.get(job_name)

    def account(self) -> DurableResult:
        """Each execution against its jobs' true ends (after `join`, and after the late events)."""
        lambda_, result = self.cloud.client("lambda"), self.result
        for name, arn in self.executions.items():
            described = lambda_.get_durable_execution(DurableExecutionArn=arn)
            status, error = described["Status"], described.get("Error", {})
            history = durable_history(self.cloud, arn)
            closes = Counter(e["Id"] for e in history if e["EventType"] in CALLBACK_CLOSES)
            result.double += any(n > 1 for n in closes.values())
            job_id = self.job_ids.get(name)
            registered = translate_registered(history)
            put_at = self.put_at.get(job_id or "")
            result.events["early"] += bool(registered and put_at and put_at < registered)
            truth = str(self.simulator.jobs[job_id].status) if job_id else "NOT_STARTED"
            result.truth[truth] += 1
            if status == "RUNNING":
                result.lost += 1
                continue
            result.succeeded += status == "SUCCEEDED"
            result.failed += status != "SUCCEEDED"
            if not self._as_truly_ended(name, truth, described):
                result.wrong += 1
                message = f"{error.get('ErrorType')}: {str(error.get('ErrorMessage'))[:80]}" if error else ""
                result.wrong_ends[f"{truth} -> {status} {message}".rstrip()] += 1
        return result

    def _as_truly_ended(self, name: str, truth: str, described: dict[str, Any]) -> bool:
        """Whether the execution ended as its jobs did: SUCCEEDED with the Translate job's id and status when both
        jobs completed; FAILED with JobFailedError `Translate.<status>: <cause>` when the Translate job failed, or an
        error `Macie.<...>` when only the Macie job did not complete."""
        status, error = described["Status"], described.get("Error", {})
        message = str(error.get("ErrorMessage", ""))
        if truth in ("FAILED", "COMPLETED_WITH_ERROR"):
            failed_with = str(error.get("ErrorType", "")).endswith("JobFailedError")
            return status == "FAILED" and failed_with and message.startswith(f"Translate.{truth}:")
        if truth != "COMPLETED":
            return False  # no Translate job, or one that never ended
        if self._macie_truth(name) != "JOB_COMPLETED":
            return status == "FAILED" and message.startswith("Macie.")
        if status != "SUCCEEDED":
            return False
        output = json.loads(described.get("Result") or "{}")
        translation, classification = output.get("translation", {}), output.get("classification", {})
        return (translation.get("jobId"), translation.get("status"), classification.get("status")) == (
            self.job_ids[name],
            "COMPLETED",
            "JOB_COMPLETED",
        )

    def _macie_truth(self, name: str) -> str:
        """How the execution's Macie job truly ended: JOB_COMPLETED, JOB_CANCELLED, ERROR (completed with errors),
        RUNNING, or NOT_STARTED."""
        job_name = f"{self.cloud.stack.name}.{name}"
        job = next((j for j in list(self.macie.jobs.values()) if j.request.get("name") == job_name), None)
        if job is None:
            return "NOT_STARTED"
        if job.status == "COMPLETE":
            return "ERROR" if job.error else "JOB_COMPLETED"
        return "JOB_CANCELLED" if job.status == "CANCELLED" else str(job.status)


def translate_registered(history: list[dict[str, Any]]) -> datetime | None:
    """When the execution's Translate submitter had registered its callback (the step's StepSucceeded, which the SDK
    checkpoints once the submitter has returned: as TaskSubmitted follows a task token's registration)."""
    return next(
        (
            e["EventTimestamp"]
            for e in history
            if e["EventType"] == "StepSucceeded" and e.get("Name") == "translate submitter"
        ),
        None,
    )


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
    parser.add_argument(
        "--durable",
        type=int,
        default=None,
        help=f"durable waiters after the jobs (default: {DURABLE_SHARE * 100:.0f}%% of --jobs, rounded down)",
    )
    parser.add_argument("--wire", type=json.loads, default=WIRE_FAULTS, help="wire faults (JSON), default %(default)s")
    parser.add_argument(
        "--out", type=Path, default=OUT / "chaos.json", help="the JSON report (the functions' log beside)"
    )
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    log = args.out.with_name("chaos-functions.log")
    log.write_text("")  # this run's logs only
    route_logs(log)
    durable = int(args.jobs * DURABLE_SHARE) if args.durable is None else args.durable
    with LocalCloud(chaos_config(args.seed, args.wire, function_log=log)) as cloud:
        result = run_chaos(cloud, args.jobs, args.in_flight, args.seed, durable=durable)
    print(result.summary(), flush=True)
    report = {"machine": machine(), "wire_faults": args.wire, "event_faults": asdict(EventFaults())}
    args.out.write_text(json.dumps(report | result.as_dict(), indent=2))
    return int(result.lost > 0 or result.double > 0 or result.wrong > 0)


if __name__ == "__main__":
    raise SystemExit(main())
