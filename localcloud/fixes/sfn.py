"""Fixes for the measured gaps of moto 5.2.5's Step Functions interpreter (catalogue: docs/offline-cloud.md).

Each fix replaces the moto internal named in its docstring; localcloud/fixes/patches.py declares and installs them, and
tests/localcloud/test_sfn_fixes.py proves each one and fails if moto changes underneath (the patched attribute
disappears or the gap closes upstream).
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import re
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import botocore.session
from botocore import xform_name
from botocore.model import OperationModel
from moto.core.models import botocore_stubber
from moto.core.responses import EmptyResult
from moto.events.models import events_backends
from moto.settings import moto_server_port
from moto.stepfunctions.models import StateMachine
from moto.stepfunctions.parser.api import (
    ExecutionStatus,
    HistoryEventType,
    InvalidToken,
    TaskDoesNotExist,
    TaskFailedEventDetails,
    TaskTimedOut,
)
from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEvent,
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import StatesErrorNameType
from moto.stepfunctions.parser.asl.component.common.path.result_path import ResultPath
from moto.stepfunctions.parser.asl.component.component import Component
from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
from moto.stepfunctions.parser.asl.component.program.program import Program
from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
from moto.stepfunctions.parser.asl.component.state.exec.state_parallel import branch_worker
from moto.stepfunctions.parser.asl.component.state.exec.state_parallel.branch_worker import BranchWorker
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import ResourceCondition
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk import (
    StateTaskServiceAwsSdk,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
    StateTaskServiceCallback,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn import (
    StateTaskServiceSfn,
)
from moto.stepfunctions.parser.asl.eval.callback.callback import (
    CallbackConsumerTimeout,
    CallbackEndpoint,
    CallbackNotifyConsumerError,
    CallbackOutcome,
    CallbackOutcomeFailure,
    CallbackOutcomeSuccess,
    CallbackOutcomeTimedOut,
    CallbackPoolManager,
    HeartbeatEndpoint,
    HeartbeatTimedOut,
)
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor
from moto.stepfunctions.parser.asl.utils import boto_client
from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication, Execution
from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
from moto.stepfunctions.parser.models import StepFunctionsParserBackend
from moto.stepfunctions.responses import StepFunctionResponse

from localcloud.clock import Clock
from localcloud.fixes import atomic
from localcloud.fixes.events import as_service
from localcloud.httpapi import REQUESTS
from localcloud.moto_state import callback_endpoints, heartbeat_seconds, heartbeat_within

LOG = logging.getLogger("localcloud.fixes.sfn")


# Gap 1 (names): Step Functions runs aws-sdk integrations on the AWS SDK for Java v2 and names them after its clients:
# the resource's service is the client's package (`arn:aws:states:::aws-sdk:sfn:...`, `...:bedrockdataautomationruntime:
# ...`) and an error is `<client name>.<exception class>` (`Sfn.ExecutionDoesNotExistException`, `S3.S3Exception` for
# an error the model does not name). moto knows boto3's name for Step Functions only and the client name for DynamoDB
# and Step Functions only: every other service's errors kept its lower-case name (`translate.TooManyRequestsException`),
# so no Retry or Catch on them matched. The names are derived here for every service botocore has, from the serviceId
# of its model, which the Java SDK's code generator reads too (aws/aws-sdk-java-v2: codegen/.../naming/
# DefaultNamingStrategy.java getServiceName, getClientPackageName, getExceptionName; utils/.../internal/
# CodegenNamingUtils.java splitOnWordBoundaries, pascalCase). AWS's documented examples (Step Functions developer
# guide, supported-services-awssdk): `aws-sdk:acmpca` fails with `AcmPca.ResourceNotFoundException`, and S3's
# BucketAlreadyExists is `S3.BucketAlreadyExistsException`.
def _words(name: str) -> list[str]:
    """CodegenNamingUtils.splitOnWordBoundaries: `SageMaker A2I Runtime` -> SageMaker, A2, I, Runtime."""
    text = re.sub(r"[^A-Za-z0-9]+", " ", name)
    text = re.sub(r"([^a-z]{2,})v([0-9]+)", r"\1 v\2 ", text)  # a version: SESv2 -> SES v2
    text = re.sub(r"([^A-Z]{2,})V([0-9]+)", r"\1 V\2 ", text)
    text = re.sub(r"(?<=[a-z])(?=[A-Z][a-zA-Z0-9])", " ", text)  # camelCase
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", text)  # an acronym: ACMSuccess -> ACM Success
    text = re.sub(r"([0-9])([a-zA-Z])", r"\1 \2", text)
    return text.split()


def pascal_case(name: str) -> str:
    """CodegenNamingUtils.pascalCase: each word lower-cased, its first letter capitalised (`DynamoDB` -> DynamoDb)."""
    return "".join(word.lower().capitalize() for word in _words(name))


def sdk_client_name(service_id: str) -> str:
    """DefaultNamingStrategy.getServiceName: the Java client's name (without `Client`) for a model's serviceId
    (`SFN` -> Sfn, `CloudWatch Logs` -> CloudWatchLogs, `Database Migration Service` -> DatabaseMigration). Its
    package, lower-cased, is the service's name in an aws-sdk resource."""
    return pascal_case(service_id).removeprefix("Amazon").removeprefix("Aws").removesuffix("Service")


def sdk_exception_name(shape: str) -> str:
    """DefaultNamingStrategy.getExceptionName: the Java exception class of a modelled error shape (`NoSuchKey` ->
    NoSuchKeyException, `EC2ThrottledException` -> Ec2ThrottledException, `ResourceNotFoundFault` ->
    ResourceNotFoundException)."""
    if shape.endswith("Fault"):
        return pascal_case(shape.removesuffix("Fault")) + "Exception"
    return pascal_case(shape) + ("" if shape.endswith("Exception") else "Exception")


def _client_names(services: list[str]) -> dict[str, str]:
    """The Java client name of each boto3 service, from its model's serviceId (read by a new session's loader, which
    is freed with it: a kept loader would keep every model it read)."""
    loader = botocore.session.get_session().get_component("data_loader")
    return {
        name: sdk_client_name(loader.load_service_model(name, "service-2")["metadata"]["serviceId"])
        for name in services
    }


@atomic.built_once
def _every_client_name() -> dict[str, str]:
    """Every botocore service's Java client name (reading every model: about 2 s, done once)."""
    return _client_names(botocore.session.get_session().get_available_services())


@atomic.built_once
def sdk_service(sdk_name: str) -> tuple[str, str] | None:
    """(boto3's service name, the Java client name) of the service an aws-sdk resource names `sdk_name`; None if no
    SDK client has that name. Most services are boto3's service of that name, or of that name without its hyphens
    (`bedrock-data-automation-runtime`): those are checked first, reading one model; the others (`sfn`, boto3's
    `stepfunctions`) read every model once."""
    likely = [
        name for name in botocore.session.get_session().get_available_services() if name.replace("-", "") == sdk_name
    ]
    for names in (lambda: _client_names(likely), _every_client_name):
        found = next(((boto, client) for boto, client in names().items() if client.lower() == sdk_name), None)
        if found:
            return found
    return None


def sdk_boto_service_name(self: StateTaskServiceAwsSdk, boto_service_name: str | None = None) -> str:
    """Gap 1: boto3's name of an aws-sdk resource's service (`sfn` -> stepfunctions); a name no SDK client has stays
    as it is (boto3 refuses it, as AWS refuses the state machine)."""
    name = boto_service_name or self.resource.api_name
    found = sdk_service(name)
    return found[0] if found else name


def sdk_error_prefix(service_name: str) -> str:
    """Gap 1: the prefix of an aws-sdk resource's errors, its Java client name (`macie2` -> Macie2)."""
    found = sdk_service(service_name)
    return found[1] if found else service_name


def sdk_error_name(prefix: str, error: Exception) -> str:
    """Gap 1: a service's error as the Java SDK raises it: a modelled error as its exception class (botocore names
    the error's class after its shape), any other as the client's own (`S3.S3Exception` for S3's SlowDown)."""
    shape = type(error).__name__
    return f"{prefix}.{prefix}Exception" if shape == "ClientError" else f"{prefix}.{sdk_exception_name(shape)}"


@atomic.built_once
def _operation_model(service: str, snake_action: str) -> OperationModel:
    """botocore's model of an operation, by the snake_case action name an aws-sdk Task state's resource gives (built
    once: a burst of first tasks of an action does not load the service's model once each)."""
    model = botocore.session.get_session().get_service_model(service)
    names = {xform_name(name): name for name in model.operation_names}
    return model.operation_model(names[snake_action])


def normalise_parameters(
    self: StateTaskServiceAwsSdk | StateTaskServiceSfn,
    parameters: dict[str, Any],
    boto_service_name: str | None = None,
    service_action_name: str | None = None,
) -> None:
    """Gap 1 (request): map the ASL's PascalCase names onto the botocore input shape, as AWS does."""
    service = self._get_boto_service_name(boto_service_name)
    shape = _operation_model(service, self._get_boto_service_action(service_action_name)).input_shape
    if shape is not None:
        self._to_boto_request(parameters, shape)


def normalise_response(
    self: StateTaskServiceAwsSdk | StateTaskServiceSfn,
    response: Any,
    boto_service_name: str | None = None,
    service_action_name: str | None = None,
) -> None:
    """Gap 1 (response): give the result back in the service's PascalCase member names."""
    service = self._get_boto_service_name(boto_service_name)
    shape = _operation_model(service, self._get_boto_service_action(service_action_name)).output_shape
    if shape is not None:
        self._from_boto_response(response, shape)


def aws_timestamp(moment: datetime) -> str:
    """A time as Step Functions writes it into state data: UTC to the millisecond, with `Z` (the context object's
    documented example: 2019-03-26T20:14:13.192Z), and no fraction at all on a whole second (`...:06Z`), as Java's
    Instant prints one (AWS Support, reported in zenn.dev/hr0k/articles/a663524f5ec88e): whatever sorts or parses
    these strings meets both forms on AWS."""
    utc = moment.astimezone(UTC)
    millis = utc.microsecond // 1000
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + (f".{millis:03d}" if millis else "") + "Z"


def _timestamps_as_text(value: Any) -> Any:
    """`value` with every datetime in it (in place, at any depth) as an `aws_timestamp` string."""
    if isinstance(value, datetime):
        return aws_timestamp(value)
    if isinstance(value, dict):
        for key, member in value.items():
            value[key] = _timestamps_as_text(member)
    elif isinstance(value, list):
        value[:] = [_timestamps_as_text(member) for member in value]
    return value


def sdk_normalise_response(
    self: StateTaskServiceAwsSdk,
    response: Any,
    boto_service_name: str | None = None,
    service_action_name: str | None = None,
) -> None:
    """Gap 33: an aws-sdk result's timestamps are ISO 8601 strings on AWS (the JSON it records); moto kept boto3's
    datetime objects in the state data, so DescribeExecution of an execution whose output held one failed ("Object of
    type datetime is not JSON serializable") and the history wrote them in Python's own form (+00:00)."""
    normalise_response(self, response, boto_service_name, service_action_name)
    _timestamps_as_text(response)


_original_sfn_normalise_parameters = StateTaskServiceSfn._normalise_parameters


def sfn_normalise_parameters(
    self: StateTaskServiceSfn,
    parameters: dict[str, Any],
    boto_service_name: str | None = None,
    service_action_name: str | None = None,
) -> None:
    """Gap 1 for the optimized Step Functions integration (`states:startExecution.sync:2`): moto's own step (Input
    as a JSON string), then the AWS names onto botocore's, as for aws-sdk tasks."""
    _original_sfn_normalise_parameters(self, parameters, boto_service_name, service_action_name)
    normalise_parameters(self, parameters, boto_service_name, service_action_name)


_original_setup_heartbeat_endpoint = CallbackEndpoint.setup_heartbeat_endpoint


def setup_heartbeat_endpoint(self: CallbackEndpoint, heartbeat_seconds: int) -> HeartbeatEndpoint:
    """Gap 3: an outcome that arrived while the task's own call was still running must wake the waiter."""
    endpoint = _original_setup_heartbeat_endpoint(self, heartbeat_seconds)
    if self.get_outcome() is not None:
        endpoint.notify()
    return endpoint


_original_stop = ExecutionWorker.stop


def stop(self: ExecutionWorker, stop_date: Any, error: str | None, cause: str | None) -> None:
    """Gap 4: StopExecution must also wake tasks waiting for a callback, so the execution ends ABORTED now.

    Also: the worker thread creates `env` only once it runs; a StopExecution in the first milliseconds of an
    execution found `env` None and failed with an AttributeError (a 500). Wait for it, as AWS has no such window."""
    deadline = time.monotonic() + 5
    while self.env is None and time.monotonic() < deadline:
        time.sleep(0.005)
    _original_stop(self, stop_date, error, cause)
    for endpoint in callback_endpoints(self.env.callback_pool_manager):
        endpoint.interrupt_all()


_original_evaluate_with_timeout = ExecutionState._evaluate_with_timeout


def evaluate_with_timeout(self: ExecutionState, env: Environment) -> None:
    """Gap 4 (end state): a state cut short by StopExecution ends the execution ABORTED, as AWS does, not FAILED.

    The woken callback waiter finds no outcome and raises a timeout; moto would record it as TaskTimedOut and its
    `Environment.set_error` would overwrite the stopped program state. Once the execution is stopped, drop the
    failure: the state then returns early and the program records ExecutionAborted.

    Gap 34: a States.Runtime failure that moto raises as the execution's own (a TimeoutSecondsPath or
    HeartbeatSecondsPath that resolves to nothing) ends the execution, as on AWS, where States.Runtime is never retried
    or caught. moto handed it to the state's Retry and Catch like a task's failure, recording it as the state's event
    first: two ExecutionFailed events, or one in the middle of an execution that a Catch on States.ALL then went on
    with. It ends the program here instead, which records the one ExecutionFailed.
    """
    try:
        if _waits_for_its_token(self):
            _evaluate_on_this_thread(self, env)
        else:
            _original_evaluate_with_timeout(self, env)
    except Exception as failure:
        if isinstance(env.program_state(), ProgramStopped):
            return
        if isinstance(failure, FailureEventException) and _ends_the_execution(failure):
            env.set_error(failure.get_execution_failed_event_details())  # what the program does with it, uncaught
            return
        raise


# The clock a task's TimeoutSeconds runs on: the cloud's (step_function_timers in localcloud.fixes.patches), else
# real time.
CLOCK = Clock()


def _waits_for_its_token(state: ExecutionState) -> bool:
    return (
        isinstance(state, StateTaskServiceCallback) and state.resource.condition == ResourceCondition.WaitForTaskToken
    )


def _evaluate_on_this_thread(self: ExecutionState, env: Environment) -> None:
    """A task that waits for its token (`.waitForTaskToken`), run on its execution's thread: moto ran every task on a
    thread of its own that the execution's thread only waited on, for its TimeoutSeconds, so every waiting execution
    held two threads (10,566 threads in the cloud for 5,000 jobs waiting, make bench's P4). Here the task's own wait
    ends at the state's TimeoutSeconds (`eval_wait_for_task_token`), which the frame carries as a deadline; the rest is
    moto's `ExecutionState._evaluate_with_timeout` as it is. The task's call (the Lambda invocation) is not cut short at
    TimeoutSeconds, but its task takes no callback after it (`_close`): the state times out as soon as the call
    returns (docs/offline-cloud.md, gap 41)."""
    self.timeout.eval(env=env)
    timeout_seconds: int = env.stack.pop()
    deadline = CLOCK.now() + timedelta(seconds=timeout_seconds)
    token = env.states.context_object.context_object_data["Task"]["Token"]
    env.callback_pool_manager.get(token).localcloud_deadline = deadline  # type: ignore[union-attr]
    frame: Environment = env.open_frame()
    frame.states.reset(input_value=env.states.get_input())
    frame.stack = copy.deepcopy(env.stack)
    frame.localcloud_deadline = deadline  # type: ignore[attr-defined]
    try:
        self._eval_execution(frame)
    finally:
        frame.set_ended()
        env.close_frame(frame)
    env.stack.append(frame.stack[-1])
    if not self._is_language_query_jsonpath():
        env.states.set_result(frame.stack[-1])
    if self.assign_decl:
        self.assign_decl.eval(env=env)
    if self.result_selector:
        self.result_selector.eval(env=env)
    if self.result_path:
        self.result_path.eval(env)
    else:
        env.states.reset(input_value=env.stack.pop())


_original_eval_wait_for_task_token = StateTaskServiceCallback._eval_wait_for_task_token


def eval_wait_for_task_token(
    self: StateTaskServiceCallback,
    env: Environment,
    timeout_seconds: int,
    callback_endpoint: CallbackEndpoint,
    heartbeat_endpoint: HeartbeatEndpoint | None,
) -> CallbackOutcome:
    """The wait of a task run on its execution's thread (`_evaluate_on_this_thread`): until its outcome, a missed
    heartbeat, its TimeoutSeconds, or its execution's stop, whichever comes first (moto's wait counted TimeoutSeconds
    from the end of the task's call, and left the state's own TimeoutSeconds to the thread that waited on it). The
    wait ends closed: whether an outcome came is decided under the lock every close takes (`_close`), so a callback
    either made it or hears TaskTimedOut, never both (gap 30)."""
    deadline: datetime | None = getattr(env, "localcloud_deadline", None)
    if deadline is None:
        return _original_eval_wait_for_task_token(self, env, timeout_seconds, callback_endpoint, heartbeat_endpoint)
    missed_heartbeat = False
    while env.is_running() and callback_endpoint.get_outcome() is None and not missed_heartbeat:
        left = (deadline - CLOCK.now()).total_seconds()
        if left <= 0:
            break
        if heartbeat_endpoint is None:
            callback_endpoint.wait(timeout=left)
            break
        every = heartbeat_seconds(heartbeat_endpoint)
        missed_heartbeat = not heartbeat_within(heartbeat_endpoint, min(every, left)) and every <= left
    with _closing:
        outcome = callback_endpoint.get_outcome()
        callback_endpoint.localcloud_ended = True  # type: ignore[attr-defined]
    if outcome is not None:
        return outcome
    if missed_heartbeat:
        return HeartbeatTimedOut()
    return CallbackOutcomeTimedOut(callback_id=callback_endpoint.callback_id)


_RUNTIME_ERROR = StatesErrorName(typ=StatesErrorNameType.StatesRuntime)


def _ends_the_execution(failure: FailureEventException) -> bool:
    event = failure.failure_event
    return event.event_type == HistoryEventType.ExecutionFailed and event.error_name == _RUNTIME_ERROR


_original_result_path = ResultPath._eval_body


def result_path(self: ResultPath, env: Environment) -> None:
    """Gap 38: a ResultPath that cannot be applied to the state's input (a field under a string) fails the state with
    States.ResultPathMatchFailure, the error AWS documents for it ("failed to apply a state's ResultPath field to the
    input the state received"), which a Retry or Catch on States.ALL takes. moto let its own TypeError out, which
    became States.Runtime, which AWS never lets a Catch take (gap 37). The cause's wording is ours."""
    try:
        _original_result_path(self, env)
    except FailureEventException:
        raise
    except Exception as failure:
        name = StatesErrorName(typ=StatesErrorNameType.StatesResultPathMatchFailure)
        cause = f"Unable to apply ResultPath {self.result_path_src!r} to the state's input: {failure}"
        details = EventDetails(taskFailedEventDetails=TaskFailedEventDetails(error=name.error_name, cause=cause))
        raise FailureEventException(
            FailureEvent(env=env, error_name=name, event_type=HistoryEventType.TaskFailed, event_details=details)
        ) from failure


_original_error_equals = ErrorEqualsDecl._eval_body
# What AWS documents States.ALL cannot catch (concepts-error-handling: "can't catch the States.DataLimitExceeded
# terminal error type and runtime error types").
_TERMINAL_ERRORS = {"States.Runtime", "States.DataLimitExceeded"}
_STATES_ALL = StatesErrorName(typ=StatesErrorNameType.StatesALL)


def error_equals(self: ErrorEqualsDecl, env: Environment) -> None:
    """Gap 37: States.ALL in a Retry or Catch matches every error but the terminal ones, States.Runtime and
    States.DataLimitExceeded, as on AWS. moto's matched those too: a Task whose Parameters named a path its input
    lacks was caught by States.ALL and the execution went on, where AWS fails it with States.Runtime."""
    error = env.stack[-1]
    _original_error_equals(self, env)
    if getattr(error, "error_name", None) in _TERMINAL_ERRORS and _STATES_ALL in self.error_names:
        env.stack[-1] = False


_original_terminated = BaseExecutionWorkerCommunication.terminated
_original_execution_init = Execution.__init__
_original_execution_start = Execution.start


def status_change_event(execution: Execution, running: bool = False) -> dict[str, Any]:
    """The `Step Functions Execution Status Change` detail AWS sends (dates in epoch milliseconds)."""

    def millis(value: Any) -> int | None:
        return int(value.timestamp() * 1000) if value else None

    if running:
        return {**status_change_event(execution), "status": "RUNNING", "stopDate": None, "output": None}
    status = execution.exec_status
    return {
        "executionArn": execution.exec_arn,
        "stateMachineArn": execution.state_machine.arn,
        "name": execution.name,
        "status": status.value if hasattr(status, "value") else str(status),
        "startDate": millis(execution.start_date),
        "stopDate": millis(execution.stop_date),
        "input": json.dumps(execution.input_data) if execution.input_data is not None else None,
        "output": json.dumps(execution.output) if execution.output is not None else None,
        "inputDetails": {"included": True},
        "outputDetails": {"included": True} if execution.output is not None else None,
        "error": execution.error,
        "cause": execution.cause,
    }


def _announce(execution: Execution, running: bool = False) -> None:
    """Put the status change on the default bus, as the service (straight into moto's backend: no client to build
    on the path that starts an execution)."""
    _, _, _, region, account, *_ = execution.exec_arn.split(":")
    entry = {
        "Source": "aws.states",
        "DetailType": "Step Functions Execution Status Change",
        "Detail": json.dumps(status_change_event(execution, running)),
        "Resources": [execution.exec_arn],
    }
    with as_service():
        events_backends[account][region].put_events([entry])


def terminated(self: BaseExecutionWorkerCommunication) -> None:
    """Gap 8 (not the interpreter's but moto's EventBridge integration's): Step Functions sends a
    `Step Functions Execution Status Change` event when an execution starts and when it ends; moto sends none."""
    _original_terminated(self)
    _announce(self.execution)


def execution_init(self: Execution, *args: Any, **kwargs: Any) -> None:
    """Gap 8: RUNNING from the moment the execution exists. moto appends it to its state machine's executions before
    its start gives it a status, and a ListExecutions/DescribeExecution in that window failed with an AttributeError
    (a 500)."""
    _original_execution_init(self, *args, **kwargs)
    self.exec_status = ExecutionStatus.RUNNING


def execution_start(self: Execution) -> None:
    _announce(self, running=True)  # before the worker starts: a short execution may end at once
    _original_execution_start(self)


_original_evaluation_environment = ExecutionWorker._get_evaluation_environment


def evaluation_environment(self: ExecutionWorker) -> Environment:
    """Gap 9: the context object's `$$.Execution.StartTime` is a datetime object, which breaks any task that
    serialises it (e.g. a DynamoDB attribute value); AWS gives an ISO 8601 string such as 2026-11-21T10:00:00.123Z.

    Gap 32: `$$.Execution.RedriveCount` is missing; AWS documents it, 0 until the execution is redriven (moto has no
    RedriveExecution, so it stays 0, and RedriveTime, which AWS gives only to a redriven execution, never appears)."""
    env = _original_evaluation_environment(self)
    env.callback_pool_manager.localcloud_execution = self._execution_communication.execution  # type: ignore[attr-defined]
    execution = env.states.context_object.context_object_data["Execution"]
    start = execution.get("StartTime")
    if isinstance(start, datetime):
        execution["StartTime"] = aws_timestamp(start)
    execution["RedriveCount"] = 0  # type: ignore[typeddict-unknown-key]
    return env


def entered_state(**fields: Any) -> dict[str, Any]:
    """Gap 32: `$$.State` as AWS gives it. moto writes EnteredTime with Python's isoformat (microseconds, +00:00),
    which the workflows store beside times the application writes in AWS's form (the status log's sort key), and sets
    RetryCount, part of AWS's documented `$$.State`, only in the states that can retry (a Pass state's had none)."""
    return {"RetryCount": 0, **fields, "EnteredTime": aws_timestamp(datetime.fromisoformat(fields["EnteredTime"]))}


_original_start_execution = StepFunctionsParserBackend.start_execution


def start_execution(
    self: StepFunctionsParserBackend, state_machine_arn: str, name: str | None = None, *args: Any, **kwargs: Any
) -> Any:
    """Gap 5: an unnamed execution gets a UUID, as AWS does, instead of the name `None`.

    Gap 24: a named start is one step under the state machine's lock. moto checks the name against the executions,
    then copies the state machine, then appends the new execution: two StartExecution of one name in that window
    both started one (two executions of one ARN), where AWS starts one and answers the other with it (the same
    input, still RUNNING) or ExecutionAlreadyExists. Callers rely on it for at-least-once starts: a redelivered
    admission message, a resubmitted task."""
    if not name:
        return _original_start_execution(self, state_machine_arn, str(uuid.uuid4()), *args, **kwargs)
    with _names(self.describe_state_machine(state_machine_arn)).starting:
        return _original_start_execution(self, state_machine_arn, name, *args, **kwargs)


def send_task_failure(self: StepFunctionResponse) -> Any:
    """Gap 7: moto's SendTaskFailure handler reads `error` but drops `cause` before the interpreter sees it."""
    self.stepfunction_backend.send_task_failure(
        self._get_param("taskToken"), error=self._get_param("error"), cause=self._get_param("cause")
    )
    return EmptyResult()


# --- SendTask* by key (gap 10) ------------------------------------------------------------------------------------
_callbacks: weakref.WeakValueDictionary[str, CallbackPoolManager] = weakref.WeakValueDictionary()
_callbacks_lock = threading.Lock()
_original_pool_add = CallbackPoolManager.add
_original_send_task_success = StepFunctionsParserBackend.send_task_success  # the scan, kept for the gap's probe


def pool_add(self: CallbackPoolManager, callback_id: str) -> CallbackEndpoint:
    endpoint = _original_pool_add(self, callback_id)
    with _callbacks_lock:
        _callbacks[callback_id] = self
    return endpoint


def _waiting_pool(token: str) -> CallbackPoolManager:
    """The callback pool of the RUNNING execution that issued `token`, found by the token itself.

    moto scans every execution of every state machine for each SendTask* call and reads `exec_worker.env` of each,
    which is None while another thread is still starting that execution: the call failed with an AttributeError
    (a 500) and the resume was lost. The token is indexed when the task issues it, so the lookup is by key and
    cannot meet a half-created execution."""
    with _callbacks_lock:
        pool = _callbacks.get(token)
    execution = getattr(pool, "localcloud_execution", None)
    if pool is None or execution is None:
        raise InvalidToken()
    if execution.exec_status != ExecutionStatus.RUNNING:
        raise TaskClosed()  # gap 30: a task of an ended execution is closed, as AWS answers it
    return pool


def _send(pool: CallbackPoolManager, signal: Callable[[], bool]) -> None:
    try:
        if signal():
            return
    except CallbackNotifyConsumerError as consumer_error:
        if isinstance(consumer_error, CallbackConsumerTimeout):
            raise TaskTimedOut() from consumer_error
        raise TaskDoesNotExist() from consumer_error
    raise InvalidToken()


class TaskClosed(TaskTimedOut):
    """AWS's answer to SendTaskSuccess/SendTaskFailure for a task that already has its outcome, worded as AWS words
    it. moto's own TaskTimedOut cannot be raised as it is: it needs a message, and it carries no error code (a client
    would read an empty one)."""

    def __init__(self) -> None:
        super().__init__("Task Timed Out: 'Provided task does not exist anymore'", "TaskTimedOut")


# One lock for every close: what it guards (a look at the endpoint and setting its outcome) takes microseconds.
_closing = threading.Lock()


def _close(pool: CallbackPoolManager, token: str, outcome: CallbackOutcomeSuccess | CallbackOutcomeFailure) -> bool:
    """Gap 30: a task takes one outcome, the first. moto's notify sets the endpoint's outcome whatever it holds, so
    every SendTaskSuccess/SendTaskFailure of a task was answered success until its execution ended (8 callers at
    once: 8 successes, every time, and the task went on with whichever outcome was set last). The look and the set are
    one step here, so of callers racing on one token exactly one closes the task and the others hear TaskTimedOut,
    as on AWS."""
    with _closing:
        endpoint = pool.get(token)
        closed = endpoint is not None and endpoint.get_outcome() is not None
        if closed or getattr(endpoint, "localcloud_ended", False) or _past_deadline(endpoint):
            raise TaskClosed()
        return pool.notify(token, outcome)


def _past_deadline(endpoint: CallbackEndpoint | None) -> bool:
    """Whether a task's TimeoutSeconds has passed (a task waiting on its execution's thread: gap 41), even while its
    own call still runs: AWS has timed it out by then."""
    deadline = getattr(endpoint, "localcloud_deadline", None)
    return deadline is not None and CLOCK.now() >= deadline


_original_interrupt_all = CallbackEndpoint.interrupt_all


def interrupt_all(self: CallbackEndpoint) -> None:
    """Gap 30 (a task that ended without a callback): the task calls this as its wait ends, however it ends (its
    TimeoutSeconds or HeartbeatSeconds passed, its execution stopped). The task is closed from then on: a late
    SendTaskSuccess or SendTaskFailure hears TaskTimedOut, as on AWS. moto's endpoint took it (answered success, to an
    execution that had already gone on through its Catch)."""
    with _closing:
        self.localcloud_ended = True  # type: ignore[attr-defined]
    _original_interrupt_all(self)


def send_task_success_by_key(self: StepFunctionsParserBackend, task_token: str, outcome: str) -> None:
    pool = _waiting_pool(task_token)
    _send(pool, lambda: _close(pool, task_token, CallbackOutcomeSuccess(callback_id=task_token, output=outcome)))


def send_task_failure_by_key(
    self: StepFunctionsParserBackend, task_token: str, error: Any = None, cause: Any = None
) -> None:
    pool = _waiting_pool(task_token)
    failure = CallbackOutcomeFailure(callback_id=task_token, error=error, cause=cause)
    _send(pool, lambda: _close(pool, task_token, failure))


def send_task_heartbeat_by_key(self: StepFunctionsParserBackend, task_token: str) -> None:
    """Gap 28: a heartbeat for a task still open is accepted, as AWS accepts it, also while the task's own call still
    runs (its heartbeat endpoint not made yet: moto answered InvalidToken, and a reconciler told "closed" forgot a
    live registration); one for a task that has its outcome, or whose wait has ended, is refused, whether or not it
    has a heartbeat endpoint."""
    pool = _waiting_pool(task_token)
    endpoint = pool.get(task_token)
    open_task = (
        endpoint is not None
        and endpoint.get_outcome() is None
        and not getattr(endpoint, "localcloud_ended", False)
        and not _past_deadline(endpoint)
    )
    _send(pool, lambda: open_task and (pool.heartbeat(task_token) or True))


# --- StopExecution during a Parallel state (gap 13) -------------------------------------------------------------------
def branch_routine(self: BranchWorker) -> None:
    """A branch stopped before it set its next state raised ("Could not set NextState value when in state
    ProgramStopped") and never reported its end, so the Parallel state, and a stopped execution with it, waited
    for ever (RUNNING). Report the end whatever the branch raised, as its program is over either way; the error of
    a branch that was stopped is that stop, not a failure to report on the thread."""
    try:
        self._program.eval(self.env)
    except RuntimeError:
        if not isinstance(self.env.program_state(), ProgramStopped):
            raise
    finally:
        self._branch_worker_comm.on_terminated(env=self.env)


def branch_start(self: BranchWorker) -> None:
    """moto names each branch's thread after its program, `f"BranchWorker_${self._program}"`: the text of the
    branch's whole parsed definition, every component's `vars()` within it, rebuilt for every branch of every Parallel
    state that runs. Under 200 documents tasks over HTTP (two branches each) it was 43 % of the samples in which the
    cloud's process held the GIL (py-spy). The thread is named after the program's id; the rest is moto's."""
    if self._worker_thread is not None:
        raise RuntimeError("Attempted to rerun BranchWorker.")
    self._worker_thread = threading.Thread(
        target=self._thread_routine, name=f"BranchWorker_{id(self._program):x}", daemon=True
    )
    branch_worker.TMP_THREADS.append(self._worker_thread)
    self._worker_thread.start()


# --- a program without TimeoutSeconds on its caller's thread (scale) ---------------------------------------------
_original_program_eval = Program.eval


def program_eval(self: Program, env: Environment) -> None:
    """moto evaluates every program (an execution's, a Parallel branch's) on a thread of its own, which its caller's
    thread joins for at most the program's TimeoutSeconds. Without TimeoutSeconds the caller only waits for it, so
    such a program runs on the caller's thread: a thread less for every execution and every branch, the whole time
    it runs or waits. What would have ended the program's thread with an exception is logged, as that thread's end
    was, and the caller goes on."""
    if self.timeout_seconds is not None:
        _original_program_eval(self, env)
        return
    env.next_state_name = self.start_at.start_at_name
    try:
        EvalComponent.eval(self, env)  # what moto's thread runs
    except Exception:
        LOG.exception(
            "a program of execution %s ended with an exception",
            env.states.context_object.context_object_data["Execution"]["Id"],
        )


# --- the HTTP API's requests first (speed) -------------------------------------------------------------------------
_original_get_state = Program._get_state


def get_state_after_requests(self: Program, state_name: str) -> Any:
    """Every state an execution enters (also a Map iteration's or a Parallel branch's) starts once the HTTP API's
    requests being served are answered, or after a second (`localcloud.httpapi.REQUESTS`)."""
    REQUESTS.wait_until_answered()
    return _original_get_state(self, state_name)


# --- each parse its own query-language scopes (gap 31) ------------------------------------------------------------
def own_query_language_scopes(self: Preprocessor) -> None:
    """Gap 31: moto's ASL preprocessor keeps the QueryLanguage scopes it is inside (one per nested block) in a list on
    its class, `_query_language_per_scope`, so every parse in the process shares one. Definitions parsed at once
    (CreateStateMachine, an execution's start) read each other's scopes, and a definition refused mid-parse leaves its
    scopes behind for every later parse. Alongside a JSONata definition, or after a refused one, JSONPath definitions
    were refused ("Unsupported declaration in QueryLanguage=JSONPath block: "Parameters": ...") or their executions
    never started (RUNNING for ever), for the rest of the process. Each preprocessor, one per parse, starts with a list
    of its own."""
    self._query_language_per_scope = []


# --- one parse per definition (scale) ----------------------------------------------------------------------------
@functools.lru_cache(maxsize=128)
def _parsed(definition: str) -> EvalComponent:
    """moto parses the ASL for every execution (186 ms for documents.asl.json, ANTLR in pure Python). The parsed
    program holds configuration only (an execution's state lives in its Environment), so one parse serves every
    execution of a definition. Each component's lazily made heap key is made here, once, before the program is
    shared between threads."""
    program: EvalComponent = AmazonStateLanguageParser.parse(definition)[0]
    seen: set[int] = set()
    pending: list[Any] = [program]
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, EvalComponent):
            _ = node.heap_key
        if isinstance(node, (list, tuple, set)):
            pending.extend(node)
        elif isinstance(node, dict):
            pending.extend(node.values())
        elif isinstance(node, Component) or (hasattr(node, "__dict__") and type(node).__module__.startswith("moto.")):
            pending.extend(vars(node).values())
    return program


# A definition's first executions, started together, parse it once: the others wait for that parse. lru_cache alone
# let each of them parse it (20 documents tasks posted at once parsed documents.asl.json 20 times, 40 % of the cloud's
# process in the HTTP load's first seconds). Definitions are spread over a few locks: another definition's parse
# delays one at most by its own time.
_PARSING = [threading.Lock() for _ in range(16)]


def evaluation_entrypoint(self: ExecutionWorker) -> EvalComponent:
    definition = self._evaluation_details.state_machine_details.definition
    with _PARSING[hash(definition) % len(_PARSING)]:
        return _parsed(definition)


# --- StartExecution's name check by key (scale) ------------------------------------------------------------------
_original_name_idempotency = StateMachine._handle_name_input_idempotency


class _NamesIndex:
    """A state machine's executions by name, as far as its (append-only) list of executions has been read; and the
    lock a named start holds (gap 24)."""

    def __init__(self, executions: list[Any]) -> None:
        self.executions = executions
        self.by_name: dict[str, Any] = {}
        self.read = 0
        self.starting = threading.RLock()

    def __deepcopy__(self, memo: dict[int, Any]) -> _NamesIndex:
        return _NamesIndex([])  # moto snapshots a state machine per execution, without its executions


_names_guard = threading.Lock()


def _names(machine: StateMachine) -> _NamesIndex:
    with _names_guard:
        index = machine.__dict__.get("localcloud_names")
        if index is None or index.executions is not machine.executions:  # the first call, or a list moto replaced
            index = machine.__dict__["localcloud_names"] = _NamesIndex(machine.executions)
        return index  # type: ignore[no-any-return]


def name_idempotency(self: StateMachine, name: str, execution_input: str) -> Any:
    """moto checks a new execution's name against every execution the state machine ever had (a scan per
    StartExecution: quadratic in a long run). Executions are only ever appended, so they are indexed by name as they
    come; moto's own rule (the same input while RUNNING returns that execution, else ExecutionAlreadyExists) then
    looks at the one execution of that name, if any."""
    index = _names(self)
    end = len(index.executions)  # read to here, then say so: one appended meanwhile is read by the next call
    for execution in index.executions[index.read : end]:
        index.by_name.setdefault(execution.name, execution)
    index.read = end
    existing = index.by_name.get(name)
    if existing is None:
        return None
    return _original_name_idempotency(SimpleNamespace(executions=[existing]), name, execution_input)  # type: ignore[arg-type]


# --- one client per service (gap 11) -----------------------------------------------------------------------------
_clients: dict[tuple[str, str, str | None], Any] = {}
_clients_lock = threading.Lock()
_original_boto_client_for = boto_client.boto_client_for  # moto's own, read before anything is patched


def shared_boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
    """moto's interpreter built a new boto3 client (of boto3's default session, which is not thread-safe) for every
    Task state, loading the service's model each time. Clients are thread-safe once built: build one per service and
    endpoint, under a lock."""
    endpoint = None if botocore_stubber.enabled else f"http://localhost:{moto_server_port()}"
    key = (region, service, endpoint)
    with _clients_lock:
        if key not in _clients:
            _clients[key] = _original_boto_client_for(region, service, state_credentials)
        return _clients[key]


# --- the interpreter's modules that imported a name moto's patches replace ----------------------------------------
def thread_registry_modules() -> list[Any]:
    """The modules of moto's interpreter that imported `TMP_THREADS` (each holds its own reference)."""
    return _interpreter_modules_with("TMP_THREADS")


def interpreter_client_modules() -> list[Any]:
    """The modules of moto's interpreter that imported `boto_client_for` (each holds its own reference)."""
    return _interpreter_modules_with("boto_client_for")


def _interpreter_modules_with(name: str) -> list[Any]:
    return [
        module
        for module in list(sys.modules.values())
        if module is not None
        and module.__name__.startswith("moto.stepfunctions.parser")
        and getattr(module, name, None) is not None
    ]
