"""Many callback jobs at once on the offline cloud: the register -> completion event -> resume path of the real
template, with a minimal waiting workflow, accounted job by job from the executions' histories.

Each job starts an execution that waits on `lambda:invoke.waitForTaskToken` (RegisterTokenFunction stores the token
under the job id), then its Translate completion event is put on the default bus as the service puts it, either
after the registration (the usual order) or at once (the completion racing the registration). ResumeJobFunction
resumes the execution. A job is lost if its execution never ends, duplicated if its task was closed twice (one attempt
closed twice: a Retry's attempts are closed once each).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from moto.dynamodb.models import DynamoDBBackend
from moto.stepfunctions.parser.models import StepFunctionsParserBackend

from localcloud.account import ACCOUNT_ID
from localcloud.cloud import LocalCloud
from localcloud.fixes.events import as_service
from localcloud.regions import bucket_location
from localcloud.runtime.lambdas import Worker
from localcloud.simulators.translate import TranslateSimulator

ROOT = Path(__file__).resolve().parents[1]

WAITING_MACHINE = "callback-kit-bench-waiting"
INPUT, OUTPUT = "s3://callback-jobs-input/documents/", "s3://callback-jobs-output/translations/"
CLOSES = ("TaskSucceeded", "TaskFailed", "TaskTimedOut")  # history events that close a task


@dataclass
class JobsResult:
    jobs: int
    in_flight: int
    seconds: float
    succeeded: int = 0
    failed: int = 0
    lost: int = 0
    duplicated: int = 0
    dead_letters: int = 0
    early: int = 0  # jobs whose completion was put before their registration
    all_waiting_seconds: float = 0.0  # a run `together`: from its first start until every job was waiting
    failures: list[str] = field(default_factory=list)  # error names of failed executions
    ends: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # job id -> (execution status, error)
    put_at: dict[str, datetime] = field(default_factory=dict)  # job id -> when its completion was put
    resume_ms: list[float] = field(default_factory=list)  # completion put -> task closed, jobs registered by then
    closed_at: dict[str, float] = field(default_factory=dict)  # job id -> task closed (epoch), the same jobs

    def as_dict(self) -> dict[str, Any]:
        details = ("failures", "ends", "put_at", "resume_ms", "closed_at")
        counts = {k: v for k, v in self.__dict__.items() if k not in details}
        return counts | {"failures": sorted(set(self.failures))}

    def percentile(self, p: float) -> float:
        ordered = sorted(self.resume_ms)
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 1) if ordered else float("nan")


def function_name(cloud: LocalCloud, logical_id: str) -> str:
    """The physical name of the stack's function `logical_id`."""
    return next(r.physical_id for r in cloud.stack.of_type("AWS::Lambda::Function") if r.logical_id == logical_id)


def registration_retry() -> list[dict[str, Any]]:
    """The Retry of the documents workflow's Translate registration (statemachines/documents.asl.json): a throttled
    or failed registration (a new account runs ten Lambda invocations at once) is tried again as the stack's is."""

    def tasks(node: Any) -> Iterator[dict[str, Any]]:
        if isinstance(node, dict):
            if node.get("Parameters", {}).get("FunctionName") == "${RegisterTokenFunctionArn}":
                yield node
            for value in node.values():
                yield from tasks(value)
        elif isinstance(node, list):
            for value in node:
                yield from tasks(value)

    definition = json.loads((ROOT / "statemachines" / "documents.asl.json").read_text())
    task = next(t for t in tasks(definition) if t["Parameters"]["Payload"]["service"] == "translate")
    return list(task.get("Retry", []))


def wait_for_job(cloud: LocalCloud, job_id_path: str, timeout_seconds: int) -> dict[str, Any]:
    """The task state that waits for a job's callback, as the stack's workflows wait: RegisterTokenFunction stores
    its token under the job id read at `job_id_path`, for `timeout_seconds` on the cloud's clock, the registration
    retried as the documents workflow retries it."""
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "Parameters": {
            "FunctionName": function_name(cloud, "RegisterTokenFunction"),
            "Payload": {
                "service": "translate",
                "jobId.$": job_id_path,
                "taskToken.$": "$$.Task.Token",
                "executionArn.$": "$$.Execution.Id",
                "stateName.$": "$$.State.Name",
                "stateEnteredTime.$": "$$.State.EnteredTime",
                "retryCount.$": "$$.State.RetryCount",
            },
        },
        "TimeoutSeconds": timeout_seconds,
        "Retry": registration_retry(),
    }


def waiting_machine(cloud: LocalCloud, timeout_seconds: int | None = None, name: str = WAITING_MACHINE) -> str:
    """A state machine with one task that waits for the callback of the job in its input (created once per cloud and
    name): `wait_for_job` for `timeout_seconds` (default: ten real minutes at the cloud's speed-up)."""
    sfn = cloud.client("stepfunctions")
    for machine in sfn.list_state_machines()["stateMachines"]:
        if machine["name"] == name:
            return str(machine["stateMachineArn"])
    waiting = wait_for_job(cloud, "$.jobId", timeout_seconds or round(600 * cloud.clock.speedup))
    definition = {"StartAt": "WaitForJob", "States": {"WaitForJob": {**waiting, "End": True}}}
    created = sfn.create_state_machine(
        name=name,
        definition=json.dumps(definition),
        roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/bench",
    )
    return str(created["stateMachineArn"])


def ends_queue(cloud: LocalCloud, machine: str) -> str:
    """A queue that receives the end of every execution of `machine` (Step Functions' status change events, through
    an EventBridge rule), created once per cloud."""
    sqs, events, name = cloud.client("sqs"), cloud.client("events"), machine.rpartition(":")[2]
    url = str(sqs.create_queue(QueueName=f"{name}-ends")["QueueUrl"])
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    pattern = {
        "source": ["aws.states"],
        "detail-type": ["Step Functions Execution Status Change"],
        "detail": {"stateMachineArn": [machine], "status": ["SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"]},
    }
    events.put_rule(Name=f"{name}-ends", EventPattern=json.dumps(pattern))
    events.put_targets(Rule=f"{name}-ends", Targets=[{"Id": "ends", "Arn": arn}])
    return url


class TranslateJobs:
    """Translate jobs the way the stack starts them, in a simulated Translate (knobs as TranslateSimulator's): each one
    named `<stack>.<name>`, as the stack names its jobs, so that a completion racing its registration is told from
    another stack's (the resume function describes it) and kept."""

    def __init__(self, cloud: LocalCloud, **knobs: Any) -> None:
        self.simulator = TranslateSimulator(cloud.config.region, clock=cloud.clock, **knobs)
        cloud.add_simulator(self.simulator)
        s3 = cloud.client("s3")
        for uri in (INPUT, OUTPUT):
            s3.create_bucket(Bucket=uri.split("/")[2], **bucket_location(cloud.config.region))
        s3.put_object(Bucket=INPUT.split("/")[2], Key="documents/note.txt", Body=b"a short note to translate")
        self.stack, self.translate = cloud.stack.name, cloud.client("translate")

    def new(self) -> str:
        """A new job that never ends by itself (with a simulator that ends none): the run puts its completion."""
        return self.start(uuid.uuid4().hex, str(uuid.uuid4()))

    def start(self, name: str, client_token: str) -> str:
        """A new job's id."""
        return str(
            self.translate.start_text_translation_job(
                JobName=f"{self.stack}.{name}",
                InputDataConfig={"S3Uri": INPUT, "ContentType": "text/plain"},
                OutputDataConfig={"S3Uri": OUTPUT},
                DataAccessRoleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/callback-jobs-translate",
                SourceLanguageCode="en",
                TargetLanguageCodes=["fr"],
                ClientToken=client_token,
            )["JobId"]
        )


def _completions(cloud: LocalCloud, job_ids: list[str], status: str = "COMPLETED") -> None:
    """Translate's completion events for the jobs, put as the service puts them: one PutEvents call."""
    entries = [
        {
            "Source": "aws.translate",
            "DetailType": "Translate TextTranslationJob State Change",
            "Detail": json.dumps({"jobId": job_id, "jobStatus": status}),
        }
        for job_id in job_ids
    ]
    with as_service():
        answer = cloud.client("events").put_events(Entries=entries)
    if answer["FailedEntryCount"]:
        raise RuntimeError(f"completions of jobs {job_ids} were refused: {answer['Entries']}")


def complete(cloud: LocalCloud, job_id: str, status: str = "COMPLETED") -> None:
    """Translate's completion event for the job, put as the service puts it."""
    _completions(cloud, [job_id], status)


PUT_EVENTS_ENTRIES = 10  # EventBridge's most entries in one PutEvents call


def complete_together(cloud: LocalCloud, job_ids: list[str], result: JobsResult) -> None:
    """Translate's completion events for all the jobs at once, as when N jobs end together: PutEvents calls of 10
    entries, each from a thread of its own, all released by one barrier (one thread putting them one by one would
    spread them over the puts' own time, and fewer resumes would overlap than the run names). Each job's put time is
    its call's release."""
    batches = [job_ids[i : i + PUT_EVENTS_ENTRIES] for i in range(0, len(job_ids), PUT_EVENTS_ENTRIES)]
    release = threading.Barrier(len(batches))
    errors: list[Exception] = []

    def put(batch: list[str]) -> None:
        release.wait()
        at = datetime.now(UTC)
        result.put_at.update(dict.fromkeys(batch, at))
        try:
            _completions(cloud, batch)
        except Exception as exc:  # noqa: BLE001 - raised by the caller, once every thread has joined
            errors.append(exc)

    threads = [threading.Thread(target=put, args=(batch,)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


SEGMENTS = ("rule matched", "Lambda started", "first AWS call", "SendTaskSuccess", "next state")


@contextmanager
def resume_segments(cloud: LocalCloud, result: JobsResult) -> Iterator[dict[str, list[float]]]:
    """Time each resume of the jobs run meanwhile, segment by segment, in ms: completion put -> rule matched (the
    resume function's asynchronous invocation queued) -> Lambda started (a worker took the event) -> first AWS call
    (the resume function's read of the job's token reached DynamoDB) -> SendTaskSuccess called -> next state
    (TaskSucceeded in the execution's history), filled in as run_jobs accounts for each job. Probes wrap the offline
    cloud's own seams; they are removed on exit."""
    # The app's key (imported here: shared's modules read the functions' environment when imported, as at a cold start,
    # and a test collecting this module must not import them before its fixtures set that environment)
    from shared.callback.tokens import job_key

    resume, register = function_name(cloud, "ResumeJobFunction"), function_name(cloud, "RegisterTokenFunction")
    times: dict[str, dict[str, float]] = {}  # job id -> segment end -> epoch seconds
    token_job: dict[str, str] = {}
    read_at: dict[str, float] = {}  # token table key -> its first read since the resume function started
    runtime, invoke_async = cloud.runtime, cloud.runtime.invoke_async
    worker_invoke, send_success = Worker.invoke, StepFunctionsParserBackend.send_task_success
    get_item = DynamoDBBackend.get_item

    def queued(name_or_arn: str, event: Any) -> None:
        if name_or_arn.endswith(resume) and isinstance(event, dict):
            times.setdefault(str(event.get("detail", {}).get("jobId")), {})["rule matched"] = time.time()
        invoke_async(name_or_arn, event)

    def invoked(worker: Worker, event: Any, request_id: str, function_arn: str) -> Any:
        if worker.spec.name == resume:
            job_id = str(event.get("detail", {}).get("jobId"))
            times.setdefault(job_id, {})["Lambda started"] = time.time()
            read_at.pop(job_key("translate", job_id), None)
        elif worker.spec.name == register:
            token_job[event.get("taskToken", "")] = str(event.get("jobId"))
        return worker_invoke(worker, event, request_id, function_arn)

    def read(backend: DynamoDBBackend, table_name: str, keys: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        for value in keys.values():  # as the request has it: {"jobKey": {"S": "translate#<job id>"}}
            read_at.setdefault(str(next(iter(value.values()))), time.time())
        return get_item(backend, table_name, keys, *args, **kwargs)

    def sent(backend: StepFunctionsParserBackend, task_token: str, outcome: str) -> None:
        if task_token in token_job:
            times.setdefault(token_job[task_token], {})["SendTaskSuccess"] = time.time()
        send_success(backend, task_token, outcome)

    segments: dict[str, list[float]] = {name: [] for name in SEGMENTS}
    runtime.invoke_async = queued  # type: ignore[method-assign]
    Worker.invoke = invoked  # type: ignore[method-assign]
    DynamoDBBackend.get_item = read  # type: ignore[method-assign]
    StepFunctionsParserBackend.send_task_success = sent  # type: ignore[method-assign]
    try:
        yield segments
    finally:
        del runtime.invoke_async
        Worker.invoke = worker_invoke  # type: ignore[method-assign]
        DynamoDBBackend.get_item = get_item  # type: ignore[method-assign]
        StepFunctionsParserBackend.send_task_success = send_success  # type: ignore[method-assign]
    for job_id, closed in result.closed_at.items():
        marks = times.get(job_id, {}) | {"first AWS call": read_at.get(job_key("translate", job_id))}
        moments = [result.put_at[job_id].timestamp(), *(marks.get(name) for name in SEGMENTS[:-1]), closed]
        if None not in moments:
            for name, (before, after) in zip(SEGMENTS, itertools.pairwise(moments), strict=True):
                segments[name].append((after - before) * 1000)  # type: ignore[operator]


@contextmanager
def registrations(cloud: LocalCloud) -> Iterator[set[str]]:
    """The ids of the jobs whose registration (RegisterTokenFunction's invocation) has answered, while the block
    runs: a probe on the offline cloud's Lambda runtime, removed on exit."""
    register, runtime = function_name(cloud, "RegisterTokenFunction"), cloud.runtime
    invoke, registered = runtime.invoke, set()

    def registering(name_or_arn: str, event: Any, wait: bool = False) -> Any:
        answer = invoke(name_or_arn, event, wait)
        if name_or_arn.endswith(register):
            registered.add(str(event.get("jobId")))
        return answer

    runtime.invoke = registering  # type: ignore[method-assign]
    try:
        yield registered
    finally:
        del runtime.invoke


def run_jobs(
    cloud: LocalCloud,
    jobs: int,
    in_flight: int,
    seed: int = 1,
    job_timeout: float = 120.0,
    early: float = 0.2,
    job_seconds: tuple[float, float] = (0.0, 0.5),
    result: JobsResult | None = None,
    machine: str | None = None,
    new_job: Callable[[], str] | None = None,
    complete_job: Callable[[str], None] | None = None,
    after_ends: Callable[[], None] = lambda: None,
    together: bool = False,
    end_together: Callable[[list[str]], None] | None = None,
) -> JobsResult:
    """Run `jobs` callback jobs, at most `in_flight` at a time; return the accounting.

    Each job (its id from `new_job`; default: a Translate job of the stack in a simulated Translate, TranslateJobs)
    runs an execution of `machine` (default: `waiting_machine`). Its completion is put (by `complete_job`, default
    `complete`) `job_seconds` (a random span) after its start, except for a fraction `early` put at once (racing the
    registration). With `together` instead (`early` and `job_seconds` unused), every completion is held until every
    job of the run is registered (all of them waiting at once), then all are put at once (`complete_together`;
    `complete_job` unused), as when N services' jobs end together; or, with `end_together`, the jobs are handed to it
    then instead (e.g. to end them at once with their events lost). Ends are watched through the executions' status
    change events, which a rule sends to a queue, so the harness itself adds little load however many jobs are in
    flight. Once every execution has ended (or timed out after `job_timeout` real seconds), `after_ends` runs; then
    each job is accounted from its execution's history."""
    machine = machine or waiting_machine(cloud)
    new_job = new_job or TranslateJobs(cloud, delay_seconds=math.inf, drop_events=True).new
    complete_job = complete_job or (lambda job_id: complete(cloud, job_id))
    rng = random.Random(seed)
    sfn = cloud.client("stepfunctions")
    dead_letters_before = dead_letter_count(cloud)
    slots = threading.Semaphore(in_flight)
    running: dict[str, float] = {}  # execution ARN -> deadline
    ended: set[str] = set()  # execution ARNs whose end event came
    sqs = cloud.client("sqs")
    due: list[tuple[float, str]] = []  # (when, job id) completions to put
    lock, done = threading.Lock(), threading.Event()
    failed: list[BaseException] = []  # a helper's error: the run stops with it (its jobs would wait for ever)
    result = result or JobsResult(jobs=jobs, in_flight=in_flight, seconds=0.0)
    executions: list[str] = []

    def complete_when_due() -> None:
        while not (done.is_set() and not due) and not failed:
            now = time.monotonic()
            with lock:
                ready = [job for when, job in due if when <= now]
                due[:] = [(when, job) for when, job in due if when > now]
            for job_id in ready:
                result.put_at[job_id] = datetime.now(UTC)
                complete_job(job_id)
            time.sleep(0.01)

    def watch_ends() -> None:
        queue = ends_queue(cloud, machine)
        while not (done.is_set() and not running) and not failed:
            messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1)
            messages = messages.get("Messages", [])
            if messages:
                sqs.delete_message_batch(
                    QueueUrl=queue,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
                )
            with lock:
                ended.update(json.loads(m["Body"])["detail"]["executionArn"] for m in messages)
                over = [arn for arn, deadline in running.items() if arn in ended or deadline < time.monotonic()]
                for arn in over:
                    del running[arn]
            for _ in over:
                slots.release()

    def guarded(helper: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                helper()
            except BaseException as exc:
                failed.append(exc)
                raise

        return run

    def put_once_all_wait(registered: set[str]) -> None:
        """Once every held job is registered (or its execution has ended, or `job_timeout` has passed), put every
        held completion at once."""
        deadline, pending = time.monotonic() + job_timeout, dict(holding)
        while pending and time.monotonic() < deadline and not failed:
            time.sleep(0.05)
            with lock:
                pending = {job: arn for job, arn in pending.items() if job not in registered and arn not in ended}
        result.all_waiting_seconds = time.monotonic() - started
        if end_together is None:
            complete_together(cloud, list(holding), result)
        else:
            end_together(list(holding))

    helpers = [threading.Thread(target=guarded(complete_when_due)), threading.Thread(target=guarded(watch_ends))]
    for helper in helpers:
        helper.start()
    holding: dict[str, str] = {}  # job id -> execution ARN: completions put together once all are waiting
    started = time.monotonic()
    with registrations(cloud) if together else contextlib.nullcontext(set()) as registered:
        for _ in range(jobs):
            while not slots.acquire(timeout=1.0):
                if failed:
                    break
            if failed:
                break
            job_id = new_job()
            arn = sfn.start_execution(stateMachineArn=machine, name=job_id, input=json.dumps({"jobId": job_id}))
            with lock:
                if arn["executionArn"] in ended:  # ended before it was counted in
                    slots.release()
                else:
                    running[arn["executionArn"]] = time.monotonic() + job_timeout
                if together:
                    holding[job_id] = arn["executionArn"]
                else:
                    wait = 0.0 if rng.random() < early else rng.uniform(*job_seconds)
                    due.append((time.monotonic() + wait, job_id))
            executions.append(arn["executionArn"])
        if together:
            put_once_all_wait(registered)
    done.set()
    for helper in helpers:
        helper.join()
    if failed:
        raise RuntimeError(f"the run's {len(failed)} helper(s) failed; its jobs cannot be accounted") from failed[0]
    result.seconds = time.monotonic() - started
    after_ends()
    for arn in executions:
        described = sfn.describe_execution(executionArn=arn)
        events = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        closed = [e for e in events if e["type"] in CLOSES]
        result.ends[described["name"]] = (described["status"], described.get("error"))
        if described["status"] == "RUNNING":
            result.lost += 1
        elif described["status"] == "SUCCEEDED":
            result.succeeded += 1
        else:
            result.failed += 1
            result.failures.append(str(described.get("error")))
        result.duplicated += closed_twice(events)
        submitted = next((e["timestamp"] for e in events if e["type"] == "TaskSubmitted"), None)
        put_at = result.put_at.get(described["name"])
        result.early += bool(submitted and put_at and put_at < submitted)
        if closed and submitted and put_at and submitted < put_at:  # registered before its completion arrived
            result.resume_ms.append((closed[-1]["timestamp"] - put_at).total_seconds() * 1000)
            result.closed_at[described["name"]] = closed[-1]["timestamp"].timestamp()
    result.dead_letters = dead_letter_count(cloud) - dead_letters_before
    return result


def closed_twice(events: list[dict[str, Any]]) -> bool:
    """Whether one attempt of the task was closed more than once (a Retry's next attempt is a new task: its first
    attempt's TaskFailed and its last one's TaskSucceeded are one close each)."""
    closes: Counter[int] = Counter()  # attempt (TaskScheduled count) -> close events
    attempt = 0
    for event in events:
        if event["type"] == "TaskScheduled":
            attempt += 1
        elif event["type"] in CLOSES:
            closes[attempt] += 1
    return any(count > 1 for count in closes.values())


def dead_letter_count(cloud: LocalCloud) -> int:
    """How many messages the resume dead-letter queue holds now."""
    attributes = cloud.client("sqs").get_queue_attributes(
        QueueUrl=cloud.stack.outputs["ResumeDeadLetterQueueUrl"], AttributeNames=["ApproximateNumberOfMessages"]
    )
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])
