"""Run the template's functions as Lambda runs them: their `sam build` artifacts, in worker processes of their own.

moto without Docker answers every Invoke from `LambdaSimpleBackend.invoke`; that one method is the path of the
Invoke API, Step Functions' `lambda:invoke` and moto's own callers, so it is replaced by a dispatcher to workers
(`LambdaRuntime.moto_invoke`, installed by localcloud/fixes/patches.py).

A worker is one execution environment: a process of the Lambda runtime interpreter (python3.13 with boto3 and
nothing else, see `runtime_python`) running localcloud/runtime/lambda_bootstrap.py over the function's artifact
directory, with the function's own Environment plus Lambda's reserved variables, and AWS_ENDPOINT_URL pointing at the
offline cloud (fake credentials, no shared config files: nothing in a worker can reach AWS). As on Lambda:
- a worker serves one invocation at a time and stays warm for the next; concurrent invocations start more workers
  (cold starts: one for each invocation that finds none free, as many at once as the machine has cores, see
  FunctionPool) up to the function's ReservedConcurrentExecutions; functions without one share what the account's
  quota leaves unreserved (AccountConcurrency: 10 in a new account, for all of them together). Beyond either, a
  synchronous invoke is throttled (TooManyRequestsException, 429) and an asynchronous one waits; here a pool also
  stops growing at ENVIRONMENTS_PER_CORE per core of the machine, where further invocations wait for a worker;
- the handler is imported once per worker (init); an import error is `Runtime.ImportModuleError`;
- Timeout kills the worker (`Sandbox.Timedout`), MemorySize is a limit on the worker's resident memory
  (`Runtime.OutOfMemory`), a worker that exits mid-invocation is `Runtime.ExitError`;
- a handler's exception is reported as Lambda does (`X-Amz-Function-Error: Unhandled`, `{"errorMessage",
  "errorType", "stackTrace"}`), which is what lets ASL Retry/Catch match on the exception's class name;
- asynchronous invocations get Lambda's retries and on-failure destination;
- stdout/stderr are the function's log stream: every line goes to `log(function_name, line)`, with START, END and
  REPORT lines (duration, init duration, max memory used) per invocation.
Opt-in, for the chaos run: `LambdaRuntime.faults` (a localcloud.runtime.lambda_faults configuration) makes every worker
inject faults at the wire under its SDK and crash now and then.
Not emulated: versions and aliases, provisioned concurrency, the 6 MB payload limit.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import select
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from moto.awslambda.models import LambdaBackend, LambdaFunction
from moto.awslambda.utils import get_backend
from moto.awslambda_simple.models import LambdaSimpleBackend, lambda_simple_backends
from moto.core.exceptions import JsonRESTError

from localcloud.account import ACCOUNT_ID, EXECUTION_ROLE, Account
from localcloud.runtime import lambda_faults
from localcloud.runtime.build import PROJECT_ROOT
from localcloud.runtime.lambda_bootstrap import LAYERS_ENV

LOG = logging.getLogger("localcloud.lambda")
BOOTSTRAP = Path(__file__).with_name("lambda_bootstrap.py")
INIT_LIMIT_SECONDS = 10.0  # Lambda's limit on a function's init phase
# How many environments a function's pool grows to per core of the machine (Lambda: one per concurrent invocation, up
# to the function's limit). An environment takes ~60 MB, and beyond a few per core more of them only share the cores,
# and their inits take CPU the cloud's own process needs.
ENVIRONMENTS_PER_CORE = 4
_PAGE = os.sysconf("SC_PAGE_SIZE")

LogSink = Callable[[str, str], None]  # (function name, log line)


def runtime_python() -> Path:
    """The interpreter workers run on: Lambda's python3.13 runtime, i.e. CPython 3.13 with boto3 and the durable
    execution SDK, as Lambda's carries them, and nothing else (`make install` creates .venv-lambda;
    LOCALCLOUD_LAMBDA_PYTHON points elsewhere)."""
    configured = os.environ.get("LOCALCLOUD_LAMBDA_PYTHON")
    python = Path(configured) if configured else PROJECT_ROOT / ".venv-lambda" / "bin" / "python"
    if not python.exists():
        raise FileNotFoundError(f"Lambda runtime interpreter {python} is missing: run `make install`")
    return python


class FunctionError(Exception):
    """An invocation failed; carries the payload Lambda would return."""

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__(f"{payload['errorType']}: {payload['errorMessage']}")
        self.payload = payload


class Throttled(Exception):
    """No execution environment is free and the function is at its concurrency limit."""


class TooManyRequestsException(JsonRESTError):
    """Lambda's answer to a throttled synchronous invoke (Step Functions reports `Lambda.TooManyRequestsException`)."""

    code = 429

    def __init__(self, message: str) -> None:
        super().__init__("TooManyRequestsException", message)


@dataclass(frozen=True)
class AsyncConfig:
    maximum_retry_attempts: int = 2
    on_failure: str | None = None  # destination ARN (SQS queue)


@dataclass(frozen=True)
class FunctionSpec:
    """What a worker of one function needs, read once from the deployed function."""

    name: str
    arn: str
    handler: str
    code_dir: Path
    layer_dirs: tuple[Path, ...]  # the function's layers, in order: each one's content as /opt holds it on Lambda
    memory_mb: int
    timeout_seconds: float
    runtime: str
    environment: dict[str, str]
    log_format: str
    log_group: str
    log_level: str | None  # ApplicationLogLevel (JSON log format only), which Powertools follows

    @classmethod
    def of(
        cls, fn: LambdaFunction, code_dir: Path, logging_config: dict[str, str], layer_dirs: tuple[Path, ...] = ()
    ) -> FunctionSpec:
        log_format = logging_config.get("LogFormat", "Text")
        return cls(
            name=fn.function_name,
            arn=fn.function_arn,
            handler=fn.handler or "",
            code_dir=code_dir,
            layer_dirs=layer_dirs,
            memory_mb=int(fn.memory_size),
            timeout_seconds=float(fn.timeout),
            runtime=fn.run_time,
            environment={k: str(v) for k, v in (fn.environment_vars or {}).items()},
            log_format=log_format,
            log_group=logging_config.get("LogGroup") or f"/aws/lambda/{fn.function_name}",
            log_level=logging_config.get("ApplicationLogLevel") if log_format == "JSON" else None,
        )

    def lambda_environment(self, endpoint: str, region: str, faults: str = "") -> dict[str, str]:
        """The process environment of an execution environment: the function's Environment and Lambda's reserved
        variables, with every AWS call sent to `endpoint` (and the chaos run's `faults`, if any)."""
        stream = f"{datetime.now(UTC):%Y/%m/%d}/[$LATEST]{uuid.uuid4().hex}"
        reserved = {
            "AWS_LAMBDA_FUNCTION_NAME": self.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.memory_mb),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": self.log_group,
            "AWS_LAMBDA_LOG_STREAM_NAME": stream,
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_LAMBDA_LOG_FORMAT": self.log_format,
            "AWS_REGION": region,
            "AWS_DEFAULT_REGION": region,
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{self.runtime}",
            "LAMBDA_TASK_ROOT": str(self.code_dir),
            LAYERS_ENV: os.pathsep.join(str(layer) for layer in self.layer_dirs),
            "LAMBDA_RUNTIME_DIR": str(BOOTSTRAP.parent),
            "_HANDLER": self.handler,
            "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
            "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:2000",
            "_AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1",
            "_AWS_XRAY_DAEMON_PORT": "2000",
            "TZ": ":UTC",
            "LANG": "en_US.UTF-8",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            # The execution role's credentials on AWS; here a fake identity, every call sent to the offline cloud and
            # no shared config or credentials file read: a worker has no way to reach AWS.
            "AWS_ACCESS_KEY_ID": EXECUTION_ROLE.access_key_id,
            "AWS_SECRET_ACCESS_KEY": EXECUTION_ROLE.secret_access_key,
            "AWS_SESSION_TOKEN": "localcloud-worker-session",
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        if self.log_level:
            reserved["AWS_LAMBDA_LOG_LEVEL"] = self.log_level
        if faults:
            reserved[lambda_faults.ENV] = faults
        return {**self.environment, **reserved}  # reserved variables cannot be overridden on Lambda either


class Worker:
    """One execution environment: a runtime process with the function's code, serving one invocation at a time."""

    def __init__(
        self, spec: FunctionSpec, python: Path, endpoint: str, region: str, log: LogSink, faults: str = ""
    ) -> None:
        self.spec = spec
        self.log = log
        self.init_ms: float | None = None  # reported once, on the REPORT line of the cold start
        self._buffer = b""
        self._closing = threading.Lock()
        to_worker_r, self._to_worker = os.pipe()
        self._from_worker, from_worker_w = os.pipe()
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and bootstrap
            # -B: the packages are read-only, as /var/task and /opt are on Lambda: a cold start loads the bytecode
            # the build shipped, or compiles in memory every time, and never leaves a .pyc for the next one.
            [str(python), "-I", "-B", "-u", str(BOOTSTRAP), str(to_worker_r), str(from_worker_w)],
            pass_fds=(to_worker_r, from_worker_w),
            env=spec.lambda_environment(endpoint, region, faults),
            cwd=spec.code_dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        os.close(to_worker_r)
        os.close(from_worker_w)
        self._poller = select.poll()
        self._poller.register(self._from_worker, select.POLLIN)
        threading.Thread(target=self._pump_logs, name=f"logs-{spec.name}", daemon=True).start()

    def _pump_logs(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.log(self.spec.name, raw.decode(errors="replace").rstrip("\n"))

    # --- the control channel ----------------------------------------------------------------------------------
    def _send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        while data:
            data = data[os.write(self._to_worker, data) :]

    def _receive(self, deadline: float, on_timeout: str, request_id: str) -> dict[str, Any]:
        """The worker's next message; kill it and raise FunctionError on timeout, memory limit or exit."""
        while b"\n" not in self._buffer:
            if self._poller.poll(50):  # poll, not select: a busy cloud has descriptors past select's 1024
                chunk = os.read(self._from_worker, 1 << 20)
                if not chunk:
                    code = self.process.wait()
                    self.close()
                    detail = f"signal: {-code}" if code < 0 else f"exit status {code}"
                    raise FunctionError(_runtime_error(request_id, "Runtime.ExitError", detail))
                self._buffer += chunk
                continue
            # 50 ms without an answer: the limits are checked while the worker runs, not before each read
            if time.monotonic() > deadline:
                self.kill()
                raise FunctionError(_runtime_error(request_id, "Sandbox.Timedout", on_timeout))
            if self.rss_mb() > self.spec.memory_mb:
                self.kill()
                raise FunctionError(_runtime_error(request_id, "Runtime.OutOfMemory", "signal: killed"))
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)  # type: ignore[no-any-return]

    # --- lifecycle ----------------------------------------------------------------------------------------------
    def initialize(self) -> None:
        """Wait for the handler's import (the init phase); raise FunctionError if it failed."""
        limit = max(INIT_LIMIT_SECONDS, self.spec.timeout_seconds)
        message = self._receive(time.monotonic() + limit, f"Init timed out after {limit:.2f} seconds", "")["init"]
        self.init_ms = message["ms"]
        if "error" in message:
            self.kill()
            raise FunctionError(message["error"])

    def invoke(self, event: Any, request_id: str, function_arn: str) -> Any:
        spec = self.spec
        started = time.monotonic()
        self.log(spec.name, f"START RequestId: {request_id} Version: $LATEST")
        self._send(
            {
                "requestId": request_id,
                "event": event,
                "functionArn": function_arn,
                "deadlineMs": int(time.time() * 1000 + spec.timeout_seconds * 1000),
                "traceId": _trace_header(),
            }
        )
        try:
            reply = self._receive(
                started + spec.timeout_seconds,
                f"Task timed out after {spec.timeout_seconds:.2f} seconds",
                request_id,
            )
        finally:
            duration = (time.monotonic() - started) * 1000
            peak_mb = self.max_rss_mb()
            init = f"\tInit Duration: {self.init_ms:.2f} ms" if self.init_ms is not None else ""
            self.init_ms = None
            self.log(spec.name, f"END RequestId: {request_id}")
            self.log(
                spec.name,
                f"REPORT RequestId: {request_id}\tDuration: {duration:.2f} ms\tMemory Size: {spec.memory_mb} MB"
                f"\tMax Memory Used: {peak_mb} MB{init}",
            )
        if peak_mb > spec.memory_mb:  # the peak passed the limit between two samples: Lambda kills there
            self.kill()
            raise FunctionError(_runtime_error(request_id, "Runtime.OutOfMemory", "signal: killed"))
        if "error" in reply:
            raise FunctionError(reply["error"])
        return reply["result"]

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def rss_mb(self) -> float:
        try:
            with open(f"/proc/{self.process.pid}/statm") as statm:
                return int(statm.read().split()[1]) * _PAGE / 2**20
        except (OSError, IndexError, ValueError):
            return 0.0

    def max_rss_mb(self) -> int:
        with contextlib.suppress(OSError, ValueError, StopIteration), open(f"/proc/{self.process.pid}/status") as st:
            line = next(s for s in st if s.startswith("VmHWM:"))
            return int(line.split()[1]) // 1024
        return 0

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        self.close()

    def close(self) -> None:
        """Close the control pipes, once: a descriptor number closed twice may already be another socket's."""
        with self._closing:
            fds, self._to_worker, self._from_worker = (self._to_worker, self._from_worker), -1, -1
        for fd in fds:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)


class AccountConcurrency:
    """The account's unreserved concurrency: every function without a reservation draws on it, together. Lambda runs
    at most the Region's quota less what functions reserve at once across them all (a new account's quota is 10); an
    invocation beyond it is throttled, or waits when `wait` (an asynchronous one, in Lambda's queue)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._in_use = 0
        self._waiting = 0
        self._freed = threading.Condition()

    @property
    def limit(self) -> int:
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        with self._freed:
            self._limit = value
            self._freed.notify_all()  # a raised limit lets waiting invocations run

    @property
    def waiting(self) -> int:
        """Invocations waiting for a free execution now."""
        with self._freed:
            return self._waiting

    def acquire(self, function_name: str, wait: bool) -> None:
        with self._freed:
            while self._in_use >= self._limit:
                if not wait:
                    raise Throttled(
                        f"Rate Exceeded. {function_name}: the account's {self._limit} unreserved concurrent executions "
                        "are in use"
                    )
                self._waiting += 1
                try:
                    self._freed.wait()
                finally:
                    self._waiting -= 1
            self._in_use += 1

    def release(self) -> None:
        with self._freed:
            self._in_use -= 1
            self._freed.notify()


class FunctionPool:
    """The execution environments of one function: warm workers are reused, more start up to `limit`.

    As on Lambda, an invocation that finds no free environment has one started for it, so a pool grows to the largest
    burst it met; the invocation takes whichever worker is free first, the one started for it or one a finished
    invocation gives back, and the other stays warm for the next burst. Here the pool stops growing at `most`
    environments, and starts them `starts_at_once` at a time (Lambda gives each environment a CPU of its own; here
    they share the machine's few cores, where more would only take memory and more inits at once would only share
    the cores). A failed init is reported to one waiting invocation, as Lambda reports it to the invocation that
    started the environment."""

    def __init__(
        self,
        spec: FunctionSpec,
        limit: int,
        start_worker: Callable[[FunctionSpec], Worker],
        starts_at_once: int = 1,
        most: int | None = None,
        account: AccountConcurrency | None = None,
    ) -> None:
        self.spec = spec
        self.limit = limit
        self.account = account  # the shared unreserved concurrency, for a function without a reservation
        self.most = min(limit, most or limit)
        self.starts_at_once = starts_at_once
        self._start_worker = start_worker
        self._idle: list[Worker] = []
        self._count = 0  # idle + busy + starting
        self._starting = 0
        self._owed = 0  # environments due to invocations that found none free, not started yet
        self._waiting = 0
        self._failed_inits: deque[Exception] = deque()
        self._freed = threading.Condition()
        self._stopped = False
        self.cold_starts = 0

    def invoke(self, event: Any, wait: bool) -> Any:
        request_id = str(uuid.uuid4())
        # The account's execution is taken first: a throttled invocation starts no environment, as on Lambda; one
        # queued past this pool's ENVIRONMENTS_PER_CORE holds the execution it would be running on Lambda.
        if self.account:
            self.account.acquire(self.spec.name, wait)
        try:
            try:
                worker = self._acquire(wait)
            except FunctionError as exc:
                exc.payload["requestId"] = exc.payload.get("requestId") or request_id
                raise
            try:
                return worker.invoke(event, request_id, self.spec.arn)
            finally:
                self._release(worker)
        finally:
            if self.account:
                self.account.release()

    @property
    def in_flight(self) -> int:
        with self._freed:
            return self._count - len(self._idle)

    @property
    def starting(self) -> int:
        """Environments starting, or due to start, now."""
        with self._freed:
            return self._starting + self._owed

    @property
    def waiting(self) -> int:
        """Invocations waiting for a worker now."""
        with self._freed:
            return self._waiting

    def _acquire(self, wait: bool) -> Worker:
        # A new invocation takes an idle worker only if one is left over for those already waiting: a worker freed or
        # started while they wait is theirs (a later invocation of a function at its limit is throttled instead).
        arriving = True
        with self._freed:
            while True:
                if self._stopped:
                    raise RuntimeError(f"{self.spec.name}: the offline cloud has stopped")
                if len(self._idle) > (self._waiting if arriving else 0):
                    return self._idle.pop()
                if self._failed_inits:
                    raise self._failed_inits.popleft()
                # As on Lambda, an invocation that finds no free environment is due one; so is one waiting for which
                # none is coming (the worker it waited for ended)
                coming = len(self._idle) + self._starting + self._owed
                if (arriving or self._waiting + 1 > coming) and self._count + self._owed < self.most:
                    self._owed += 1
                    self._start_owed()
                if self._count >= self.limit and not wait and self._starting <= self._waiting:
                    # every worker is busy or starting for an invocation already waiting for it
                    raise Throttled(f"Rate Exceeded. {self.spec.name} is at its concurrency limit of {self.limit}")
                self._waiting += 1
                arriving = False
                try:
                    self._freed.wait()
                finally:
                    self._waiting -= 1

    def _start_owed(self) -> None:
        """Start the environments due, `starts_at_once` at a time (called holding the pool's lock)."""
        while self._owed and self._starting < self.starts_at_once and not self._stopped:
            self._owed -= 1
            self._count += 1
            self._starting += 1
            self.cold_starts += 1
            threading.Thread(target=self._start, name=f"init-{self.spec.name}", daemon=True).start()

    def _start(self) -> None:
        try:
            worker = self._start_worker(self.spec)  # the init runs here, and may fail
        except Exception as exc:  # noqa: BLE001 - handed to a waiting invocation, which raises it
            with self._freed:
                self._count -= 1
                self._starting -= 1
                self._failed_inits.append(exc)
                self._start_owed()
                self._freed.notify()
            return
        self._release(worker, started=True)

    def _release(self, worker: Worker, started: bool = False) -> None:
        with self._freed:
            keep = worker.alive and not self._stopped
            if keep:
                self._idle.append(worker)
            else:
                self._count -= 1
            if started:
                self._starting -= 1
                self._start_owed()
            self._freed.notify()
        if not keep:
            worker.kill()

    def stop(self) -> None:
        """End the idle workers now and each busy or starting one when its invocation or init returns; invocations
        still waiting for a worker fail."""
        with self._freed:
            self._stopped = True
            idle, self._idle = self._idle, []
            self._freed.notify_all()
        for worker in idle:
            worker.kill()


class LambdaRuntime:
    """Dispatches invocations of the deployed functions to worker processes running their built artifacts."""

    def __init__(
        self,
        root: Path,
        region: str,
        account: Account,
        retry_delay_seconds: float = 1.0,
        log: LogSink | None = None,
    ) -> None:
        self.root = root
        self.region = region
        self.account = account
        self.retry_delay_seconds = retry_delay_seconds
        self.log: LogSink = log or (lambda name, line: LOG.info("[%s] %s", name, line))
        self.endpoint = ""  # the offline cloud's AWS endpoint, set before the first invoke
        self.faults = ""  # a localcloud.runtime.lambda_faults configuration (JSON) every worker injects; "" for none
        self.python = runtime_python()
        self.unreserved = AccountConcurrency(account.profile.lambda_concurrency)
        # function name -> LoggingConfig (format, levels, group), which moto's Lambda does not keep (it keeps the rest)
        self.logging_configs: dict[str, dict[str, str]] = {}
        self.async_configs: dict[str, AsyncConfig] = {}
        self.send_to_destination: Callable[[str, dict[str, Any]], None] = lambda arn, record: None
        self._pools: dict[str, FunctionPool] = {}
        self._pools_lock = threading.Lock()
        self._pending: set[threading.Thread] = set()
        self.cores = os.cpu_count() or 2
        self._init_slots = threading.BoundedSemaphore(self.cores)

    # --- wiring into moto -------------------------------------------------------------------------------------
    def moto_invoke(self) -> Callable[..., bytes]:
        """The replacement of `LambdaSimpleBackend.invoke` (installed by localcloud/fixes/patches.py): every Invoke,
        from the API, Step Functions or moto itself, dispatched to this runtime."""
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
            except Throttled as exc:
                raise TooManyRequestsException(str(exc)) from exc
            return json.dumps(result).encode()

        return invoke

    # --- invocation ---------------------------------------------------------------------------------------------
    def function(self, name_or_arn: str) -> LambdaFunction:
        backend: LambdaBackend = lambda_simple_backends[ACCOUNT_ID][self.region]
        return backend.get_function(name_or_arn)

    def invoke(self, name_or_arn: str, event: Any, wait: bool = False) -> Any:
        """Invoke synchronously; raise FunctionError with Lambda's error payload if the invocation failed, Throttled
        if the function is at its concurrency limit (unless `wait`, which waits for a free worker instead)."""
        pool = self._pool(self.function(name_or_arn))
        try:
            return pool.invoke(json.loads(json.dumps(event)), wait)
        except FunctionError as exc:
            LOG.info("%s failed: %s", pool.spec.name, exc)
            raise

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
                    self.invoke(fn.function_arn, event, wait=True)  # throttled events wait in Lambda's queue
                    return
                except FunctionError as exc:
                    error = exc.payload
                except Exception as exc:  # the offline runtime's own failure: an attempt lost, never the event
                    LOG.exception("asynchronous invocation of %s failed to run", fn.function_name)
                    error = {"errorMessage": str(exc), "errorType": type(exc).__name__, "stackTrace": []}
                if attempt < attempts:
                    time.sleep(self.retry_delay_seconds * attempt)
            LOG.warning("%s failed %d times; on-failure destination %s", fn.function_name, attempts, config.on_failure)
            if config.on_failure:
                self.send_to_destination(config.on_failure, _failure_record(fn, event, error, attempts))
        except Exception:
            LOG.exception("asynchronous invocation of %s could not run", name_or_arn)
        finally:
            self._pending.discard(threading.current_thread())

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait for queued asynchronous invocations to finish (tests and shutdown); True once none is left, False if
        some still ran after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while self._pending and time.monotonic() < deadline:
            for thread in list(self._pending):
                if thread.ident is None:  # added by invoke_async an instant before its start()
                    time.sleep(0.01)
                    continue
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
        return not self._pending

    def stop(self) -> None:
        """End every worker (idle ones now; busy ones as their invocation returns)."""
        with self._pools_lock:
            pools = list(self._pools.values())
        for pool in pools:
            pool.stop()

    def cold_starts(self, function_name: str) -> int:
        """How many execution environments of the function were started."""
        pool = self._pools.get(function_name)
        return pool.cold_starts if pool else 0

    def in_flight(self, function_name: str) -> int:
        """How many invocations of the function are running (or starting) now."""
        pool = self._pools.get(function_name)
        return pool.in_flight if pool else 0

    def starting(self) -> int:
        """How many environments, of every function, are starting or due to start now."""
        with self._pools_lock:
            pools = list(self._pools.values())
        return sum(pool.starting for pool in pools)

    # --- workers ------------------------------------------------------------------------------------------------
    def _pool(self, fn: LambdaFunction) -> FunctionPool:
        with self._pools_lock:
            pool = self._pools.get(fn.function_name)
            if pool is None:
                code_dir = (self.root / fn.code["S3Key"]).resolve()
                spec = FunctionSpec.of(fn, code_dir, self.logging_configs.get(fn.function_name, {}), self.layers(fn))
                reserved = fn.reserved_concurrency  # ReservedConcurrentExecutions, as CloudFormation or the API set it
                # what the Region's functions reserve now (a later stack's may reserve more) is not the others'
                unreserved = self.account.profile.lambda_concurrency - sum(self.account.reserved(self.region).values())
                self.unreserved.limit = unreserved
                limit = unreserved if reserved is None else int(reserved)
                pool = self._pools[fn.function_name] = FunctionPool(
                    spec,
                    limit,
                    self._start_worker,
                    self.cores,
                    ENVIRONMENTS_PER_CORE * self.cores,
                    self.unreserved if reserved is None else None,
                )
            return pool

    def layers(self, fn: LambdaFunction) -> tuple[Path, ...]:
        """The built directories of the function's layers (`sam build` puts each one's content beside the packages)."""
        backend = get_backend(fn.account_id, fn.region)
        return tuple(
            (self.root / backend.layers_versions_by_arn(layer["Arn"]).content["S3Key"]).resolve() for layer in fn.layers
        )

    def _start_worker(self, spec: FunctionSpec) -> Worker:
        """A new execution environment, initialized. At most one init per core runs at a time: a burst of 100 cold
        starts would otherwise share two cores and starve the invocations (and their Timeout) for many seconds,
        where on Lambda each environment has a CPU of its own."""
        if not self.endpoint:
            raise RuntimeError("the offline cloud's endpoint is not set")
        with self._init_slots:
            worker = Worker(spec, self.python, self.endpoint, self.region, self.log, self.faults)
            worker.initialize()
            return worker


def _runtime_error(request_id: str, error_type: str, detail: str) -> dict[str, Any]:
    """An error the runtime (not the handler) reports, in Lambda's words."""
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if error_type == "Sandbox.Timedout":
        message = f"{when} {request_id} {detail}"
    else:
        message = f"RequestId: {request_id} Error: Runtime exited with error: {detail}"
    return {"errorMessage": message, "errorType": error_type, "requestId": request_id, "stackTrace": []}


def _trace_header() -> str:
    """A new X-Ray trace header, not sampled (nothing is sent to a daemon offline)."""
    return f"Root=1-{int(time.time()):08x}-{secrets.token_hex(12)};Parent={secrets.token_hex(8)};Sampled=0"


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
