"""Run the template's real Lambda handlers in this process, behind moto's Lambda API.

moto without Docker answers every Invoke from `LambdaSimpleBackend.invoke`; that one method is the path of the
Invoke API, Step Functions' `lambda:invoke` and moto's own callers, so it is replaced by a dispatcher that imports
the function's Handler from its CodeUri, applies its Environment, passes a Lambda-like context, and reports an
exception as Lambda does (`X-Amz-Function-Error: Unhandled`, `{"errorMessage", "errorType", "stackTrace"}`), which
is what lets ASL Retry/Catch match on the exception's class name.

Each function gets its own copy of its code's modules (as each Lambda function has its own process) and sees only
its own environment variables while it runs (a context-local view of os.environ). Asynchronous invocations get
Lambda's retries and on-failure destination. Not emulated: the function timeout (a thread cannot be killed),
memory limits, concurrency limits, layers.
"""

from __future__ import annotations

import contextvars
import importlib
import json
import logging
import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from moto.awslambda.models import LambdaBackend, LambdaFunction
from moto.awslambda_simple.models import LambdaSimpleBackend, lambda_simple_backends

LOG = logging.getLogger("localcloud.lambda")

_current_environ: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("environ", default=None)


class _ScopedEnviron(MutableMapping[str, str]):
    """os.environ that shows a running function only its own variables, and the process's everywhere else."""

    def __init__(self, base: MutableMapping[str, str]) -> None:
        self.base = base

    def _active(self) -> MutableMapping[str, str]:
        scoped = _current_environ.get()
        return self.base if scoped is None else scoped

    def __getitem__(self, key: str) -> str:
        return self._active()[key]

    def __setitem__(self, key: str, value: str) -> None:
        self._active()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._active()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._active()))

    def __len__(self) -> int:
        return len(self._active())

    def copy(self) -> dict[str, str]:
        return dict(self._active())


def _install_scoped_environ() -> None:
    if not isinstance(os.environ, _ScopedEnviron):
        os.environ = _ScopedEnviron(os.environ)  # type: ignore[assignment]  # noqa: B003 - a view, not a clear


@contextmanager
def function_environment(variables: dict[str, str]) -> Iterator[None]:
    """Run the body with the process environment plus `variables`, visible to this context only."""
    _install_scoped_environ()
    base = os.environ.base if isinstance(os.environ, _ScopedEnviron) else os.environ
    token = _current_environ.set({**base, **variables})
    try:
        yield
    finally:
        _current_environ.reset(token)


@dataclass
class LambdaContext:
    """The attributes and method of the Python runtime's context object."""

    function_name: str
    invoked_function_arn: str
    memory_limit_in_mb: int
    timeout_seconds: int
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    _started: float = field(default_factory=time.monotonic)

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"{datetime.now(UTC):%Y/%m/%d}/[$LATEST]{self.aws_request_id.replace('-', '')}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.timeout_seconds - (time.monotonic() - self._started)) * 1000))


class FunctionError(Exception):
    """A handler raised; carries the payload Lambda would return."""

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__(f"{payload['errorType']}: {payload['errorMessage']}")
        self.payload = payload


@dataclass(frozen=True)
class AsyncConfig:
    maximum_retry_attempts: int = 2
    on_failure: str | None = None  # destination ARN (SQS queue)


class LambdaRuntime:
    """Dispatches invocations of the deployed functions to their real handlers."""

    def __init__(self, root: Path, region: str, retry_delay_seconds: float = 1.0) -> None:
        self.root = root
        self.region = region
        self.retry_delay_seconds = retry_delay_seconds
        self.async_configs: dict[str, AsyncConfig] = {}
        self.send_to_destination: Callable[[str, dict[str, Any]], None] = lambda arn, record: None
        self._handlers: dict[str, Callable[[Any, Any], Any]] = {}
        self._import_lock = threading.Lock()
        self._pending: set[threading.Thread] = set()

    # --- wiring into moto -------------------------------------------------------------------------------------
    def install(self) -> None:
        runtime = self

        def invoke(
            backend: LambdaSimpleBackend,
            function_name: str,
            qualifier: str | None,
            body: Any,
            headers: Any,
            response_headers: Any,
        ) -> bytes:
            payload = json.loads(body) if body else {}
            if str(_header(headers, "X-Amz-Invocation-Type")) == "Event":
                runtime.invoke_async(function_name, payload)
                return b""
            try:
                result = runtime.invoke(function_name, payload)
            except FunctionError as exc:
                response_headers["x-amz-function-error"] = "Unhandled"
                return json.dumps(exc.payload).encode()
            return json.dumps(result).encode()

        LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign,assignment]

    # --- invocation ---------------------------------------------------------------------------------------------
    def function(self, name_or_arn: str) -> LambdaFunction:
        backend: LambdaBackend = lambda_simple_backends["123456789012"][self.region]
        return backend.get_function(name_or_arn)

    def invoke(self, name_or_arn: str, event: Any) -> Any:
        """Invoke synchronously; raise FunctionError with Lambda's error payload if the handler raises."""
        fn = self.function(name_or_arn)
        handler = self._handler(fn)
        context = LambdaContext(fn.function_name, fn.function_arn, int(fn.memory_size), int(fn.timeout))
        with function_environment(self._variables(fn)):
            try:
                return handler(event, context)
            except Exception as exc:
                LOG.info("%s raised %s: %s", fn.function_name, type(exc).__name__, exc)
                raise FunctionError(
                    {
                        "errorMessage": str(exc),
                        "errorType": type(exc).__name__,
                        "stackTrace": traceback.format_tb(exc.__traceback__),
                    }
                ) from exc

    def invoke_async(self, name_or_arn: str, event: Any) -> None:
        """Queue an asynchronous invocation: Lambda's retries, then the on-failure destination."""
        thread = threading.Thread(target=self._run_async, args=(name_or_arn, event), daemon=True)
        self._pending.add(thread)
        thread.start()

    def _run_async(self, name_or_arn: str, event: Any) -> None:
        try:
            fn = self.function(name_or_arn)
            config = self.async_configs.get(fn.function_name, AsyncConfig())
            attempts = config.maximum_retry_attempts + 1
            for attempt in range(1, attempts + 1):
                try:
                    self.invoke(fn.function_arn, event)
                    return
                except FunctionError as exc:
                    error = exc.payload
                    if attempt < attempts:
                        time.sleep(self.retry_delay_seconds * attempt)
            LOG.warning("%s failed %d times; on-failure destination %s", fn.function_name, attempts, config.on_failure)
            if config.on_failure:
                self.send_to_destination(config.on_failure, _failure_record(fn, event, error, attempts))
        finally:
            self._pending.discard(threading.current_thread())

    def drain(self, timeout: float = 30.0) -> None:
        """Wait for queued asynchronous invocations to finish (tests and shutdown)."""
        deadline = time.monotonic() + timeout
        while self._pending and time.monotonic() < deadline:
            for thread in list(self._pending):
                if thread.ident is None:  # added by invoke_async an instant before its start()
                    time.sleep(0.01)
                    continue
                thread.join(timeout=max(0.0, deadline - time.monotonic()))

    # --- loading ------------------------------------------------------------------------------------------------
    def _variables(self, fn: LambdaFunction) -> dict[str, str]:
        reserved = {
            "AWS_LAMBDA_FUNCTION_NAME": fn.function_name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(fn.memory_size),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{fn.function_name}",
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{fn.run_time}",
            "LAMBDA_TASK_ROOT": str(self._code_dir(fn)),
            "_HANDLER": fn.handler or "",
            # As `sam local` does: tells Powertools there is no X-Ray daemon to send traces to.
            "AWS_SAM_LOCAL": "true",
        }
        return {**reserved, **{k: str(v) for k, v in (fn.environment_vars or {}).items()}}

    def _code_dir(self, fn: LambdaFunction) -> Path:
        return (self.root / fn.code["S3Key"]).resolve()

    def _handler(self, fn: LambdaFunction) -> Callable[[Any, Any], Any]:
        cached = self._handlers.get(fn.function_arn)
        if cached is not None:
            return cached
        with self._import_lock:
            if fn.function_arn not in self._handlers:
                self._handlers[fn.function_arn] = self._import_handler(fn)
        return self._handlers[fn.function_arn]

    def _import_handler(self, fn: LambdaFunction) -> Callable[[Any, Any], Any]:
        """Import `module.function` from the function's code with its environment set, in a fresh copy of the
        code's modules, as a cold start in its own process would."""
        code_dir = self._code_dir(fn)
        module_name, _, attribute = (fn.handler or "").rpartition(".")
        # The code's top-level packages (e.g. `handlers`) may also exist in another function's code: this code
        # directory goes first on sys.path and every module of those names is unloaded, wherever it came from.
        if str(code_dir) in sys.path:
            sys.path.remove(str(code_dir))
        sys.path.insert(0, str(code_dir))
        packages = {p.stem for p in code_dir.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
        for name in [n for n in list(sys.modules) if n.split(".")[0] in packages]:
            del sys.modules[name]
        importlib.invalidate_caches()
        with function_environment(self._variables(fn)):
            module = importlib.import_module(module_name)
        handler = getattr(module, attribute, None)
        if not callable(handler):
            raise RuntimeError(f"{fn.function_name}: Handler {fn.handler} not found in {code_dir}")
        return handler  # type: ignore[no-any-return]


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for key, value in dict(headers).items():
        if key.lower() == name.lower():
            return str(value)
    return None


def _failure_record(fn: LambdaFunction, event: Any, error: dict[str, Any], attempts: int) -> dict[str, Any]:
    """The record Lambda sends to an on-failure destination of an asynchronous invocation."""
    return {
        "version": "1.0",
        "timestamp": datetime.now(UTC).isoformat(),
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": f"{fn.function_arn}:$LATEST",
            "condition": "RetriesExhausted",
            "approximateInvokeCount": attempts,
        },
        "requestPayload": event,
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "responsePayload": error,
    }
