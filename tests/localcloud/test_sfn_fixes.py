"""The fixes of localcloud.fixes.sfn for moto 5.2.5's Step Functions (docs/offline-cloud.md, gaps 1-5 and 7;
gap 8: no `Step Functions Execution Status Change` events; gap 9: `$$.Execution.StartTime` is not a string;
gap 23: every finished thread kept; gap 32: the context object's times and fields; gap 33: an aws-sdk result's
timestamps; gap 34: an unresolved TimeoutSecondsPath or HeartbeatSecondsPath), and gap 2, not patched: what a missed
heartbeat matches.

Every gap is shown twice with the same scenario: once in a fresh Python process where moto is unpatched (the broken
behaviour moto shows today; if moto changes underneath, that test fails and the fix must be re-checked), and once in
this process with `localcloud.fixes.patches.step_functions()` installed (the behaviour AWS shows). The unpatched runs
are this file executed as a script (`python test_sfn_fixes.py`): a process that never imports localcloud runs every
scenario, one after the other, and reports what it saw as JSON; it starts before the first test, so it works while
the in-process tests run.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from inspect import getsource, signature
from pathlib import Path
from typing import IO, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.awslambda_simple.models import LambdaSimpleBackend

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
ROLE_ARN = "arn:aws:iam::123456789012:role/sfn-fixes"
MOTO_CONFIG: Any = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
PROBE_TIMEOUT_S = 60.0

# Gap 3: the callback arrives during the Lambda call; without the fix the task dies at the first missed heartbeat.
HEARTBEAT_S = 4  # wide enough that "well before the first heartbeat" holds on a loaded 2-core machine
TASK_TIMEOUT_S = 8
# Gap 4: how long StopExecution may take to end a callback wait (the task itself would wait 30 s).
STOP_WITHIN_S = 2.0
# Gap 2: the heartbeat a waiting task misses (its TimeoutSeconds is 30 s).
MISSED_HEARTBEAT_S = 1


# ----------------------------------------------------------------------------------------------------------------
# Scenarios: plain moto + boto3, run inside mock_aws; each returns JSON-serialisable observations.
# ----------------------------------------------------------------------------------------------------------------
def _clients(*services: str) -> list[Any]:
    # A boto3 session per scenario: the unpatched probe runs the scenarios on concurrent threads.
    session = boto3.session.Session(region_name=REGION)
    return [session.client(service) for service in services]  # type: ignore[call-overload]


def _state_machine(sfn: Any, name: str, states: dict[str, Any], start_at: str) -> str:
    definition = json.dumps({"StartAt": start_at, "States": states})
    return str(sfn.create_state_machine(name=name, definition=definition, roleArn=ROLE_ARN)["stateMachineArn"])


def _wait_until_done(sfn: Any, execution_arn: str, within_s: float) -> dict[str, Any]:
    """Poll DescribeExecution until the execution leaves RUNNING or `within_s` passes; return what it shows."""
    deadline = time.monotonic() + within_s
    while True:
        described = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING" or time.monotonic() >= deadline:
            return {key: described.get(key) for key in ("status", "output", "error", "cause")}
        time.sleep(0.02)


def _receive_body(sqs: Any, queue_url: str, within_s: float) -> str | None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        messages = sqs.receive_message(QueueUrl=queue_url).get("Messages", [])
        if messages:
            return str(messages[0]["Body"])
        time.sleep(0.02)
    return None


def _wait_for_token_states(queue_url: str, timeout_s: int, heartbeat_s: int | None = None) -> dict[str, Any]:
    """One Task that sends its task token to `queue_url` and waits for the callback."""
    task: dict[str, Any] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
        "Parameters": {"QueueUrl": queue_url, "MessageBody": {"token.$": "$$.Task.Token"}},
        "TimeoutSeconds": timeout_s,
        "End": True,
    }
    if heartbeat_s is not None:
        task["HeartbeatSeconds"] = heartbeat_s
    return {"Wait": task}


def scenario_aws_sdk_tasks() -> dict[str, Any]:
    """Gap 1: `aws-sdk:` tasks with the AWS (PascalCase) parameter spelling, objects given for string members."""
    sfn, sqs = _clients("stepfunctions", "sqs")
    outbox = sqs.create_queue(QueueName="outbox")["QueueUrl"]
    tokens = sqs.create_queue(QueueName="sdk-tokens")["QueueUrl"]

    # SQS SendMessage with MessageBody given as an object (AWS sends it as a JSON string).
    send_states = {
        "Send": {
            "Type": "Task",
            "Resource": "arn:aws:states:::aws-sdk:sqs:sendMessage",
            "Parameters": {"QueueUrl": outbox, "MessageBody": {"order": 7}},
            "End": True,
        }
    }
    send_arn = sfn.start_execution(stateMachineArn=_state_machine(sfn, "SdkSend", send_states, "Send"))["executionArn"]
    send = _wait_until_done(sfn, send_arn, within_s=10)
    # (unpatched, moto's queue holds a dict body that ReceiveMessage cannot serve)
    body = _receive_body(sqs, outbox, within_s=2) if send["status"] == "SUCCEEDED" else None

    # Step Functions SendTaskSuccess resuming another execution that waits for its task token.
    waiter_machine = _state_machine(sfn, "Waiter", _wait_for_token_states(tokens, timeout_s=10), "Wait")
    waiter_arn = sfn.start_execution(stateMachineArn=waiter_machine)["executionArn"]
    token_message = _receive_body(sqs, tokens, within_s=5)
    assert token_message is not None, "the waiter never sent its task token"
    notify_states = {
        "Resume": {
            "Type": "Task",
            "Resource": "arn:aws:states:::aws-sdk:sfn:sendTaskSuccess",
            "Parameters": {"TaskToken.$": "$.token", "Output": {"approved": True}},
            "End": True,
        }
    }
    notify_arn = sfn.start_execution(
        stateMachineArn=_state_machine(sfn, "SdkNotify", notify_states, "Resume"), input=token_message
    )["executionArn"]
    notify = _wait_until_done(sfn, notify_arn, within_s=10)
    waiter = _wait_until_done(sfn, waiter_arn, within_s=5 if notify["status"] == "SUCCEEDED" else 0)
    return {"send": send, "body": body, "notify": notify, "waiter": waiter}


@contextlib.contextmanager
def _lambda_that_calls_back_before_returning(sfn: Any, call: Callable[[str], None] | None = None) -> Iterator[None]:
    """moto's Lambda without Docker, replaced by one that calls SendTaskSuccess (or `call`) with the token of its
    payload and only then returns: the callback deterministically arrives while the task's own call is running."""
    original = LambdaSimpleBackend.invoke

    def invoke(
        backend: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
    ) -> bytes:
        token = json.loads(body)["token"]
        if call is None:
            sfn.send_task_success(taskToken=token, output=json.dumps({"resumed": True}))
        else:
            call(token)
        return b"{}"

    LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        LambdaSimpleBackend.invoke = original  # type: ignore[method-assign]


def _machine_waiting_on_a_lambda(name: str) -> str:
    """A state machine `name` whose one task is lambda:invoke.waitForTaskToken (HeartbeatSeconds set) of a function
    of its own, which moto's Lambda is told to run by `_lambda_that_calls_back_before_returning`."""
    sfn, iam, awslambda = _clients("stepfunctions", "iam", "lambda")
    role = iam.create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return event\n")
    awslambda.create_function(
        FunctionName=f"{name}-fn",
        Runtime="python3.13",
        Role=role,
        Handler="index.handler",
        Code={"ZipFile": code.getvalue()},
    )
    states = {
        "Invoke": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
            "Parameters": {"FunctionName": f"{name}-fn", "Payload": {"token.$": "$$.Task.Token"}},
            "HeartbeatSeconds": HEARTBEAT_S,
            "TimeoutSeconds": TASK_TIMEOUT_S,
            "End": True,
        }
    }
    return _state_machine(sfn, name, states, "Invoke")


def scenario_early_callback() -> dict[str, Any]:
    """Gap 3: with HeartbeatSeconds, SendTaskSuccess arrives before lambda:invoke.waitForTaskToken has returned."""
    (sfn,) = _clients("stepfunctions")
    machine = _machine_waiting_on_a_lambda("EarlyCallback")
    with _lambda_that_calls_back_before_returning(sfn):
        started = time.monotonic()
        execution_arn = sfn.start_execution(stateMachineArn=machine)["executionArn"]
        result = _wait_until_done(sfn, execution_arn, within_s=TASK_TIMEOUT_S + 6)
    return {**result, "elapsed_s": time.monotonic() - started}


def scenario_early_heartbeat() -> dict[str, Any]:
    """Gap 28: SendTaskHeartbeat arrives before lambda:invoke.waitForTaskToken has returned (AWS accepts it: the
    token is the task's from the moment the task starts)."""
    (sfn,) = _clients("stepfunctions")
    machine = _machine_waiting_on_a_lambda("EarlyHeartbeat")
    answers: list[str] = []

    def heartbeat(token: str) -> None:
        try:
            sfn.send_task_heartbeat(taskToken=token)
            answers.append("accepted")
        except ClientError as exc:
            answers.append(str(exc.response["Error"]["Code"]))

    with _lambda_that_calls_back_before_returning(sfn, heartbeat):
        execution_arn = sfn.start_execution(stateMachineArn=machine)["executionArn"]
        deadline = time.monotonic() + 10
        while not answers and time.monotonic() < deadline:  # a positive signal: the function's heartbeat answered
            time.sleep(0.05)
    sfn.stop_execution(executionArn=execution_arn)
    return {"heartbeat": answers[0] if answers else "never sent"}


def scenario_heartbeat_after_the_outcome() -> dict[str, Any]:
    """Gap 28's bound: SendTaskHeartbeat for a task that has its outcome, while its execution still runs."""
    sfn, sqs = _clients("stepfunctions", "sqs")
    tokens = sqs.create_queue(QueueName="closed-tokens")["QueueUrl"]
    states = _wait_for_token_states(tokens, timeout_s=30)
    states["Wait"] = {**{k: v for k, v in states["Wait"].items() if k != "End"}, "Next": "Linger"}
    states["Linger"] = {"Type": "Wait", "Seconds": 30, "End": True}
    execution_arn = sfn.start_execution(stateMachineArn=_state_machine(sfn, "ClosedTask", states, "Wait"))[
        "executionArn"
    ]
    body = _receive_body(sqs, tokens, within_s=5)
    assert body is not None, "the task never reached its callback wait"
    token = json.loads(body)["token"]
    sfn.send_task_success(taskToken=token, output="{}")
    try:
        sfn.send_task_heartbeat(taskToken=token)
        answer = "accepted"
    except ClientError as exc:
        answer = str(exc.response["Error"]["Code"])
    sfn.stop_execution(executionArn=execution_arn)
    return {"heartbeat": answer}


def scenario_stop_while_waiting(heartbeat_s: int | None = None) -> dict[str, Any]:
    """Gap 4: StopExecution while a task waits for a callback that never comes (TimeoutSeconds 30)."""
    sfn, sqs = _clients("stepfunctions", "sqs")
    tokens = sqs.create_queue(QueueName="stop-tokens")["QueueUrl"]
    machine = _state_machine(
        sfn, "StopMe", _wait_for_token_states(tokens, timeout_s=30, heartbeat_s=heartbeat_s), "Wait"
    )
    execution_arn = sfn.start_execution(stateMachineArn=machine)["executionArn"]
    assert _receive_body(sqs, tokens, within_s=5) is not None, "the task never reached its callback wait"
    sfn.stop_execution(executionArn=execution_arn)
    stopped = time.monotonic()
    result = _wait_until_done(sfn, execution_arn, within_s=STOP_WITHIN_S)
    elapsed = time.monotonic() - stopped
    events = [event["type"] for event in sfn.get_execution_history(executionArn=execution_arn)["events"]]
    return {**result, "elapsed_s": elapsed, "events": events}


def scenario_missed_heartbeat() -> dict[str, Any]:
    """Gap 2: a waiting task whose heartbeat never comes, its Catch on States.HeartbeatTimeout alone, then on
    States.Timeout: per Catch, how the execution ended, the TaskTimedOut event's error, whether the Catch took it."""
    sfn, sqs = _clients("stepfunctions", "sqs")
    tokens = sqs.create_queue(QueueName="missed-heartbeat-tokens")["QueueUrl"]
    wait = _wait_for_token_states(tokens, timeout_s=30, heartbeat_s=MISSED_HEARTBEAT_S)["Wait"]
    seen: dict[str, Any] = {}
    for caught_error in ("States.HeartbeatTimeout", "States.Timeout"):
        catch = {"ErrorEquals": [caught_error], "ResultPath": "$.error", "Next": "Caught"}
        states = {"Wait": {**wait, "Catch": [catch]}, "Caught": {"Type": "Pass", "End": True}}
        machine = _state_machine(sfn, f"MissedHeartbeat-{caught_error.split('.')[1]}", states, "Wait")
        execution_arn = sfn.start_execution(stateMachineArn=machine, input="{}")["executionArn"]
        result = _wait_until_done(sfn, execution_arn, within_s=MISSED_HEARTBEAT_S + 10)
        events = _history(sfn, execution_arn)
        seen[caught_error] = {
            "status": result["status"],
            "error": result["error"],
            "task_timed_out": [e["taskTimedOutEventDetails"]["error"] for e in events if e["type"] == "TaskTimedOut"],
            "caught": any(e["type"] == "PassStateEntered" for e in events),
        }
    return seen


def scenario_unnamed_executions() -> dict[str, Any]:
    """Gap 5: two StartExecution calls without `name`."""
    (sfn,) = _clients("stepfunctions")
    machine = _state_machine(sfn, "Unnamed", {"Done": {"Type": "Pass", "End": True}}, "Done")
    first = sfn.start_execution(stateMachineArn=machine, input='{"n": 1}')["executionArn"]
    try:
        second, error = sfn.start_execution(stateMachineArn=machine, input='{"n": 2}')["executionArn"], None
    except ClientError as exc:
        second, error = None, exc.response["Error"]["Code"]
    names = [execution.get("name") for execution in sfn.list_executions(stateMachineArn=machine)["executions"]]
    return {"first": first, "second": second, "second_error": error, "names": names}


def scenario_start_time() -> dict[str, Any]:
    """Gap 9: what a state sees as `$$.Execution.StartTime`, and whether a DynamoDB task can store it."""
    sfn, dynamodb = _clients("stepfunctions", "dynamodb")
    table = f"runs-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    states = {
        "Read": {"Type": "Pass", "Parameters": {"startTime.$": "$$.Execution.StartTime"}, "Next": "Store"},
        "Store": {
            "Type": "Task",
            "Resource": "arn:aws:states:::dynamodb:putItem",
            "Parameters": {"TableName": table, "Item": {"pk": {"S.$": "$$.Execution.StartTime"}}},
            "ResultPath": None,
            "End": True,
        },
    }
    machine = _state_machine(sfn, f"StartTime-{uuid.uuid4().hex[:8]}", states, "Read")
    execution_arn = sfn.start_execution(stateMachineArn=machine, name="start-time")["executionArn"]
    return _wait_until_done(sfn, execution_arn, within_s=10)


def _history(sfn: Any, execution_arn: str) -> list[dict[str, Any]]:
    return list(sfn.get_execution_history(executionArn=execution_arn)["events"])


def _ended(sfn: Any, execution_arn: str, within_s: float) -> list[dict[str, Any]]:
    """The execution's history once it holds the execution's end (read from the history, which serialises what
    DescribeExecution may not)."""
    deadline = time.monotonic() + within_s
    while True:
        events = _history(sfn, execution_arn)
        if (events and events[-1]["type"] in {"ExecutionSucceeded", "ExecutionFailed"}) or time.monotonic() >= deadline:
            return events
        time.sleep(0.02)


def scenario_context_object() -> dict[str, Any]:
    """Gap 32: what a Pass state sees as `$$.State`, then whether the next can read `$$.Execution.RedriveCount`."""
    (sfn,) = _clients("stepfunctions")
    states = {
        "Entered": {
            "Type": "Pass",
            "Parameters": {"state.$": "$$.State"},
            "ResultPath": "$.entered",
            "Next": "Redrive",
        },
        "Redrive": {"Type": "Pass", "Parameters": {"count.$": "$$.Execution.RedriveCount"}, "End": True},
    }
    machine = _state_machine(sfn, f"Context-{uuid.uuid4().hex[:8]}", states, "Entered")
    events = _ended(sfn, sfn.start_execution(stateMachineArn=machine)["executionArn"], within_s=10)
    [entered] = [e for e in events if e.get("stateExitedEventDetails", {}).get("name") == "Entered"]
    end = events[-1].get("executionSucceededEventDetails") or events[-1].get("executionFailedEventDetails", {})
    return {
        "state": json.loads(entered["stateExitedEventDetails"]["output"])["entered"]["state"],
        "end": events[-1]["type"],
        "redrive": json.loads(end["output"]) if "output" in end else end.get("cause"),
    }


def scenario_sdk_timestamps() -> dict[str, Any]:
    """Gap 33: an aws-sdk:s3:listObjectsV2 result (whose objects have LastModified) kept in the execution's output."""
    sfn, s3 = _clients("stepfunctions", "s3")
    bucket = f"listing-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="in/a.txt", Body=b"a")
    states = {
        "List": {
            "Type": "Task",
            "Resource": "arn:aws:states:::aws-sdk:s3:listObjectsV2",
            "Parameters": {"Bucket": bucket, "Prefix": "in/"},
            "ResultPath": "$.listing",
            "End": True,
        }
    }
    execution_arn = sfn.start_execution(stateMachineArn=_state_machine(sfn, "Listing", states, "List"))["executionArn"]
    events = _ended(sfn, execution_arn, within_s=10)
    [listed] = [json.loads(e["taskSucceededEventDetails"]["output"]) for e in events if e["type"] == "TaskSucceeded"]
    try:
        described: dict[str, Any] = {"output": json.loads(sfn.describe_execution(executionArn=execution_arn)["output"])}
    except Exception as exc:  # noqa: BLE001 - unpatched, moto's handler raises out of the call
        described = {"error": f"{type(exc).__name__}: {exc}"}
    return {"history": listed["Contents"][0]["LastModified"], "described": described}


def scenario_unresolved_timer_paths() -> dict[str, Any]:
    """Gap 34: a waiting task whose TimeoutSecondsPath (its Catch on States.ALL) or HeartbeatSecondsPath (no Catch)
    resolves to nothing."""
    sfn, sqs = _clients("stepfunctions", "sqs")
    tokens = sqs.create_queue(QueueName="timer-path-tokens")["QueueUrl"]
    wait = _wait_for_token_states(tokens, timeout_s=30)["Wait"]
    caught = {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}
    machines = {
        "timeout": {
            "Wait": {**{k: v for k, v in wait.items() if k != "TimeoutSeconds"}, "TimeoutSecondsPath": "$.missing"}
            | {"Catch": [caught]},
            "Caught": {"Type": "Pass", "End": True},
        },
        "heartbeat": {"Wait": {**wait, "HeartbeatSecondsPath": "$.missing"}},
    }
    seen: dict[str, Any] = {}
    for path, states in machines.items():
        machine = _state_machine(sfn, f"TimerPath-{path}", states, "Wait")
        execution_arn = sfn.start_execution(stateMachineArn=machine, input="{}")["executionArn"]
        result = _wait_until_done(sfn, execution_arn, within_s=10)
        seen[path] = {**result, "events": [e["type"] for e in _history(sfn, execution_arn)]}
    return seen


def scenario_states_all() -> dict[str, Any]:
    """Gap 37: a Task whose Parameters name a path its input lacks (States.Runtime), and one whose queue does not exist
    (the service's error), each with a Catch on States.ALL."""
    sfn, sqs = _clients("stepfunctions", "sqs")
    queue = sqs.create_queue(QueueName="states-all")["QueueUrl"]
    seen: dict[str, Any] = {}
    for case, parameters in {
        "missing_path": {"QueueUrl": queue, "MessageBody.$": "$.missing"},
        "missing_queue": {"QueueUrl": f"{queue}-gone", "MessageBody": "hello"},
    }.items():
        states = {
            "Send": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage",
                "Parameters": parameters,
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}],
                "End": True,
            },
            "Caught": {"Type": "Pass", "End": True},
        }
        execution_arn = sfn.start_execution(
            stateMachineArn=_state_machine(sfn, f"StatesAll-{case}", states, "Send"), input="{}"
        )["executionArn"]
        seen[case] = {
            **_wait_until_done(sfn, execution_arn, within_s=10),
            "events": [e["type"] for e in _history(sfn, execution_arn)],
        }
    return seen


def scenario_status_change_events() -> dict[str, Any]:
    """Gap 8: the `Step Functions Execution Status Change` events a rule on the default bus receives."""
    sfn, sqs, events = _clients("stepfunctions", "sqs", "events")
    queue = sqs.create_queue(QueueName=f"status-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    rule = f"status-{uuid.uuid4().hex[:8]}"
    events.put_rule(Name=rule, EventPattern=json.dumps({"source": ["aws.states"]}))
    events.put_targets(Rule=rule, Targets=[{"Id": "queue", "Arn": queue_arn}])
    machine = _state_machine(sfn, f"Status-{uuid.uuid4().hex[:8]}", {"Done": {"Type": "Pass", "End": True}}, "Done")
    execution_arn = sfn.start_execution(stateMachineArn=machine, name="status", input='{"a": 1}')["executionArn"]
    _wait_until_done(sfn, execution_arn, within_s=10)
    received = []
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and len(received) < 2:
        received += [json.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=queue).get("Messages", [])]
        time.sleep(0.02)
    return {
        "events": [
            {"detail-type": e["detail-type"], **{k: e["detail"].get(k) for k in ("status", "executionArn", "input")}}
            for e in received
        ],
        "executionArn": execution_arn,
    }


def scenario_finished_threads(executions: int = 10) -> dict[str, Any]:
    """Gap 23: how many finished Parallel-branch threads stay in memory after executions with two branches end."""
    (sfn,) = _clients("stepfunctions")
    branch = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
    states = {"Both": {"Type": "Parallel", "Branches": [branch, branch], "End": True}}
    machine = _state_machine(sfn, f"Threads-{uuid.uuid4().hex[:8]}", states, "Both")

    def kept() -> int:
        deadline = time.monotonic() + 10  # a branch's thread may still be returning when its execution has ended
        while any(t.name.startswith("BranchWorker_") for t in threading.enumerate()) and time.monotonic() < deadline:
            time.sleep(0.01)
        gc.collect()
        return sum(
            1
            for o in gc.get_objects()
            if isinstance(o, threading.Thread) and o.name.startswith("BranchWorker_") and not o.is_alive()
        )

    before = kept()
    arns = [sfn.start_execution(stateMachineArn=machine, name=f"run-{n}")["executionArn"] for n in range(executions)]
    statuses = [_wait_until_done(sfn, arn, within_s=10)["status"] for arn in arns]
    return {"statuses": statuses, "branches_run": 2 * executions, "kept": kept() - before}


def scenario_waiting_threads(executions: int = 10) -> dict[str, Any]:
    """Speed: how many threads executions hold while each waits for its callback (a program without TimeoutSeconds,
    a task with it)."""
    sfn, sqs = _clients("stepfunctions", "sqs")
    tokens = sqs.create_queue(QueueName="waiting-tokens")["QueueUrl"]
    machine = _state_machine(sfn, "Waiting", _wait_for_token_states(tokens, timeout_s=30), "Wait")
    before, arns, waiting = set(threading.enumerate()), [], 0
    for n in range(executions):  # one at a time: unpatched moto starts Task states unsafely on several threads
        arns.append(sfn.start_execution(stateMachineArn=machine, name=f"wait-{n}")["executionArn"])
        waiting += _receive_body(sqs, tokens, within_s=5) is not None  # its token sent: its task is at its wait
    threads = sum(thread.is_alive() for thread in set(threading.enumerate()) - before)
    for arn in arns:
        sfn.stop_execution(executionArn=arn)
    return {"waiting": waiting, "threads": threads}


def scenario_fix_targets() -> dict[str, Any]:
    """Where the fixes hook in, as pristine moto defines it: defining function and parameter names per target."""
    from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk import (
        StateTaskServiceAwsSdk,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
        StateTaskServiceCallback,
    )
    from moto.stepfunctions.parser.asl.eval.callback.callback import (
        CallbackEndpoint,
        CallbackPoolManager,
        HeartbeatEndpoint,
    )
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    targets: list[tuple[type, str]] = [
        (StateTaskServiceAwsSdk, "_normalise_parameters"),
        (StateTaskServiceAwsSdk, "_normalise_response"),
        (StateTaskServiceAwsSdk, "_to_boto_request"),
        (StateTaskServiceAwsSdk, "_from_boto_response"),
        (StateTaskServiceAwsSdk, "_get_boto_service_name"),
        (StateTaskServiceAwsSdk, "_get_boto_service_action"),
        (CallbackEndpoint, "setup_heartbeat_endpoint"),
        (CallbackEndpoint, "get_outcome"),
        (CallbackEndpoint, "interrupt_all"),
        (HeartbeatEndpoint, "notify"),
        (ExecutionWorker, "stop"),
        (ExecutionState, "_evaluate_with_timeout"),
        (StateTaskServiceCallback, "_eval_wait_for_task_token"),
        (StepFunctionsParserBackend, "start_execution"),
    ]
    found: dict[str, Any] = {}
    for owner, attribute in targets:
        function = getattr(owner, attribute, None)
        found[f"{owner.__name__}.{attribute}"] = (
            None
            if function is None
            else {
                "defined_by": function.__qualname__,
                "parameters": list(signature(function).parameters),
            }
        )
    found["CallbackPoolManager()._pool"] = type(getattr(CallbackPoolManager(activity_store={}), "_pool", None)).__name__
    found["HeartbeatEndpoint(1) attributes"] = sorted(vars(HeartbeatEndpoint(1)))  # read by localcloud.moto_state
    # localcloud.fixes.sfn._evaluate_on_this_thread is this method but for its thread: a change here is one there
    source = getsource(ExecutionState._evaluate_with_timeout)
    found["ExecutionState._evaluate_with_timeout source"] = hashlib.sha256(source.encode()).hexdigest()[:16]
    return found


SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {
    "aws_sdk_tasks": scenario_aws_sdk_tasks,
    "early_callback": scenario_early_callback,
    "early_heartbeat": scenario_early_heartbeat,
    "stop_while_waiting": scenario_stop_while_waiting,
    "unnamed_executions": scenario_unnamed_executions,
    "fix_targets": scenario_fix_targets,
    "start_time": scenario_start_time,
    "finished_threads": scenario_finished_threads,
    "status_change_events": scenario_status_change_events,
    "context_object": scenario_context_object,
    "sdk_timestamps": scenario_sdk_timestamps,
    "unresolved_timer_paths": scenario_unresolved_timer_paths,
    "states_all": scenario_states_all,
    "missed_heartbeat": scenario_missed_heartbeat,
    "waiting_threads": scenario_waiting_threads,  # last: unpatched, its executions wait on past their stop
}


def run_scenarios() -> dict[str, Any]:
    """Every scenario, one after the other, in one mock_aws (their resource names differ); a crash is reported, not
    raised. One at a time: unpatched moto is not thread-safe (gaps 10, 11, 14), and scenarios run together on a busy
    machine failed in ways that had nothing to do with the gap each one shows."""

    def run(scenario: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return scenario()
        except Exception:  # noqa: BLE001 - reported to the test that reads this scenario's result
            return {"crashed": traceback.format_exc()}

    with mock_aws(config=MOTO_CONFIG):
        return {name: run(scenario) for name, scenario in SCENARIOS.items()}


# ----------------------------------------------------------------------------------------------------------------
# Fixtures
# ----------------------------------------------------------------------------------------------------------------
class UnpatchedProbe:
    """This file run as a script: a fresh interpreter without localcloud runs every scenario on unpatched moto.

    One process, not one per scenario: importing moto dominates the cost (there is no bytecode cache here).
    """

    def __init__(self, stdout: IO[str], stderr: IO[str]) -> None:
        # Files, not pipes: moto logs every failed task at length, which could fill a pipe nobody reads yet.
        self._stdout, self._stderr = stdout, stderr
        self._process = subprocess.Popen([sys.executable, __file__], cwd=REPO, stdout=self._stdout, stderr=self._stderr)
        self._results: dict[str, Any] | None = None
        self._failure: str | None = None

    def result(self, name: str) -> dict[str, Any]:
        if self._results is None and self._failure is None:
            returncode = self._process.wait(timeout=PROBE_TIMEOUT_S)
            self._stdout.seek(0)
            self._stderr.seek(0)
            if returncode == 0:
                self._results = json.loads(self._stdout.read().strip().splitlines()[-1])
            else:
                self._failure = f"the unpatched probe crashed:\n{self._stderr.read()[-4000:]}"
        assert self._results is not None, self._failure
        result = self._results[name]
        assert "crashed" not in result, f"unpatched scenario {name!r} crashed:\n{result['crashed']}"
        return dict(result)

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()


@pytest.fixture(scope="module")
def unpatched() -> Iterator[UnpatchedProbe]:
    with tempfile.TemporaryFile(mode="w+") as stdout, tempfile.TemporaryFile(mode="w+") as stderr:
        probe = UnpatchedProbe(stdout, stderr)
        try:
            yield probe
        finally:
            probe.close()


@pytest.fixture(scope="module", autouse=True)
def _start_the_probe_first(request: pytest.FixtureRequest) -> None:
    """Start the probe before this file's first test (if any selected test of it needs the probe), so the probe runs
    while the in-process tests, which come first in this file, run."""
    ours = [item for item in request.session.items if getattr(item, "module", None) is request.module]
    if any("unpatched" in getattr(item, "fixturenames", ()) for item in ours):
        request.getfixturevalue("unpatched")


@pytest.fixture
def patched() -> Iterator[None]:
    from localcloud.fixes import patches

    with patches.Patches(patches.step_functions()), mock_aws(config=MOTO_CONFIG):
        yield


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


# ----------------------------------------------------------------------------------------------------------------
# With the fix: this process, with localcloud.fixes.patches.step_functions() installed
# ----------------------------------------------------------------------------------------------------------------
def test_gap1_patched_aws_sdk_tasks_behave_like_aws(patched: None) -> None:
    # Given moto with the Step Functions patches installed
    # When aws-sdk:sqs:sendMessage and aws-sdk:sfn:sendTaskSuccess run with the AWS spelling of their parameters
    result = scenario_aws_sdk_tasks()

    # Then SendMessage succeeds, its object MessageBody sent as a JSON string, its result in PascalCase
    assert result["send"]["status"] == "SUCCEEDED", result["send"]
    output = json.loads(result["send"]["output"])
    assert set(output) == {"MessageId", "Md5OfMessageBody"}
    assert json.loads(result["body"]) == {"order": 7}
    assert output["Md5OfMessageBody"] == hashlib.md5(result["body"].encode(), usedforsecurity=False).hexdigest()
    # And SendTaskSuccess resumes the waiting execution with the Output object
    assert result["notify"]["status"] == "SUCCEEDED", result["notify"]
    assert result["waiter"]["status"] == "SUCCEEDED", result["waiter"]
    assert json.loads(result["waiter"]["output"]) == {"approved": True}


def test_gap3_patched_callback_sent_during_the_call_completes_the_task(patched: None) -> None:
    # Given moto with the Step Functions patches installed and a Lambda that calls SendTaskSuccess before it returns
    # When lambda:invoke.waitForTaskToken with HeartbeatSeconds runs it
    result = scenario_early_callback()

    # Then the execution succeeds promptly (well before the first heartbeat is due) with the callback's output
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"]) == {"resumed": True}
    assert result["elapsed_s"] < HEARTBEAT_S


@pytest.mark.parametrize("heartbeat_s", [None, 20], ids=["timeout-only", "with-heartbeat"])
def test_gap4_patched_stop_during_callback_wait_aborts_at_once(patched: None, heartbeat_s: int | None) -> None:
    # Given moto with the Step Functions patches installed and an execution waiting for a callback that never comes
    # When StopExecution is called
    result = scenario_stop_while_waiting(heartbeat_s=heartbeat_s)

    # Then the execution ends ABORTED at once, and its history says so without a task failure
    assert result["status"] == "ABORTED", result
    assert result["elapsed_s"] < STOP_WITHIN_S
    assert result["events"][-1] == "ExecutionAborted"
    assert not {"TaskTimedOut", "TaskFailed", "ExecutionFailed"} & set(result["events"]), result["events"]


# Gap 2, not patched: what a missed heartbeat is offline, as moto alone has it (docs/offline-cloud.md)
MISSED_HEARTBEAT = {
    # a Catch on States.HeartbeatTimeout alone never takes it (on AWS it does): the execution fails with the error
    "States.HeartbeatTimeout": {
        "status": "FAILED",
        "error": "States.Timeout",
        "task_timed_out": ["States.Timeout"],
        "caught": False,
    },
    # a Catch on States.Timeout takes it, as on AWS
    "States.Timeout": {"status": "SUCCEEDED", "error": None, "task_timed_out": ["States.Timeout"], "caught": True},
}


def test_gap2_known_gap_a_missed_heartbeat_is_states_timeout_which_heartbeat_timeout_does_not_match(
    patched: None,
) -> None:
    # Given moto with the Step Functions patches installed, and a waiting task whose heartbeat never comes
    # When its Catch names States.HeartbeatTimeout alone, then States.Timeout
    result = scenario_missed_heartbeat()
    # Then the task times out with States.Timeout, as AWS records it, and only the Catch on States.Timeout takes it
    assert result == MISSED_HEARTBEAT


def test_gap5_patched_unnamed_executions_get_uuids(patched: None) -> None:
    # Given moto with the Step Functions patches installed
    # When StartExecution is called twice without a name
    result = scenario_unnamed_executions()

    # Then both start, each named by its own UUID, which ends its ARN
    assert result["second_error"] is None
    names = [arn.rsplit(":", 1)[1] for arn in (result["first"], result["second"])]
    assert all(_is_uuid(name) for name in names), names
    assert names[0] != names[1]
    assert sorted(result["names"]) == sorted(names)


def test_start_execution_names_keep_their_rules_with_many_executions(patched: None) -> None:
    # Given a state machine with many executions, one still running (waiting until the test stops it) and the others
    # ended
    (sfn,) = _clients("stepfunctions")
    states = {"Hold": {"Type": "Wait", "Seconds": 86400, "End": True}}
    waiting = _state_machine(sfn, "Names", states, "Hold")
    held = sfn.start_execution(stateMachineArn=waiting, name="held", input='{"n": 0}')["executionArn"]
    ended = _state_machine(sfn, "NamesEnded", {"Done": {"Type": "Pass", "End": True}}, "Done")
    runs = [sfn.start_execution(stateMachineArn=ended, name=f"run-{n}", input="{}") for n in range(200)]
    assert all(_wait_until_done(sfn, run["executionArn"], 30)["status"] == "SUCCEEDED" for run in runs)

    def start(machine: str, name: str, input_: str) -> str:
        try:
            return str(sfn.start_execution(stateMachineArn=machine, name=name, input=input_)["executionArn"])
        except ClientError as exc:
            return str(exc.response["Error"]["Code"])

    # When names are reused: the running one with its own input, then another input; an ended one; a new one
    # Then the running one's own start is that execution again (idempotent), the others are refused, a new name starts
    assert start(waiting, "held", '{"n": 0}') == held
    assert start(waiting, "held", '{"n": 1}') == "ExecutionAlreadyExists"
    assert start(ended, "run-123", "{}") == "ExecutionAlreadyExists"
    assert start(ended, "run-200", "{}").endswith(":run-200")
    sfn.stop_execution(executionArn=held)


def test_gap7_patched_send_task_failure_keeps_its_cause(patched: None) -> None:
    # Given moto with the Step Functions patches installed and an execution waiting for its task token
    sfn, sqs = _clients("stepfunctions", "sqs")
    tokens = sqs.create_queue(QueueName="failure-tokens")["QueueUrl"]
    machine = _state_machine(sfn, "FailureWaiter", _wait_for_token_states(tokens, timeout_s=10), "Wait")
    execution_arn = sfn.start_execution(stateMachineArn=machine)["executionArn"]
    message = _receive_body(sqs, tokens, within_s=5)
    assert message is not None, "the waiter never sent its task token"

    # When SendTaskFailure names an error and a cause
    sfn.send_task_failure(taskToken=json.loads(message)["token"], error="Job.FAILED", cause="the job said why")

    # Then the execution fails with both, as on AWS (moto's handler dropped the cause)
    result = _wait_until_done(sfn, execution_arn, within_s=5)
    assert (result["status"], result["error"], result["cause"]) == ("FAILED", "Job.FAILED", "the job said why")


def test_gap8_patched_executions_send_status_change_events(patched: None) -> None:
    # Given moto with the Step Functions patches installed and a rule on aws.states events
    # When an execution starts and ends
    seen = scenario_status_change_events()
    # Then the rule receives RUNNING and SUCCEEDED for it (in either order), as Step Functions sends them
    change = "Step Functions Execution Status Change"
    assert sorted(seen["events"], key=lambda e: e["status"]) == [
        {"detail-type": change, "status": "RUNNING", "executionArn": seen["executionArn"], "input": '{"a": 1}'},
        {"detail-type": change, "status": "SUCCEEDED", "executionArn": seen["executionArn"], "input": '{"a": 1}'},
    ]


AWS_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z"  # 2019-03-26T20:14:13.192Z, or ...:13Z on a whole second


def test_gap9_patched_start_time_is_an_iso_string(patched: None) -> None:
    # Given moto with the Step Functions patches installed
    # When a state reads $$.Execution.StartTime and a DynamoDB task stores it
    result = scenario_start_time()
    # Then it is AWS's ISO 8601 string with milliseconds and Z, and the task succeeds
    assert result["status"] == "SUCCEEDED", result
    start_time = json.loads(result["output"] or "{}").get("startTime", "")
    assert re.fullmatch(AWS_TIME, start_time), start_time


def test_a_time_on_a_whole_second_has_no_fraction_as_on_aws() -> None:
    from localcloud.fixes import sfn

    # AWS's context object times are Java Instants: milliseconds, and none at all on a whole second
    assert sfn.aws_timestamp(datetime(2025, 2, 3, 4, 5, 6, 111000, tzinfo=UTC)) == "2025-02-03T04:05:06.111Z"
    assert sfn.aws_timestamp(datetime(2025, 2, 3, 4, 5, 6, 999, tzinfo=UTC)) == "2025-02-03T04:05:06Z"


def test_gap32_patched_context_object_is_as_aws_documents_it(patched: None) -> None:
    # Given moto with the Step Functions patches installed
    # When a Pass state reads $$.State and the next reads $$.Execution.RedriveCount
    result = scenario_context_object()
    # Then the state was entered at a time in AWS's form, with the retry count AWS gives every state
    assert re.fullmatch(AWS_TIME, result["state"]["EnteredTime"]), result["state"]
    assert (result["state"]["Name"], result["state"]["RetryCount"]) == ("Entered", 0)
    # And a first run has not been redriven
    assert (result["end"], result["redrive"]) == ("ExecutionSucceeded", {"count": 0})


def test_gap33_patched_sdk_result_timestamps_are_iso_strings(patched: None) -> None:
    # Given moto with the Step Functions patches installed
    # When an execution keeps an aws-sdk:s3:listObjectsV2 result in its output
    result = scenario_sdk_timestamps()
    # Then DescribeExecution answers with it, the object's LastModified an ISO 8601 string, as in the history
    assert "error" not in result["described"], result["described"]
    described = result["described"]["output"]["listing"]["Contents"][0]["LastModified"]
    assert re.fullmatch(AWS_TIME, described) and described == result["history"], result


def test_gap34_patched_an_unresolved_timer_path_fails_the_execution_once(patched: None) -> None:
    # Given moto with the Step Functions patches installed
    # When a waiting task's TimeoutSecondsPath (its Catch on States.ALL) or HeartbeatSecondsPath resolves to nothing
    result = scenario_unresolved_timer_paths()
    # Then each execution fails with States.Runtime, as on AWS, where a Catch never takes States.Runtime
    for path, seen in result.items():
        assert (seen["status"], seen["error"]) == ("FAILED", "States.Runtime"), (path, seen)
        assert "Invalid path '$.missing'" in seen["cause"], (path, seen)
        # And its history ends with its one ExecutionFailed event
        assert seen["events"].count("ExecutionFailed") == 1 and seen["events"][-1] == "ExecutionFailed", (path, seen)


def test_gap37_patched_states_all_catches_a_services_error_but_never_states_runtime(patched: None) -> None:
    # Given moto with the Step Functions patches installed
    # When a Task with a Catch on States.ALL fails with States.Runtime (its Parameters name a missing path)
    result = scenario_states_all()
    # Then the Catch does not take it: the execution fails with States.Runtime, as on AWS
    assert (result["missing_path"]["status"], result["missing_path"]["error"]) == ("FAILED", "States.Runtime"), result
    assert "PassStateEntered" not in result["missing_path"]["events"], result
    # And a service's error is still caught by States.ALL
    assert result["missing_queue"]["status"] == "SUCCEEDED" and "PassStateEntered" in result["missing_queue"]["events"]


def test_gap23_patched_finished_threads_are_freed(patched: None) -> None:
    # Given moto with the Step Functions patches installed
    # When 10 executions of a Parallel state with two branches run to the end
    result = scenario_finished_threads()
    # Then they all succeed and no finished branch thread stays in memory
    assert result["statuses"] == ["SUCCEEDED"] * 10
    assert result["kept"] == 0, result


def test_gap41_patched_an_execution_waiting_for_its_callback_holds_one_thread(patched: None) -> None:
    # Given moto with the Step Functions patches installed
    # When 10 executions wait for their callbacks (a task with TimeoutSeconds)
    result = scenario_waiting_threads()
    # Then each holds its own thread only: neither a thread for its program nor one for its waiting task
    assert result == {"waiting": 10, "threads": 10}


def test_a_state_starts_once_the_http_apis_requests_are_answered(
    patched: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from localcloud.httpapi import REQUESTS

    # Given moto with the Step Functions patches installed, and a request of the HTTP API being served
    monkeypatch.setattr(REQUESTS, "patience", 60.0)  # longer than this test: the wait ends with the request
    (sfn,) = _clients("stepfunctions")
    machine = _state_machine(sfn, "AfterRequests", {"Only": {"Type": "Pass", "End": True}}, "Only")
    with REQUESTS.serving():
        # When an execution starts
        arn = sfn.start_execution(stateMachineArn=machine)["executionArn"]
        # Then its first state waits for the request to be answered
        deadline = time.monotonic() + 10
        while not REQUESTS.waiting:
            assert time.monotonic() < deadline, "the execution's state never waited"
            time.sleep(0.01)
        assert [event["type"] for event in _history(sfn, arn)] == ["ExecutionStarted"]
    # And once it is answered, the execution runs to its end
    assert _wait_until_done(sfn, arn, within_s=10)["status"] == "SUCCEEDED"


def test_a_parallel_state_runs_without_writing_its_definition_out_as_text(
    patched: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.stepfunctions.parser.asl.component.component import Component

    # Given moto with the patches installed, and a state machine with a Parallel state of two branches
    (sfn,) = _clients("stepfunctions")
    branch = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
    states = {"Both": {"Type": "Parallel", "Branches": [branch, branch], "End": True}}
    machine = _state_machine(sfn, f"Text-{uuid.uuid4().hex[:8]}", states, "Both")
    rendered: list[str] = []
    text = Component.__str__
    monkeypatch.setattr(Component, "__str__", lambda self: rendered.append(type(self).__name__) or text(self))
    # When it runs
    arns = [sfn.start_execution(stateMachineArn=machine)["executionArn"] for _ in range(3)]
    # Then it succeeds, and no part of its parsed definition was made into text (moto named each branch's thread
    # after its whole program's text: 43 % of the cloud's busy time under the HTTP load)
    assert [_wait_until_done(sfn, arn, within_s=10)["status"] for arn in arns] == ["SUCCEEDED"] * 3
    assert rendered == []


def test_a_definitions_first_executions_started_together_parse_it_once(patched: None) -> None:
    from localcloud.fixes import sfn as fixes

    # Given moto with the patches installed, and a state machine of 40 states nothing has run yet
    (sfn,) = _clients("stepfunctions")
    states: dict[str, Any] = {f"Step{n}": {"Type": "Pass", "Next": f"Step{n + 1}"} for n in range(39)}
    states["Step39"] = {"Type": "Pass", "Result": {"machine": uuid.uuid4().hex}, "End": True}
    machine = _state_machine(sfn, f"Parse-{uuid.uuid4().hex[:8]}", states, "Step0")
    parses = fixes._parsed.cache_info().misses
    # When 8 executions start at once
    release = threading.Barrier(8)

    def start(_: int) -> str:
        release.wait()
        return str(sfn.start_execution(stateMachineArn=machine)["executionArn"])

    with ThreadPoolExecutor(8) as pool:
        arns = list(pool.map(start, range(8)))
    # Then all of them run, on one parse of the definition
    assert [_wait_until_done(sfn, arn, within_s=20)["status"] for arn in arns] == ["SUCCEEDED"] * 8
    assert fixes._parsed.cache_info().misses - parses == 1


# ----------------------------------------------------------------------------------------------------------------
# Without the fix: what pristine moto does today (the probe); a failure here means moto changed underneath
# ----------------------------------------------------------------------------------------------------------------
def test_gap1_unpatched_moto_passes_aws_sdk_parameters_verbatim(unpatched: UnpatchedProbe) -> None:
    # Given pristine moto
    # When aws-sdk:sqs:sendMessage and aws-sdk:sfn:sendTaskSuccess run with the AWS spelling of their parameters
    result = unpatched.result("aws_sdk_tasks")

    # Then both fail with States.Runtime: the object MessageBody reaches SQS unserialised, TaskToken is unknown
    assert result["send"]["status"] == "FAILED"
    assert result["send"]["error"] == "States.Runtime"
    assert "'dict' object has no attribute 'encode'" in result["send"]["cause"]
    assert result["notify"]["status"] == "FAILED"
    assert result["notify"]["error"] == "States.Runtime"
    assert "'TaskToken'" in result["notify"]["cause"]
    # And the execution waiting for that callback is never resumed
    assert result["waiter"]["status"] == "RUNNING"


def test_gap3_unpatched_moto_loses_a_callback_sent_during_the_call(unpatched: UnpatchedProbe) -> None:
    # Given pristine moto and a Lambda that calls SendTaskSuccess before it returns
    # When lambda:invoke.waitForTaskToken with HeartbeatSeconds runs it
    result = unpatched.result("early_callback")

    # Then the callback is lost: the task fails at the first missed heartbeat (reported as States.Timeout, gap 2)
    assert result["status"] == "FAILED", result
    assert result["error"] == "States.Timeout"
    assert result["elapsed_s"] >= HEARTBEAT_S


def test_gap28_patched_heartbeat_sent_during_the_call_is_accepted(patched: None) -> None:
    # Given moto with the Step Functions patches installed and a Lambda that sends a heartbeat before it returns
    # When lambda:invoke.waitForTaskToken runs it
    result = scenario_early_heartbeat()
    # Then the heartbeat is accepted, as AWS accepts it (the reconciler heartbeats a job right after it registered)
    assert result == {"heartbeat": "accepted"}


def test_gap28_patched_heartbeat_for_a_task_with_its_outcome_is_refused(patched: None) -> None:
    # Given moto with the Step Functions patches, and a task (without HeartbeatSeconds) that got its outcome while
    # its execution goes on
    # When a heartbeat is sent for it
    result = scenario_heartbeat_after_the_outcome()
    # Then it is refused: the task is closed (accepting it would tell a reconciler the job still waits)
    assert result == {"heartbeat": "InvalidToken"}


def test_gap28_unpatched_moto_calls_a_heartbeat_during_the_call_an_invalid_token(unpatched: UnpatchedProbe) -> None:
    # Given pristine moto and a Lambda that sends a heartbeat before it returns
    # When lambda:invoke.waitForTaskToken runs it
    result = unpatched.result("early_heartbeat")
    # Then moto refuses it as if the task were closed: a reconciler would forget a live registration
    assert result == {"heartbeat": "InvalidToken"}


def test_gap2_unpatched_moto_has_the_same_missed_heartbeat(unpatched: UnpatchedProbe) -> None:
    # Given pristine moto, when a waiting task misses its heartbeat, then it is as offline: gap 2 is moto's own
    assert unpatched.result("missed_heartbeat") == MISSED_HEARTBEAT


def test_gap4_unpatched_moto_ignores_stop_during_callback_wait(unpatched: UnpatchedProbe) -> None:
    # Given pristine moto and an execution waiting for a callback that never comes
    # When StopExecution is called
    result = unpatched.result("stop_while_waiting")

    # Then the execution is still RUNNING well after the stop
    assert result["status"] == "RUNNING", result
    assert result["elapsed_s"] >= STOP_WITHIN_S
    assert "ExecutionAborted" not in result["events"]


def test_gap5_unpatched_moto_names_unnamed_executions_none(unpatched: UnpatchedProbe) -> None:
    # Given pristine moto
    # When StartExecution is called twice without a name
    result = unpatched.result("unnamed_executions")

    # Then the first ARN ends in ":None" and the second start is refused
    assert result["first"].endswith(":None")
    assert result["second"] is None
    assert result["second_error"] == "ExecutionAlreadyExists"


def test_gap8_unpatched_moto_sends_no_status_change_events(unpatched: UnpatchedProbe) -> None:
    assert unpatched.result("status_change_events")["events"] == []


def test_gap9_unpatched_moto_cannot_store_the_start_time(unpatched: UnpatchedProbe) -> None:
    # Given pristine moto, when a DynamoDB task stores $$.Execution.StartTime, then it fails (a datetime object)
    result = unpatched.result("start_time")
    assert result["status"] == "FAILED"
    assert "not JSON serializable" in (result["cause"] or "")


def test_gap32_unpatched_moto_writes_its_own_context_object(unpatched: UnpatchedProbe) -> None:
    # Given pristine moto, when a Pass state reads $$.State and the next $$.Execution.RedriveCount
    result = unpatched.result("context_object")
    # Then the state was entered at a time in Python's form (microseconds, +00:00), with no retry count
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", result["state"]["EnteredTime"]), result
    assert "RetryCount" not in result["state"]
    # And the execution fails reading RedriveCount, which moto's context object lacks
    assert result["end"] == "ExecutionFailed"
    assert (
        "The JSONPath '$$.Execution.RedriveCount' specified for the field 'count.$' could not be found"
        in (result["redrive"])
    ), result


def test_gap33_unpatched_moto_cannot_describe_an_execution_holding_an_sdk_timestamp(
    unpatched: UnpatchedProbe,
) -> None:
    # Given pristine moto, when an execution keeps an aws-sdk:s3:listObjectsV2 result in its output
    result = unpatched.result("sdk_timestamps")
    # Then DescribeExecution fails on the object's LastModified, a datetime object, which the history writes as +00:00
    assert "Object of type datetime is not JSON serializable" in result["described"]["error"], result
    assert result["history"].endswith("+00:00"), result


def test_gap34_unpatched_moto_records_an_unresolved_timer_path_as_the_states_failure(
    unpatched: UnpatchedProbe,
) -> None:
    # Given pristine moto, when a waiting task's TimeoutSecondsPath or HeartbeatSecondsPath resolves to nothing
    result = unpatched.result("unresolved_timer_paths")
    # Then without a Catch the history holds two ExecutionFailed events
    assert result["heartbeat"]["status"] == "FAILED"
    assert result["heartbeat"]["events"].count("ExecutionFailed") == 2, result["heartbeat"]
    # And a Catch on States.ALL takes it: the execution succeeds past an ExecutionFailed event
    assert result["timeout"]["status"] == "SUCCEEDED"
    assert "ExecutionFailed" in result["timeout"]["events"], result["timeout"]


def test_gap37_unpatched_moto_catches_states_runtime_with_states_all(unpatched: UnpatchedProbe) -> None:
    # Given pristine moto, when a Task's Parameters name a missing path and its Catch is on States.ALL
    result = unpatched.result("states_all")
    # Then the Catch takes States.Runtime and the execution goes on to succeed
    assert result["missing_path"]["status"] == "SUCCEEDED", result
    assert "PassStateEntered" in result["missing_path"]["events"], result


def test_gap23_unpatched_moto_keeps_every_finished_thread(unpatched: UnpatchedProbe) -> None:
    # Given pristine moto, when 10 executions of a Parallel state with two branches end
    result = unpatched.result("finished_threads")
    # Then every branch's finished thread is still in memory (moto's TMP_THREADS list holds it)
    assert result["statuses"] == ["SUCCEEDED"] * 10
    assert result["kept"] == result["branches_run"], result


def test_unpatched_moto_holds_three_threads_per_execution_waiting_for_its_callback(unpatched: UnpatchedProbe) -> None:
    assert unpatched.result("waiting_threads") == {"waiting": 10, "threads": 30}


def test_fix_targets_exist_in_moto_and_install_replaces_them(unpatched: UnpatchedProbe) -> None:
    # Given pristine moto
    # When the attributes the fixes patch or call are looked up
    found = unpatched.result("fix_targets")

    # Then each is where, and has the parameters, localcloud.fixes.sfn expects
    normalise = ["self", "{}", "boto_service_name", "service_action_name"]
    assert found == {
        "StateTaskServiceAwsSdk._normalise_parameters": {
            "defined_by": "StateTaskService._normalise_parameters",
            "parameters": [p.format("parameters") for p in normalise],
        },
        "StateTaskServiceAwsSdk._normalise_response": {
            "defined_by": "StateTaskService._normalise_response",
            "parameters": [p.format("response") for p in normalise],
        },
        "StateTaskServiceAwsSdk._to_boto_request": {
            "defined_by": "StateTaskService._to_boto_request",
            "parameters": ["self", "parameters", "structure_shape"],
        },
        "StateTaskServiceAwsSdk._from_boto_response": {
            "defined_by": "StateTaskService._from_boto_response",
            "parameters": ["self", "response", "structure_shape"],
        },
        "StateTaskServiceAwsSdk._get_boto_service_name": {
            "defined_by": "StateTaskService._get_boto_service_name",
            "parameters": ["self", "boto_service_name"],
        },
        "StateTaskServiceAwsSdk._get_boto_service_action": {
            "defined_by": "StateTaskService._get_boto_service_action",
            "parameters": ["self", "service_action_name"],
        },
        "CallbackEndpoint.setup_heartbeat_endpoint": {
            "defined_by": "CallbackEndpoint.setup_heartbeat_endpoint",
            "parameters": ["self", "heartbeat_seconds"],
        },
        "CallbackEndpoint.get_outcome": {"defined_by": "CallbackEndpoint.get_outcome", "parameters": ["self"]},
        "CallbackEndpoint.interrupt_all": {"defined_by": "CallbackEndpoint.interrupt_all", "parameters": ["self"]},
        "HeartbeatEndpoint.notify": {"defined_by": "HeartbeatEndpoint.notify", "parameters": ["self"]},
        "ExecutionWorker.stop": {
            "defined_by": "ExecutionWorker.stop",
            "parameters": ["self", "stop_date", "error", "cause"],
        },
        "ExecutionState._evaluate_with_timeout": {
            "defined_by": "ExecutionState._evaluate_with_timeout",
            "parameters": ["self", "env"],
        },
        "StateTaskServiceCallback._eval_wait_for_task_token": {
            "defined_by": "StateTaskServiceCallback._eval_wait_for_task_token",
            "parameters": ["self", "env", "timeout_seconds", "callback_endpoint", "heartbeat_endpoint"],
        },
        "StepFunctionsParserBackend.start_execution": {
            "defined_by": "StepFunctionsParserBackend.start_execution",
            "parameters": ["self", "state_machine_arn", "name", "execution_input", "trace_header"],
        },
        "CallbackPoolManager()._pool": "OrderedDict",
        "HeartbeatEndpoint(1) attributes": ["_heartbeat_seconds", "_mutex", "_next_heartbeat_event"],
        "ExecutionState._evaluate_with_timeout source": "c56deda08a42e98d",
    }

    # And the registry puts each fix in place, and takes it out again
    from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk import (
        StateTaskServiceAwsSdk,
    )
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackEndpoint
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    from localcloud.fixes import patches, sfn

    moto_stop = ExecutionWorker.stop
    with patches.Patches(patches.step_functions()):
        assert StateTaskServiceAwsSdk._normalise_parameters is sfn.normalise_parameters
        assert StateTaskServiceAwsSdk._normalise_response is sfn.sdk_normalise_response
        assert CallbackEndpoint.setup_heartbeat_endpoint is sfn.setup_heartbeat_endpoint
        assert ExecutionWorker.stop is sfn.stop
        assert ExecutionState._evaluate_with_timeout is sfn.evaluate_with_timeout
        assert StepFunctionsParserBackend.start_execution is sfn.start_execution
    assert ExecutionWorker.stop is moto_stop


if __name__ == "__main__":
    # The unpatched probe: `python test_sfn_fixes.py` prints every scenario's observations as one JSON line.
    print(json.dumps(run_scenarios()))
