"""The durable executions of the offline cloud: AWS's testing SDK's executor, replaying each function in a worker,
its timers on the cloud's clock, answering in Lambda's terms.

The executor (`aws_durable_execution_sdk_python_testing.executor.Executor`, pinned: 1.4.0) keeps each execution's
operations, checkpoint tokens and callbacks, and invokes the function again whenever one of them closes. Four parts
of it are replaced here, each for a reason of the offline cloud's:
- the Invoker (`RuntimeInvoker`): every invocation runs the function's built package in a worker of the offline
  runtime, where the SDK's own invokers call a handler in this process or send Invoke to an endpoint;
- the scheduler's delays (`CloudScheduler`) and the executor's clock (`CloudClock`): the executor hands its timers
  (callback timeouts and heartbeat timeouts, the execution timeout, waits, the retry of a failed invocation) to its
  scheduler as seconds, which that scheduler sleeps on the wall clock; here they wait on localcloud.clock, so
  `LOCALCLOUD_SPEEDUP` and a test's ManualClock move them;
- the executor itself (`CloudExecutor`), to launch an execution with Lambda's ARN (its own are `uuid/uuid`) and to
  free the timers of the callbacks an ended execution leaves open;
- the answers (`DurableExecutions`): the executor reports every failed callback call as ResourceNotFoundException;
  here a callback call gets Lambda's error.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from datetime import datetime
from typing import Any

import botocore.session
from aws_durable_execution_sdk_python.execution import DurableExecutionInvocationInput
from aws_durable_execution_sdk_python.lambda_service import ErrorObject, OperationStatus, OperationType
from aws_durable_execution_sdk_python_testing.checkpoint.processor import CheckpointProcessor
from aws_durable_execution_sdk_python_testing.exceptions import AwsApiException, DurableFunctionsTestError
from aws_durable_execution_sdk_python_testing.execution import Execution
from aws_durable_execution_sdk_python_testing.executor import Executor
from aws_durable_execution_sdk_python_testing.invoker import InvokeResponse, LambdaInvoker
from aws_durable_execution_sdk_python_testing.model import StartDurableExecutionInput
from aws_durable_execution_sdk_python_testing.scheduler import Event, Scheduler
from aws_durable_execution_sdk_python_testing.stores.memory import InMemoryExecutionStore
from aws_durable_execution_sdk_python_testing.token import CallbackToken
from aws_durable_execution_sdk_python_testing.worker.registry import ExecutionRegistry

from localcloud.clock import Clock, Timer
from localcloud.runtime.lambdas import FunctionError
from localcloud.simulators import ServiceError

QUALIFIER = "$LATEST"  # the offline cloud versions no function (docs/offline-cloud.md, the charter)
RETENTION_DAYS = 14  # DurableConfig's RetentionPeriodInDays when the template names none (kept, not enforced)
EXECUTION_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # Invoke's DurableExecutionName, as it sits in the ARN
SYNCHRONOUS_SECONDS = 900  # Lambda's limit on a synchronous invocation of a durable function (15 minutes)


@functools.cache
def _lambda_errors() -> dict[str, int]:
    """Lambda's error names and their HTTP status, from botocore's model of the service."""
    model = botocore.session.get_session().get_service_model("lambda")
    return {shape.name: shape.metadata["error"]["httpStatusCode"] for shape in model.error_shapes}


def lambda_error(code: str, message: str) -> ServiceError:
    """Lambda's error `code` with the status its model gives it (a name it does not model is a ServiceException)."""
    status = _lambda_errors().get(code)
    return ServiceError(code, message, status) if status else ServiceError("ServiceException", message, 500)


class CloudClock:
    """The testing SDK's Clock on the cloud's clock. `arm` answers in the cloud clock's seconds, which is what
    CloudScheduler waits (the SDK's own clocks answer in real seconds for its own scheduler)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def now(self) -> datetime:
        return self.clock.now()

    def arm(self, wake: datetime) -> float:
        return max(0.0, (wake - self.clock.now()).total_seconds())


class CloudScheduler(Scheduler):
    """The testing SDK's scheduler, whose delayed calls wait on the cloud's clock and then run on its loop as any
    other. A call cancelled before it falls due never runs."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self._timers: list[Timer] = []
        self._timers_lock = threading.Lock()

    def call_later(
        self, func: Callable[[], Any], delay: float = 0, count: int | None = 1, completion_event: Event | None = None
    ) -> Future[Any]:
        if delay <= 0 or count != 1:  # at once, or a repeat (the executor schedules none): the loop's own
            return super().call_later(func, delay, count, completion_event)
        due: Future[Any] = Future()

        def fire() -> None:
            if due.set_running_or_notify_cancel():  # False: cancelled while it waited
                ran = Scheduler.call_later(self, func, 0, 1, completion_event)
                ran.add_done_callback(lambda done: _settle(done, due))

        timer = self.clock.call_later(delay, fire)
        due.add_done_callback(lambda done: timer.cancel() if done.cancelled() else None)
        with self._timers_lock:
            self._timers = [t for t in self._timers if t.is_alive()] + [timer]
        return due

    def stop(self) -> None:
        with self._timers_lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()
        super().stop()


def _settle(ran: Future[Any], due: Future[Any]) -> None:
    """Hand what the loop's call ended with to the future its caller holds."""
    if ran.cancelled():
        due.set_exception(CancelledError())
    elif (error := ran.exception()) is not None:
        due.set_exception(error)
    else:
        due.set_result(ran.result())


class CloudExecutor(Executor):
    """The SDK's executor, launching executions it did not make, and freeing an ended execution's callback timers.

    Its own start_execution names an execution `uuid/uuid`; `launch` runs one made with Lambda's ARN. And it leaves
    the timeouts of the callbacks an execution had open when it ended (stopped, timed out) to fall due, which then
    find it ended and do nothing: here each is a thread waiting on the cloud's clock until then, so they end with
    the execution."""

    def launch(self, execution: Execution) -> None:
        """What start_execution does once it has made and saved the execution: arm its timeout, invoke it."""
        self._launch_execution(execution, execution.start_input.execution_timeout_seconds)

    def _complete_events(self, execution_arn: str) -> None:
        super()._complete_events(execution_arn)
        for operation in self._store.load(execution_arn).operations:
            if operation.operation_type == OperationType.CALLBACK and operation.callback_details is not None:
                self._cleanup_callback_timeouts(operation.callback_details.callback_id)


class RuntimeInvoker(LambdaInvoker):
    """Each invocation of an execution, as Lambda makes it: the function's built package in a worker of the offline
    runtime (`run`: name, event -> the handler's response, FunctionError when the invocation failed), with the
    durable invocation input as its event. LambdaInvoker builds that input (its client is never made or used)."""

    def __init__(self, run: Callable[[str, Any], Any]) -> None:
        super().__init__(lambda_client=None)
        self._run = run

    def invoke(
        self,
        function_name: str,
        input: DurableExecutionInvocationInput,  # the Invoker protocol names it so
        endpoint_url: str | None = None,
        tenant_id: str | None = None,
        account_id: str | None = None,
        region_name: str | None = None,
    ) -> InvokeResponse:
        try:
            output = self._run(function_name, input.to_json_dict())
        except FunctionError as exc:  # the runtime's failure (a timeout, an exit): the executor retries the invocation
            raise DurableFunctionsTestError(f"Lambda invocation failed: {json.dumps(exc.payload)}") from exc
        return InvokeResponse.from_output(output, str(uuid.uuid4()))


class DurableExecutions:
    """Every durable execution of the cloud's durable functions, and Lambda's answers about them (thread-safe)."""

    def __init__(self, run: Callable[[str, Any], Any], clock: Clock, region: str, account_id: str) -> None:
        self.clock, self.region, self.account_id = clock, region, account_id
        self._scheduler = CloudScheduler(clock)
        self._store = InMemoryExecutionStore()
        registry = ExecutionRegistry(self._store, self._scheduler)
        processor = CheckpointProcessor(self._store, self._scheduler, clock=CloudClock(clock))
        self._executor = CloudExecutor(
            store=self._store,
            scheduler=self._scheduler,
            invoker=RuntimeInvoker(run),
            checkpoint_processor=processor,
            registry=registry,
            clock=CloudClock(clock),
            region=region,
        )
        processor.add_execution_observer(self._executor)
        processor.set_chained_invoke_preflight(self._executor.preflight_chained_invoke)
        self._registry = registry
        self._starting = threading.Lock()  # a name is checked and taken in one step
        self._scheduler.start()

    def stop(self) -> None:
        self._executor.shutdown()
        self._registry.shutdown()
        self._scheduler.stop()

    # --- starting and ending --------------------------------------------------------------------------------------
    def start(
        self, function_name: str, function_arn: str, payload: Any, config: dict[str, Any], name: str | None = None
    ) -> str:
        """Start an execution of the function with `payload` as its input, as an Invoke of a durable function does;
        its ARN. A name an open execution of the function holds is DurableExecutionAlreadyStartedException."""
        if name is not None and not EXECUTION_NAME.fullmatch(name):
            raise lambda_error(
                "InvalidParameterValueException",
                f"DurableExecutionName must be 1 to 64 letters, digits, hyphens or underscores: {name!r}",
            )
        name = name or str(uuid.uuid4())
        invocation_id = str(uuid.uuid4())
        start = StartDurableExecutionInput(
            account_id=self.account_id,
            function_name=function_name,
            function_qualifier=QUALIFIER,
            execution_name=name,
            execution_timeout_seconds=int(config["ExecutionTimeout"]),
            execution_retention_period_days=int(config.get("RetentionPeriodInDays", RETENTION_DAYS)),
            invocation_id=invocation_id,
            input=json.dumps(payload),
        )
        # Lambda's form (GetDurableExecution's pattern); the executor's own would be uuid/uuid
        execution = Execution(f"{function_arn}:{QUALIFIER}/durable-execution/{name}/{invocation_id}", start, [])
        execution.region = self.region
        with self._starting:
            running, _ = self._store.query(function_name=function_name, execution_name=name, status_filter="RUNNING")
            if running:
                raise lambda_error(
                    "DurableExecutionAlreadyStartedException",
                    f"An execution named {name} of {function_name} is still running.",
                )
            execution.start(now=self.clock.now())
            self._store.save(execution)
        self._executor.launch(execution)
        return execution.durable_execution_arn

    def outcome(self, execution_arn: str) -> Any:
        """Wait for the execution to end: its result, or FunctionError with its error as Lambda reports a function's
        (a synchronous Invoke's answer). Lambda waits 15 minutes at most for a synchronous invocation of a durable
        function; past that, the caller gets a function error and the execution goes on."""
        if not self._executor.wait_until_complete(execution_arn, timeout=SYNCHRONOUS_SECONDS):
            raise FunctionError(
                {
                    "errorType": "TimeoutError",
                    "errorMessage": f"The durable execution did not end within {SYNCHRONOUS_SECONDS} seconds of a "
                    "synchronous invocation; it goes on",
                    "stackTrace": [],
                }
            )
        details = self._executor.get_execution_details(execution_arn)
        if details.status == "SUCCEEDED":
            return json.loads(details.result) if details.result else None
        error = details.error or ErrorObject.from_message(f"The durable execution ended {details.status}")
        raise FunctionError(
            {
                "errorType": error.type or details.status,
                "errorMessage": error.message or "",
                "stackTrace": error.stack_trace or [],
            }
        )

    # --- Lambda's API -----------------------------------------------------------------------------------------
    def checkpoint(self, execution_arn: str, token: str, updates: Any, client_token: str | None) -> dict[str, Any]:
        return self._executor.checkpoint_execution(execution_arn, token, updates, client_token).to_dict()

    def state(self, execution_arn: str, token: str | None, marker: str | None, max_items: int | None) -> dict[str, Any]:
        return self._executor.get_execution_state(execution_arn, token, marker, max_items).to_dict()

    def describe(self, execution_arn: str) -> dict[str, Any]:
        return self._executor.get_execution_details(execution_arn).to_dict()

    def history(
        self, execution_arn: str, include_data: bool, reverse: bool, marker: str | None, max_items: int | None
    ) -> dict[str, Any]:
        return self._executor.get_execution_history(execution_arn, include_data, reverse, marker, max_items).to_dict()

    def stop_execution(self, execution_arn: str, error: ErrorObject | None) -> dict[str, Any]:
        return self._executor.stop_execution(execution_arn, error).to_dict()

    def succeed(self, callback_id: str, result: bytes) -> None:
        self._close(callback_id, lambda: self._executor.send_callback_success(callback_id, result))

    def fail(self, callback_id: str, error: ErrorObject | None) -> None:
        self._close(callback_id, lambda: self._executor.send_callback_failure(callback_id, error))

    def heartbeat(self, callback_id: str) -> None:
        self._close(callback_id, lambda: self._executor.send_callback_heartbeat(callback_id))

    def _close(self, callback_id: str, send: Callable[[], object]) -> None:
        """Send a callback call to the executor, which answers every failure ResourceNotFoundException: the callback
        is looked at first, and again after a failure (another caller closed it, or its execution ended, between)."""
        self._open_callback(callback_id)
        try:
            send()
        except AwsApiException:
            self._open_callback(callback_id)
            raise

    def _open_callback(self, callback_id: str) -> None:
        """Nothing for an open callback; else Lambda's error: InvalidParameterValueException for an id Lambda never
        issued, ResourceNotFoundException for a callback (or its execution) that does not exist, and
        CallbackTimeoutException ("expired or ... already been closed") for one that timed out or was closed."""
        try:
            token = CallbackToken.from_str(callback_id)
        except (ValueError, KeyError, TypeError) as exc:  # not base64, not JSON, not a token's fields
            raise lambda_error("InvalidParameterValueException", "The callback ID is not valid.") from exc
        try:
            execution = self._store.load(token.execution_arn)
        except KeyError as exc:
            raise lambda_error("ResourceNotFoundException", "The callback does not exist.") from exc
        callback = next(
            (
                op
                for op in execution.operations
                if op.operation_type == OperationType.CALLBACK
                and op.callback_details is not None
                and op.callback_details.callback_id == callback_id
            ),
            None,
        )
        if callback is None:
            raise lambda_error("ResourceNotFoundException", "The callback does not exist.")
        if callback.status != OperationStatus.STARTED or execution.is_complete:
            raise lambda_error(
                "CallbackTimeoutException",
                "The callback ID token has either expired or the callback associated with the token has already been "
                "closed.",
            )
