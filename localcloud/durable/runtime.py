"""The offline Lambda runtime with durable functions: invoking a function that has a DurableConfig starts a durable
execution, whoever invokes it (the Invoke API, Step Functions, EventBridge, an SQS mapping, the HTTP API), as on
Lambda; the execution then invokes the function itself, once per replay (localcloud.durable.executor)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from moto.core.exceptions import JsonRESTError

from localcloud.clock import Clock
from localcloud.deploy import Stack
from localcloud.durable.executor import QUALIFIER, DurableExecutions, lambda_error
from localcloud.runtime.lambdas import FunctionError, LambdaRuntime
from localcloud.simulators import ServiceError


class DurableRuntime(LambdaRuntime):
    """LambdaRuntime whose durable functions (`durable_configs`, from their stacks: `configure_durable`) start an
    execution when invoked: a synchronous invoke answers when the execution ends, with its result (or its error as
    a function error), an asynchronous one at once. `serve_durable` starts the executions on the cloud's clock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.durable_configs: dict[str, dict[str, Any]] = {}  # function name -> DurableConfig (moto keeps none)
        self._executions: DurableExecutions | None = None

    def serve_durable(self, clock: Clock) -> DurableExecutions:
        self._executions = DurableExecutions(self._replay, clock, self.region, self.account.id)
        return self._executions

    @property
    def executions(self) -> DurableExecutions:
        if self._executions is None:
            raise RuntimeError("durable executions are not served: call serve_durable with the cloud's clock")
        return self._executions

    def configure_durable(self, stack: Stack) -> None:
        for resource in stack.of_type("AWS::Lambda::Function"):
            if "DurableConfig" in resource.properties:
                self.durable_configs[resource.physical_id] = resource.properties["DurableConfig"]

    def stop(self) -> None:
        if self._executions is not None:  # no replay starts once the workers are going
            self._executions.stop()
        super().stop()

    # --- the callers' invocations -----------------------------------------------------------------------------
    def moto_invoke(self) -> Callable[..., bytes]:
        """The Invoke API: a durable function's execution ARN in X-Amz-Durable-Execution-Arn, its name from
        X-Amz-Durable-Execution-Name; Lambda's error for a name that is taken or not one."""
        plain = super().moto_invoke()
        runtime = self

        def invoke(
            backend: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
        ) -> bytes:
            start = runtime._durable(function_name)
            if start is None:
                return plain(backend, function_name, qualifier, body, headers, response_headers)
            refused = _unqualified(function_name, qualifier)
            if refused is not None:
                raise _rest_error(refused)
            sent = {str(key).lower(): str(value) for key, value in dict(headers or {}).items()}
            try:
                arn = start(json.loads(body) if body else {}, sent.get(NAME_HEADER))
            except ServiceError as exc:
                raise _rest_error(exc) from exc
            response_headers["X-Amz-Durable-Execution-Arn"] = arn
            if sent.get("x-amz-invocation-type") == "Event":
                return b""
            try:
                return json.dumps(runtime.executions.outcome(arn)).encode()
            except FunctionError as exc:
                response_headers["x-amz-function-error"] = "Unhandled"
                return json.dumps(exc.payload).encode()

        return invoke

    def invoke(self, name_or_arn: str, event: Any, wait: bool = False) -> Any:
        start = self._durable(name_or_arn)
        return super().invoke(name_or_arn, event, wait) if start is None else self.executions.outcome(start(event))

    def invoke_async(self, name_or_arn: str, event: Any) -> None:
        start = self._durable(name_or_arn)
        if start is None:
            super().invoke_async(name_or_arn, event)
        else:
            start(event)

    def _durable(self, name_or_arn: str) -> Callable[..., str] | None:
        """For a durable function, what starts its execution (event, name=None -> the execution's ARN); None for any
        other function, and for a name no function has (the plain path answers that as it answers it for any)."""
        try:
            fn = self.function(name_or_arn)
        except JsonRESTError:
            return None
        config = self.durable_configs.get(fn.function_name)
        if config is None:
            return None
        executions = self.executions

        def start(event: Any, name: str | None = None) -> str:
            return executions.start(fn.function_name, fn.function_arn, event, config, name)

        return start

    def _replay(self, function_name: str, event: Any) -> Any:
        """One invocation of an execution (its first run or a replay): the function's package in a worker, waiting
        for a free one rather than throttled (the execution retries a refused invocation; here none is refused)."""
        return LambdaRuntime.invoke(self, function_name, event, wait=True)


NAME_HEADER = "x-amz-durable-execution-name"


def _unqualified(function_name: str, qualifier: str | None) -> ServiceError | None:
    """Lambda's refusal of an Invoke of a durable function that names no version (an unqualified name or ARN), or
    names one this cloud does not have (it publishes none: `$LATEST` only); None for `<function>:$LATEST`."""
    parts = function_name.split(":")
    suffix = parts[7] if parts[0] == "arn" and len(parts) == 8 else parts[1] if len(parts) == 2 else ""
    named = qualifier or suffix
    if not named:
        message = "You cannot invoke a durable function using an unqualified ARN."
        return lambda_error("InvalidParameterValueException", message)
    if named != QUALIFIER:
        return lambda_error("ResourceNotFoundException", f"Function not found: {function_name}:{named}")
    return None


def _rest_error(error: ServiceError) -> JsonRESTError:
    """A Lambda error as moto's Invoke answers one (moto serialises a JsonRESTError with its `code` as the status)."""
    refused = JsonRESTError(error.code, error.message)
    refused.code = error.status
    return refused
