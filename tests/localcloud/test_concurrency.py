"""The offline cloud is linearizable where AWS is, under concurrent callers (offline-cloud.md gaps 8, 10-14, 21, 24,
30, 31).

Each race is shown on moto alone (the unfixed method, kept by the fix) and with the offline cloud's fix, with the
interleaving forced (a gate, a barrier and a tiny thread switch interval) rather than hoped for.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core.model import OperationModel, ServiceModel
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.sqs.models import SQSBackend
from moto.stepfunctions.exceptions import ExecutionAlreadyExists
from moto.stepfunctions.parser.api import InvalidToken
from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor
from moto.stepfunctions.parser.backend.execution import Execution
from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
from moto.stepfunctions.parser.models import StepFunctionsParserBackend, stepfunctions_parser_backends

from localcloud.account import ACCOUNT_ID
from localcloud.clock import ManualClock
from localcloud.fixes import events, patches, sfn
from tests.localcloud.simulated import wait_for

REGION = "us-east-1"
MOTO_CONFIG: Any = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    with patches.Patches([*patches.step_functions(), *patches.dynamodb_atomic()]), mock_aws(config=MOTO_CONFIG):
        yield


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Switch threads as often as the interpreter can, so a check-then-act window is hit when it exists."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


# --- DynamoDB: a conditional write is atomic -------------------------------------------------------------------------
def _conditional_put_winners(put: Callable[..., Any], rounds: int = 100, contenders: int = 8) -> list[int]:
    """For each round, `contenders` threads put the same new key with attribute_not_exists at the same instant;
    return how many won each round."""
    table = f"locks-{uuid.uuid4().hex[:8]}"
    boto3.client("dynamodb", region_name=REGION).create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    backend = dynamodb_backends[ACCOUNT_ID][REGION]
    winners = []
    for round_ in range(rounds):
        won: list[int] = []
        start = threading.Barrier(contenders)

        def contend(
            who: int, key: str = f"run-{round_}", start: threading.Barrier = start, won: list[int] = won
        ) -> None:
            start.wait()
            try:
                put(backend, table, {"pk": {"S": key}, "holder": {"S": str(who)}}, None, "attribute_not_exists(pk)")
                won.append(who)
            except Exception:  # noqa: BLE001, S110 - ConditionalCheckFailed: the others lost, as they should
                pass

        threads = [threading.Thread(target=contend, args=(who,)) for who in range(contenders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners.append(len(won))
    return winners


def test_moto_alone_lets_two_conditional_puts_of_one_key_both_win(aws: None, busy_switching: None) -> None:
    # Given moto's own put_item (the check and the write with nothing between them)
    unfixed = DynamoDBBackend.put_item.__localcloud_original__  # type: ignore[attr-defined]
    # When 8 threads race for one key, 100 times
    winners = _conditional_put_winners(unfixed)
    # Then some rounds have more than one winner: the gap the fix closes is still in moto
    assert max(winners) > 1


def test_a_conditional_put_of_one_key_has_exactly_one_winner(aws: None, busy_switching: None) -> None:
    # Given the offline cloud's DynamoDB
    # When 8 threads race for one key, 100 times
    winners = _conditional_put_winners(DynamoDBBackend.put_item)
    # Then every round has exactly one winner, as on DynamoDB
    assert set(winners) == {1}


# --- Step Functions: StartExecution of one name from many callers -----------------------------------------------------
def _pass_machine(prefix: str) -> str:
    """A new state machine of one Pass state; its ARN."""
    definition = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
    return str(
        boto3.client("stepfunctions", region_name=REGION).create_state_machine(
            name=f"{prefix}-{uuid.uuid4().hex[:8]}",
            definition=json.dumps(definition),
            roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/r",
        )["stateMachineArn"]
    )


def _executions_per_name(start: Callable[..., Any], rounds: int = 20, callers: int = 8) -> list[int]:
    """For each round, `callers` threads start an execution of one state machine with one name and one input at the
    same instant (a refused start is ExecutionAlreadyExists); return how many executions each round's name has."""
    machine = _pass_machine("once")
    backend = stepfunctions_parser_backends[ACCOUNT_ID][REGION]
    counts = []
    for round_ in range(rounds):
        barrier = threading.Barrier(callers)

        def call(name: str = f"task-{round_}", barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            with contextlib.suppress(ExecutionAlreadyExists):
                start(backend, machine, name, '{"n": 1}')

        threads = [threading.Thread(target=call) for _ in range(callers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        executions = backend.describe_state_machine(machine).executions
        counts.append(sum(execution.name == f"task-{round_}" for execution in executions))
    return counts


def test_moto_alone_starts_two_executions_of_one_name(aws: None, busy_switching: None) -> None:
    # When 8 callers start one name at once, 20 times, on moto's own StartExecution
    counts = _executions_per_name(sfn._original_start_execution)
    # Then some names have more than one execution: the gap the fix closes is still in moto
    assert max(counts) > 1


def test_callers_starting_one_name_at_once_start_one_execution(aws: None, busy_switching: None) -> None:
    # When 8 callers start one name at once, 20 times, on the offline cloud
    counts = _executions_per_name(StepFunctionsParserBackend.start_execution)
    # Then each name has exactly one execution, as on Step Functions
    assert set(counts) == {1}


# --- Step Functions: an execution listed while it starts -------------------------------------------------------------
def _listing_while_starting() -> Iterator[Callable[[], list[str]]]:
    """A new execution of a Pass state machine held between moto appending it to the state machine's executions and
    its start; a ListExecutions of that state machine, as the statuses it answers."""
    gate, reached, start = threading.Event(), threading.Event(), Execution.start

    def held(self: Execution) -> None:
        reached.set()
        gate.wait(timeout=30)
        start(self)

    client, machine = boto3.client("stepfunctions", region_name=REGION), _pass_machine("listed")
    starter = threading.Thread(target=client.start_execution, kwargs={"stateMachineArn": machine})
    Execution.start = held  # type: ignore[method-assign]
    try:
        starter.start()
        assert reached.wait(timeout=30)
        yield lambda: [e["status"] for e in client.list_executions(stateMachineArn=machine)["executions"]]
    finally:
        gate.set()
        starter.join()
        Execution.start = start  # type: ignore[method-assign]


def test_moto_alone_fails_a_list_executions_that_meets_a_starting_execution(aws: None) -> None:
    # moto's own constructor, put back before the fixture uninstalls the patches (a test's monkeypatch would undo after
    # it, and so leave the patch installed)
    with pytest.MonkeyPatch.context() as moto_alone:
        moto_alone.setattr(Execution, "__init__", sfn._original_execution_init)
        for list_statuses in _listing_while_starting():
            # When ListExecutions reads an execution moto has appended but not started
            # Then it reads the status moto has not set yet and fails (a 500 to the caller)
            with pytest.raises(AttributeError):
                list_statuses()


def test_an_execution_is_running_from_the_moment_it_can_be_listed(aws: None) -> None:
    for list_statuses in _listing_while_starting():
        # When ListExecutions reads an execution that is still starting
        # Then it is listed RUNNING, as Step Functions lists it
        assert list_statuses() == ["RUNNING"]


# --- Step Functions: SendTask* while an execution is starting ---------------------------------------------------------
def _starting_execution() -> Iterator[StepFunctionsParserBackend]:
    """An execution held at the instant between its start (RUNNING) and its interpreter's environment."""
    gate, reached = threading.Event(), threading.Event()
    original = ExecutionWorker._get_evaluation_environment

    def held(self: ExecutionWorker) -> Any:
        reached.set()
        gate.wait(timeout=30)
        return original(self)

    ExecutionWorker._get_evaluation_environment = held  # type: ignore[method-assign]
    try:
        boto3.client("stepfunctions", region_name=REGION).start_execution(stateMachineArn=_pass_machine("starting"))
        assert reached.wait(timeout=30)
        yield stepfunctions_parser_backends[ACCOUNT_ID][REGION]
    finally:
        gate.set()
        ExecutionWorker._get_evaluation_environment = original  # type: ignore[method-assign]


def test_moto_alone_fails_a_send_task_success_that_meets_a_starting_execution(aws: None) -> None:
    for backend in _starting_execution():
        # When a SendTaskSuccess (for any token) scans the executions while one is starting
        # Then moto's scan reads the starting execution's missing environment and fails (a 500 to the caller)
        with pytest.raises(AttributeError):
            sfn._original_send_task_success(backend, "a-token-of-another-execution", "{}")


def test_send_task_success_finds_its_task_by_token_whatever_else_is_starting(aws: None) -> None:
    for backend in _starting_execution():
        # When a SendTaskSuccess for an unknown token arrives while an execution is starting
        # Then it is refused as AWS refuses it, without touching the starting execution
        with pytest.raises(InvalidToken):
            backend.send_task_success("a-token-of-another-execution", "{}")


# --- Step Functions: one task closed by many callers at once ---------------------------------------------------------
Close = Callable[[Any, str, int], None]  # (Step Functions client, task token, caller): one SendTask{Success,Failure}


def _callback_machine(timeout_seconds: int | None = None) -> tuple[str, str]:
    """A state machine whose task sends its token to a new queue and waits for it (for `timeout_seconds`, if given),
    catching a failure, then waits an hour (so a caller that comes after the task closed meets its execution still
    RUNNING, as a late callback on AWS does); its ARN and the queue's URL."""
    sqs = boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName=f"tokens-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    definition = {
        "StartAt": "Callback",
        "States": {
            "Callback": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                "Parameters": {"QueueUrl": queue, "MessageBody.$": "$$.Task.Token"},
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "Hold"}],
                "Next": "Hold",
                **({"TimeoutSeconds": timeout_seconds} if timeout_seconds else {}),
            },
            "Hold": {"Type": "Wait", "Seconds": 3600, "End": True},
        },
    }
    machine = boto3.client("stepfunctions", region_name=REGION).create_state_machine(
        name=f"closed-{uuid.uuid4().hex[:8]}",
        definition=json.dumps(definition),
        roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/r",
    )["stateMachineArn"]
    return str(machine), str(queue)


def _started(client: Any, sqs: Any, machine: str, queue: str) -> tuple[str, str]:
    """A new execution of a `_callback_machine` whose task is waiting: its ARN and the task's token."""
    execution = client.start_execution(stateMachineArn=machine)["executionArn"]
    token = wait_for(
        lambda: next((m["Body"] for m in sqs.receive_message(QueueUrl=queue).get("Messages", [])), None),
        what="the task's token",
    )
    return str(execution), str(token)


def _racing_closes(closers: list[Close], rounds: int = 25, callers: int = 8) -> list[dict[str, Any]]:
    """For each round, a new execution's task waits for its callback and `callers` threads close it at the same
    instant (the closers taken in turn); per round, who was answered success, the error codes the others were
    answered, and the task's closing events in the execution's history (TaskSucceeded, TaskFailed)."""
    client, sqs = boto3.client("stepfunctions", region_name=REGION), boto3.client("sqs", region_name=REGION)
    machine, queue = _callback_machine()
    results = []
    for _ in range(rounds):
        execution, token = _started(client, sqs, machine, queue)
        start, won, refused = threading.Barrier(callers), list[int](), list[str]()

        def close(
            who: int,
            token: str = token,
            start: threading.Barrier = start,
            won: list[int] = won,
            refused: list[str] = refused,
        ) -> None:
            start.wait()
            try:
                closers[who % len(closers)](client, token, who)
                won.append(who)
            except ClientError as exc:
                refused.append(exc.response["Error"]["Code"])

        threads = [threading.Thread(target=close, args=(who,)) for who in range(callers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # the task has taken its outcome once the execution waits in Hold
        events = wait_for(functools.partial(_history_with, client, execution, "WaitStateEntered"), what="the outcome")
        closing = [event for event in events if event["type"] in ("TaskSucceeded", "TaskFailed")]
        results.append({"won": won, "refused": refused, "closing": closing})
        client.stop_execution(executionArn=execution)
    return results


def _history_with(client: Any, execution: str, event_type: str) -> list[dict[str, Any]] | None:
    events: list[dict[str, Any]] = client.get_execution_history(executionArn=execution, maxResults=1000)["events"]
    return events if any(event["type"] == event_type for event in events) else None


def _succeed(client: Any, token: str, who: int) -> None:
    client.send_task_success(taskToken=token, output=json.dumps({"who": who}))


def _fail(client: Any, token: str, who: int) -> None:
    client.send_task_failure(taskToken=token, error=f"Worker{who}")


def _moto_succeed(client: Any, token: str, who: int) -> None:
    backend = stepfunctions_parser_backends[ACCOUNT_ID][REGION]
    sfn._original_send_task_success(backend, token, json.dumps({"who": who}))


def test_moto_alone_lets_every_caller_close_one_task(aws: None, busy_switching: None) -> None:
    # When 8 callers send SendTaskSuccess for one waiting task at once, 25 times, on moto's own SendTaskSuccess
    results = _racing_closes([_moto_succeed])
    # Then more than one caller of a task is told its outcome was taken: the gap the fix closes is still in moto
    assert max(len(result["won"]) for result in results) > 1


def test_of_callers_closing_one_task_at_once_exactly_one_succeeds(aws: None, busy_switching: None) -> None:
    # When 8 callers close one waiting task at once, half with SendTaskSuccess and half with SendTaskFailure, 25 times
    results = _racing_closes([_succeed, _fail])
    for result in results:
        # Then exactly one is answered success and the others TaskTimedOut, as Step Functions answers a closed task
        assert len(result["won"]) == 1 and result["refused"] == ["TaskTimedOut"] * 7, result
        # And the task closed once, with the outcome of the caller that was answered success
        [event] = result["closing"]
        [winner] = result["won"]
        if event["type"] == "TaskSucceeded":
            assert json.loads(event["taskSucceededEventDetails"]["output"]) == {"who": winner}
        else:
            assert event["taskFailedEventDetails"]["error"] == f"Worker{winner}"


def _late_callback(send: Close) -> str | None:
    """A task that timed out (TimeoutSeconds 1, caught) while its execution goes on; `send` then closes it: the error
    code it was answered, None if it was answered success."""
    client, sqs = boto3.client("stepfunctions", region_name=REGION), boto3.client("sqs", region_name=REGION)
    machine, queue = _callback_machine(timeout_seconds=1)
    execution, token = _started(client, sqs, machine, queue)
    wait_for(functools.partial(_history_with, client, execution, "WaitStateEntered"), what="the task's timeout")
    try:
        send(client, token, 0)
        return None
    except ClientError as exc:
        return str(exc.response["Error"]["Code"])
    finally:
        client.stop_execution(executionArn=execution)


def test_moto_alone_takes_a_callback_for_a_task_that_timed_out(aws: None) -> None:
    # When a task has timed out and its execution went on through its Catch, moto's own SendTaskSuccess is answered
    # success: the gap the fix closes is still in moto
    assert _late_callback(_moto_succeed) is None


def test_a_callback_for_a_task_of_an_ended_execution_hears_task_timed_out(aws: None) -> None:
    # Given a task waiting for its callback, whose execution is then stopped
    client, sqs = boto3.client("stepfunctions", region_name=REGION), boto3.client("sqs", region_name=REGION)
    machine, queue = _callback_machine()
    execution, token = _started(client, sqs, machine, queue)
    client.stop_execution(executionArn=execution)
    wait_for(lambda: client.describe_execution(executionArn=execution)["status"] == "ABORTED", what="the stop")
    # When its callback arrives late, Then it is answered TaskTimedOut, as Step Functions answers it
    with pytest.raises(ClientError) as late:
        _succeed(client, token, 0)
    assert late.value.response["Error"]["Code"] == "TaskTimedOut"


def test_a_callback_for_a_task_that_timed_out_hears_task_timed_out(aws: None) -> None:
    # When a task has timed out and its execution went on through its Catch, a late SendTaskSuccess or
    # SendTaskFailure is answered TaskTimedOut, as Step Functions answers it
    assert (_late_callback(_succeed), _late_callback(_fail)) == ("TaskTimedOut", "TaskTimedOut")


def test_a_callback_after_the_timeout_during_the_tasks_own_call_hears_task_timed_out(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a task (TimeoutSeconds 60, on a clock the test moves) whose own call, its SQS send, is still running when
    # its token has been sent and its TimeoutSeconds passes
    clock, released = ManualClock(), threading.Event()
    monkeypatch.setattr(sfn, "CLOCK", clock)
    send_message = SQSBackend.send_message

    def held_send(backend: SQSBackend, *args: Any, **kwargs: Any) -> Any:
        sent = send_message(backend, *args, **kwargs)
        released.wait(30)  # the call goes on after its message is in the queue
        return sent

    monkeypatch.setattr(SQSBackend, "send_message", held_send)
    client, sqs = boto3.client("stepfunctions", region_name=REGION), boto3.client("sqs", region_name=REGION)
    machine, queue = _callback_machine(timeout_seconds=60)
    execution, token = _started(client, sqs, machine, queue)
    clock.advance(61)
    # When a callback comes then, Then it hears TaskTimedOut, as on AWS, where the task timed out at 60 s
    with pytest.raises(ClientError) as late:
        _succeed(client, token, 0)
    assert late.value.response["Error"]["Code"] == "TaskTimedOut"
    # And once the call returns, the state times out (its Catch goes on) rather than taking an outcome
    released.set()
    history = wait_for(functools.partial(_history_with, client, execution, "TaskTimedOut"), what="the timeout")
    timed_out = next(event for event in history if event["type"] == "TaskTimedOut")
    assert timed_out["taskTimedOutEventDetails"]["error"] == "States.Timeout"
    assert _history_with(client, execution, "TaskSucceeded") is None
    client.stop_execution(executionArn=execution)


# --- Step Functions: many definitions parsed at once ------------------------------------------------------------------
def _jsonpath_definition(n: int) -> str:
    """An ordinary JSONPath definition: Pass states shaping their input with Parameters and intrinsic functions."""
    shape = {
        "id.$": "States.Format('job-{}', $.n)",
        "parts.$": "States.StringSplit($.csv, ',')",
        "name.$": "$$.Execution.Name",
    }
    count = {"parts.$": "States.ArrayLength($.shaped.parts)", "next.$": "States.MathAdd($.n, 1)"}
    return json.dumps(
        {
            "Comment": f"definition {n}",
            "StartAt": "Shape",
            "States": {
                "Shape": {"Type": "Pass", "Parameters": shape, "ResultPath": "$.shaped", "Next": "Count"},
                "Count": {"Type": "Pass", "Parameters": count, "Next": "Enough"},
                "Enough": {
                    "Type": "Choice",
                    "Choices": [{"Variable": "$.parts", "NumericEquals": 3, "Next": "Done"}],
                    "Default": "Short",
                },
                "Short": {"Type": "Fail", "Error": "Short"},
                "Done": {"Type": "Succeed"},
            },
        }
    )


# A JSONata definition, valid on AWS (created, never started: moto evaluates JSONata on a JVM that is not here).
JSONATA_DEFINITION = json.dumps(
    {
        "QueryLanguage": "JSONata",
        "StartAt": "Keep",
        "States": {"Keep": {"Type": "Pass", "Output": "{% $states.input %}", "End": True}},
    }
)
# A JSONPath field in a JSONata state: AWS refuses the definition, and so does moto.
REFUSED_DEFINITION = json.dumps(
    {
        "QueryLanguage": "JSONata",
        "StartAt": "Shape",
        "States": {"Shape": {"Type": "Pass", "Parameters": {"a": 1}, "End": True}},
    }
)


def _definitions_made_at_once(rounds: int, callers: int = 24, run: bool = True) -> tuple[list[str], list[str]]:
    """For each round, `callers` threads at once each create a state machine: most of a JSONPath definition (then
    started with `run`), some of a JSONata one and one of a definition AWS refuses. Returns what the valid
    definitions met (each error of CreateStateMachine or StartExecution), and the executions started."""
    client = boto3.client("stepfunctions", region_name=REGION)
    errors: list[str] = []
    executions: list[str] = []
    for round_ in range(rounds):
        start = threading.Barrier(callers)

        def make(n: int, round_: int = round_, start: threading.Barrier = start) -> None:
            kind = n % 8
            definition = (
                REFUSED_DEFINITION if kind == 0 else JSONATA_DEFINITION if kind < 3 else _jsonpath_definition(n)
            )
            start.wait()
            try:
                machine = client.create_state_machine(
                    name=f"parsed-{round_}-{n}-{uuid.uuid4().hex[:6]}",
                    definition=definition,
                    roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/r",
                )["stateMachineArn"]
                if run and kind >= 3:
                    executions.append(
                        client.start_execution(stateMachineArn=machine, input=json.dumps({"n": n, "csv": "a,b,c"}))[
                            "executionArn"
                        ]
                    )
            except ClientError as exc:
                if definition is not REFUSED_DEFINITION:
                    errors.append(str(exc))

        threads = [threading.Thread(target=make, args=(n,)) for n in range(callers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return errors, executions


def test_moto_alone_refuses_valid_definitions_parsed_with_others(aws: None, busy_switching: None) -> None:
    # Given moto's own parser: one list of query-language scopes for every parse (a fresh one for this test, put back
    # after it, as the test leaves scopes in it; both undone before the fixture uninstalls the patches)
    with pytest.MonkeyPatch.context() as moto_alone:
        moto_alone.delattr(Preprocessor, "__init__")
        moto_alone.setattr(Preprocessor, "_query_language_per_scope", [])
        # When 24 callers create state machines at once, 3 times
        errors, _ = _definitions_made_at_once(rounds=3, run=False)
    # Then valid JSONPath definitions are refused as if they were in a JSONata block: the gap the fix closes
    assert any("Unsupported declaration in QueryLanguage=JSONPath block" in error for error in errors), errors[:3]


def test_definitions_created_and_started_at_once_all_run(aws: None, busy_switching: None) -> None:
    client = boto3.client("stepfunctions", region_name=REGION)
    # When 24 callers create state machines at once and start the JSONPath ones, 8 times
    errors, executions = _definitions_made_at_once(rounds=8)
    # Then every valid definition is created and started (only the one AWS refuses is refused)
    assert errors == []
    assert len(executions) == 8 * 15
    # And every execution runs to success
    ends = [wait_for(functools.partial(_end, client, arn), timeout=30, what="an execution's end") for arn in executions]
    assert set(ends) == {"SUCCEEDED"}


def _end(client: Any, execution: str) -> str | None:
    """How the execution ended, once it has."""
    status = _status(client, execution)
    return None if status == "RUNNING" else status


# --- EventBridge: reserved sources ------------------------------------------------------------------------------------
def test_a_client_cannot_put_an_event_with_an_aws_source(aws: None, request: pytest.FixtureRequest) -> None:
    installed = patches.Patches(
        patches.event_delivery(lambda arn, payload: None, lambda arn, payload, attributes: None)
    )
    request.addfinalizer(installed.uninstall)
    installed.install()
    client = boto3.client("events", region_name=REGION)
    forged = {"Source": "aws.translate", "DetailType": "Translate TextTranslationJob State Change", "Detail": "{}"}
    own = {"Source": "callback-kit.tests", "DetailType": "Anything", "Detail": "{}"}
    # When a client puts a service's event next to one of its own
    answer = client.put_events(Entries=[forged, own])
    # Then the forged one is refused, as EventBridge refuses it, and the other accepted
    assert answer["FailedEntryCount"] == 1
    assert answer["Entries"][0]["ErrorCode"] == "NotAuthorizedForSourceException"
    assert "EventId" in answer["Entries"][1]
    # And the offline services themselves (simulators, Step Functions) still put theirs
    with events.as_service():
        assert client.put_events(Entries=[forged])["FailedEntryCount"] == 0


# --- EventBridge: rules change while events are put -------------------------------------------------------------------
def _put_events_while_rules_change(rules: int = 150, putters: int = 4, puts: int = 150) -> list[str]:
    """Put events on `putters` threads while another thread adds rules (each with a target) to the same bus; return
    the errors the PutEvents calls met."""
    client, sqs = boto3.client("events", region_name=REGION), boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName=f"rules-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    errors: list[str] = []
    start = threading.Barrier(putters + 1)

    def add_rules() -> None:
        start.wait()
        for n in range(rules):
            client.put_rule(Name=f"rule-{n}", EventPattern=json.dumps({"source": [f"other-{n}"]}))
            client.put_targets(Rule=f"rule-{n}", Targets=[{"Id": "queue", "Arn": arn}])

    def put() -> None:
        start.wait()
        for _ in range(puts):
            try:
                client.put_events(Entries=[{"Source": "callback-kit.tests", "DetailType": "x", "Detail": "{}"}])
            except Exception as exc:  # noqa: BLE001 - what the caller would see
                errors.append(str(exc))

    threads = [threading.Thread(target=add_rules), *(threading.Thread(target=put) for _ in range(putters))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_moto_alone_fails_a_put_events_that_meets_a_new_rule(aws: None, busy_switching: None) -> None:
    # When rules are added while events are put, on moto as it is
    errors = _put_events_while_rules_change()
    # Then some PutEvents fail (and their events are lost): moto iterates the rules as they change
    assert any("mutated during iteration" in error for error in errors), errors[:3]


def test_put_events_is_unaffected_by_rules_changing_meanwhile(
    aws: None, busy_switching: None, request: pytest.FixtureRequest
) -> None:
    installed = patches.Patches(
        [
            *patches.events_atomic(),
            *patches.event_delivery(lambda arn, payload: None, lambda arn, payload, attributes: None),
        ]
    )
    request.addfinalizer(installed.uninstall)
    installed.install()
    # When rules are added while events are put, on the offline cloud
    errors = _put_events_while_rules_change()
    # Then every PutEvents is answered
    assert errors == []


# --- moto's request routing: the first requests of a service, at once ------------------------------------------------
def _operation_models_from_many_threads(rounds: int = 20, threads: int = 8) -> list[Any]:
    """For each round, a new Lambda service model (as routing loads it) asked for every operation's model by
    `threads` threads at once; every model they were handed."""
    description = botocore.session.get_session().get_component("data_loader").load_service_model("lambda", "service-2")
    handed: list[Any] = []
    for _ in range(rounds):
        model = ServiceModel(description, "lambda")
        start = threading.Barrier(threads)

        def ask(model: ServiceModel = model, start: threading.Barrier = start) -> None:
            start.wait()
            handed.extend(model.operation_model(name) for name in model.operation_names)

        workers = [threading.Thread(target=ask) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    return handed


def test_moto_alone_can_hand_a_router_botocores_operation_model(busy_switching: None) -> None:
    # When 8 threads route a service's first requests at once, on moto as it is
    handed = _operation_models_from_many_threads()
    # Then some are handed botocore's operation model, which has no http_trait (the request fails)
    assert any(not hasattr(model, "http_trait") for model in handed)


def test_every_router_is_handed_motos_operation_model(busy_switching: None, request: pytest.FixtureRequest) -> None:
    installed = patches.Patches(patches.routing_atomic())
    request.addfinalizer(installed.uninstall)
    installed.install()
    # When 8 threads route a service's first requests at once, on the offline cloud
    handed = _operation_models_from_many_threads()
    # Then every one gets moto's operation model, with its http_trait
    assert handed and all(isinstance(model, OperationModel) and model.http_trait for model in handed)


# --- the interpreter's clients ---------------------------------------------------------------------------------------
def test_the_interpreter_builds_one_client_per_service_even_from_many_threads(aws: None) -> None:
    # When 16 threads ask for the Lambda client the interpreter uses for its Task states, at once
    start = threading.Barrier(16)
    clients: list[Any] = []

    def ask() -> None:
        start.wait()
        clients.append(sfn.shared_boto_client_for(REGION, "lambda"))

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then every one got the same, fully built client
    assert len(clients) == 16 and len({id(c) for c in clients}) == 1
    assert clients[0].meta.service_model.service_name == "lambda"


# --- StopExecution wherever the execution is --------------------------------------------------------------------------
def _branch(n: int) -> dict[str, Any]:
    return {
        "StartAt": f"Prepare{n}",
        "States": {
            f"Prepare{n}": {"Type": "Pass", "Next": f"Wait{n}"},
            f"Wait{n}": {"Type": "Wait", "Seconds": 60, "End": True},
        },
    }


def _status(client: Any, execution: str) -> str:
    return str(client.describe_execution(executionArn=execution)["status"])


@pytest.mark.parametrize(
    "definition",
    [
        {
            "StartAt": "Both",
            "States": {"Both": {"Type": "Parallel", "Branches": [_branch(1), _branch(2)], "End": True}},
        },
        {
            "StartAt": "Each",
            "States": {"Each": {"Type": "Map", "ItemsPath": "$.items", "Iterator": _branch(3), "End": True}},
        },
        {"StartAt": "Wait", "States": {"Wait": {"Type": "Wait", "Seconds": 60, "End": True}}},
    ],
    ids=["parallel", "map", "wait"],
)
def test_stop_execution_aborts_the_execution_wherever_it_is(aws: None, definition: dict[str, Any]) -> None:
    client = boto3.client("stepfunctions", region_name=REGION)
    machine = client.create_state_machine(
        name=f"stopped-{uuid.uuid4().hex[:8]}",
        definition=json.dumps(definition),
        roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/r",
    )["stateMachineArn"]
    # When executions are stopped at once and a little later, 20 times (a Parallel stopped before its branches set
    # their next state used to wait for ever)
    for attempt in range(20):
        execution = client.start_execution(stateMachineArn=machine, input='{"items": [1, 2, 3]}')["executionArn"]
        time.sleep(0.001 * (attempt % 4))
        client.stop_execution(executionArn=execution)
        # Then each ends ABORTED, as on AWS, long before its Wait would have ended
        wait_for(lambda arn=execution: _status(client, arn) != "RUNNING", timeout=30, what="the stopped execution")
        assert client.describe_execution(executionArn=execution)["status"] == "ABORTED"
