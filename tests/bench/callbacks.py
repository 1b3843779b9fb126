"""Many callback jobs at once on the offline cloud: the register -> completion event -> resume path of the real
template, with a minimal waiting workflow, accounted job by job from the executions' histories.

Each job starts an execution that waits on `lambda:invoke.waitForTaskToken` (RegisterTokenFunction stores the token
under the job id), then its Translate completion event is put on the default bus as the service puts it, either
after the registration (the usual order) or at once (the completion racing the registration). ResumeJobFunction
resumes the execution. A job is lost if its execution never ends, duplicated if its task was closed twice.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from localcloud.cloud import LocalCloud
from localcloud.deploy import ACCOUNT_ID
from localcloud.events import as_service

WAITING_MACHINE = "callback-kit-bench-waiting"


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
    failures: list[str] = field(default_factory=list)  # error names of failed executions

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "failures"} | {"failures": sorted(set(self.failures))}


def waiting_machine(cloud: LocalCloud, timeout_seconds: int = 600) -> str:
    """A state machine with one task that waits for its job's callback (created once per cloud)."""
    sfn = cloud.client("stepfunctions")
    for machine in sfn.list_state_machines()["stateMachines"]:
        if machine["name"] == WAITING_MACHINE:
            return str(machine["stateMachineArn"])
    register = next(r for r in cloud.stack.of_type("AWS::Lambda::Function") if r.logical_id == "RegisterTokenFunction")
    definition = {
        "StartAt": "WaitForJob",
        "States": {
            "WaitForJob": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                "Parameters": {
                    "FunctionName": register.physical_id,
                    "Payload": {"service": "translate", "jobId.$": "$.jobId", "taskToken.$": "$$.Task.Token"},
                },
                "TimeoutSeconds": timeout_seconds,
                "End": True,
            }
        },
    }
    created = sfn.create_state_machine(
        name=WAITING_MACHINE,
        definition=json.dumps(definition),
        roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/bench",
    )
    return str(created["stateMachineArn"])


def complete(cloud: LocalCloud, job_id: str, status: str = "COMPLETED") -> None:
    """Translate's completion event for the job, put as the service puts it."""
    entry = {
        "Source": "aws.translate",
        "DetailType": "Translate TextTranslationJob State Change",
        "Detail": json.dumps({"jobId": job_id, "jobStatus": status}),
    }
    with as_service():
        cloud.client("events").put_events(Entries=[entry])


def run_jobs(cloud: LocalCloud, jobs: int, in_flight: int, seed: int = 1, job_timeout: float = 120.0) -> JobsResult:
    """Run `jobs` callback jobs, `in_flight` at a time; return the accounting."""
    machine = waiting_machine(cloud)
    table = cloud.stack.outputs["TokenTableName"]
    rng = random.Random(seed)
    early = {i for i in range(jobs) if rng.random() < 0.2}  # a fifth of the completions race the registration
    sfn, ddb = cloud.client("stepfunctions"), cloud.client("dynamodb")
    dead_letters_before = _dead_letters(cloud)
    executions: dict[str, str] = {}
    lock = threading.Lock()

    def one(i: int) -> None:
        job_id = uuid.uuid4().hex
        arn = sfn.start_execution(stateMachineArn=machine, name=job_id, input=json.dumps({"jobId": job_id}))
        with lock:
            executions[job_id] = arn["executionArn"]
        deadline = time.monotonic() + job_timeout
        if i not in early:  # the usual order: the job ends after the token is stored
            key = {"jobKey": {"S": f"translate#{job_id}"}}
            while "Item" not in ddb.get_item(TableName=table, Key=key, ConsistentRead=True):
                if time.monotonic() > deadline or _ended(sfn, arn["executionArn"]):
                    break
                time.sleep(0.01)
        complete(cloud, job_id)
        while time.monotonic() < deadline and not _ended(sfn, arn["executionArn"]):
            time.sleep(0.02)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        list(pool.map(one, range(jobs)))
    result = JobsResult(jobs=jobs, in_flight=in_flight, seconds=time.monotonic() - started)
    for arn in executions.values():
        described = sfn.describe_execution(executionArn=arn)
        closed = [
            e
            for e in sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
            if e["type"] in ("TaskSucceeded", "TaskFailed", "TaskTimedOut")
        ]
        if described["status"] == "RUNNING":
            result.lost += 1
        elif described["status"] == "SUCCEEDED":
            result.succeeded += 1
        else:
            result.failed += 1
            result.failures.append(str(described.get("error")))
        result.duplicated += len(closed) > 1
    result.dead_letters = _dead_letters(cloud) - dead_letters_before
    return result


def _ended(sfn: Any, arn: str) -> bool:
    return sfn.describe_execution(executionArn=arn)["status"] != "RUNNING"


def _dead_letters(cloud: LocalCloud) -> int:
    attributes = cloud.client("sqs").get_queue_attributes(
        QueueUrl=cloud.stack.outputs["ResumeDeadLetterQueueUrl"], AttributeNames=["ApproximateNumberOfMessages"]
    )
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])
