"""The Lambda Python runtime's part of a worker process: init once, then one invocation at a time.

This file runs in the worker's own interpreter (python3.13 with boto3, as Lambda's runtime) with the function's
`sam build` artifact first on sys.path (LAMBDA_TASK_ROOT, as /var/task is on AWS), then its layers' (as /opt). It
may import the standard library only: nothing of the offline cloud, moto or the developer's .venv is importable there,
so a module missing from the package and its layers fails here as it fails on AWS. The one exception is opt-in: with
LOCALCLOUD_FAULTS set, it loads lambda_faults.py beside it by path (the chaos run's faults at the wire, see that file).

Protocol with localcloud.runtime.lambdas, one JSON document per line on the two file descriptors given as arguments:
    worker -> parent  {"init": {"ms": ...}} or {"init": {"ms": ..., "error": {...}}}  (then the worker exits)
    parent -> worker  {"requestId", "event", "deadlineMs", "traceId", "functionArn"}
    worker -> parent  {"result": ...} or {"error": {"errorMessage", "errorType", "requestId", "stackTrace"}}
stdout and stderr are the function's log stream: the parent tags each line with the function and request.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import time
import traceback
from typing import Any

LAYERS_ENV = "LOCALCLOUD_LAYERS"  # the function's layers' directories, in order (on Lambda: merged into /opt)


class LambdaContext:
    """The context object of the Python runtime (awslambdaric): the same attributes and method."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.aws_request_id: str = request["requestId"]
        self.invoked_function_arn: str = request["functionArn"]
        self.function_name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
        self.function_version = os.environ["AWS_LAMBDA_FUNCTION_VERSION"]
        self.memory_limit_in_mb = os.environ["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"]
        self.log_group_name = os.environ["AWS_LAMBDA_LOG_GROUP_NAME"]
        self.log_stream_name = os.environ["AWS_LAMBDA_LOG_STREAM_NAME"]
        self.identity = None
        self.client_context = None
        self._deadline_ms: int = request["deadlineMs"]

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))


def _error(message: str, error_type: str, stack_trace: list[str] | None = None) -> dict[str, Any]:
    """A failure as the runtime reports it (awslambdaric's bootstrap.make_error); requestId is set per invocation."""
    return {"errorMessage": message, "errorType": error_type, "requestId": "", "stackTrace": stack_trace or []}


def _unhandled(exc: BaseException) -> dict[str, Any]:
    """An exception of the function's code as the runtime reports it (awslambdaric's bootstrap.build_fault_result):
    its frames from the first that is not the runtime's own, each at the path its file has on Lambda, formatted by
    traceback.format_list (no column markers: the runtime formats plain tuples)."""
    frames = traceback.extract_tb(exc.__traceback__)
    first = next((n for n, frame in enumerate(frames) if frame.filename != __file__), 0)
    listed = [
        traceback.FrameSummary(_lambda_path(frame.filename), frame.lineno, frame.name, line=frame.line)
        for frame in frames[first:]
    ]
    return _error(str(exc), type(exc).__name__, traceback.format_list(listed))


def _lambda_path(filename: str) -> str:
    """Where a file is on Lambda, which a stack trace shows: the function's package in /var/task, its layers' contents
    merged in /opt, the runtime's Python in /var/lang (here each is a directory of the host)."""
    roots = [(os.environ["LAMBDA_TASK_ROOT"], "/var/task"), *((layer, "/opt") for layer in _layers())]
    roots += [(sys.prefix, "/var/lang"), (sys.base_prefix, "/var/lang")]
    for root, on_lambda in sorted(roots, key=lambda pair: len(pair[0]), reverse=True):
        if filename.startswith(root.rstrip(os.sep) + os.sep):
            return on_lambda + filename[len(root.rstrip(os.sep)) :]
    return filename


def _load(handler_name: str) -> Any:
    """Import the handler as the runtime does, with the runtime's error types for what can go wrong."""
    module_name, _, attribute = handler_name.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        message = f"Unable to import module '{module_name}': {exc}"
        raise _InitError(_error(message, "Runtime.ImportModuleError")) from exc
    except SyntaxError as exc:
        message = f"Syntax error in module '{module_name}': {exc}"
        trace = f'  File "{_lambda_path(exc.filename or "")}" Line {exc.lineno}\n    {exc.text}'  # the runtime's form
        raise _InitError(_error(message, "Runtime.UserCodeSyntaxError", [trace])) from exc
    handler = getattr(module, attribute, None)
    if not callable(handler):
        raise _InitError(_error(f"Handler '{attribute}' missing on module '{module_name}'", "Runtime.HandlerNotFound"))
    return handler


def _faults() -> Any:
    """The chaos run's fault injector, installed under the SDK, if LOCALCLOUD_FAULTS asks for one (else None)."""
    config = os.environ.get("LOCALCLOUD_FAULTS")
    if not config:
        return None
    path = os.path.join(os.environ["LAMBDA_RUNTIME_DIR"], "lambda_faults.py")
    spec = importlib.util.spec_from_file_location("lambda_faults", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    injector = module.Injector(module.parse(config), os.environ["AWS_LAMBDA_FUNCTION_NAME"])
    injector.install()
    return injector


class _InitError(Exception):
    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__(payload["errorMessage"])
        self.payload = payload


def _layers() -> list[str]:
    """The function's layers' directories, in order."""
    return [layer for layer in os.environ.get(LAYERS_ENV, "").split(os.pathsep) if layer]


def _code_path() -> list[str]:
    """What Lambda's Python runtime puts first on sys.path: the task root (/var/task), then what the layers hold in
    /opt (python/lib/python3.13/site-packages, then python)."""
    layers = _layers()
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    opt = [f"{layer}/python/lib/{version}/site-packages" for layer in layers] + [f"{layer}/python" for layer in layers]
    return [os.environ["LAMBDA_TASK_ROOT"], *opt]


def main() -> int:
    requests = os.fdopen(int(sys.argv[1]), "r", encoding="utf-8")
    replies = os.fdopen(int(sys.argv[2]), "w", encoding="utf-8")

    def reply(message: dict[str, Any]) -> None:
        replies.write(json.dumps(message, separators=(",", ":")) + "\n")
        replies.flush()

    sys.path[0:0] = _code_path()
    started = time.monotonic()
    faults = _faults()
    try:
        handler = _load(os.environ["_HANDLER"])
    except _InitError as exc:
        reply({"init": {"ms": (time.monotonic() - started) * 1000, "error": exc.payload}})
        return 1
    except Exception as exc:  # noqa: BLE001 - an exception raised by the module's own code at import is reported
        reply({"init": {"ms": (time.monotonic() - started) * 1000, "error": _unhandled(exc)}})
        return 1
    reply({"init": {"ms": (time.monotonic() - started) * 1000}})

    for line in requests:
        request = json.loads(line)
        os.environ["_X_AMZN_TRACE_ID"] = request["traceId"]
        if faults:
            faults.crash("before")
        try:
            result = handler(request["event"], LambdaContext(request))
            if faults:
                faults.crash("after")
        except Exception as exc:  # noqa: BLE001 - the handler's exception is the invocation's result
            payload = {**_unhandled(exc), "requestId": request["requestId"]}
            print(f"[ERROR] {payload['errorType']}: {exc}", file=sys.stderr, flush=True)
            reply({"error": payload})
            continue
        except BaseException as exc:  # noqa: BLE001 - SystemExit and friends end the runtime process, as on AWS
            print(f"[ERROR] Runtime exited: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            return 1
        try:
            reply({"result": result})
        except (TypeError, ValueError) as exc:
            message = f"Unable to marshal response: {exc}"
            reply({"error": {**_error(message, "Runtime.MarshalError"), "requestId": request["requestId"]}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
