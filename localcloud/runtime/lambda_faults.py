"""Opt-in faults at the wire under the SDK, inside a Lambda worker: the chaos run's view of an unreliable AWS.

When the offline cloud is given a fault configuration (CloudConfig.faults, or LOCALCLOUD_FAULTS), every worker gets
it as LOCALCLOUD_FAULTS and lambda_bootstrap.py loads this file (by path: it runs on the Lambda runtime interpreter,
where only the standard library and boto3 are importable) and installs it before the handler's init:

    {"seed": 7, "throttle": 0.05, "server_error": 0.02, "reset": 0.02, "lost_answer": 0.02, "crash": 0.02}

Each AWS call the function's SDK sends (botocore.endpoint.Endpoint._send, below the SDK's retries) may, before it is
sent, get a throttling answer (HTTP 400 ThrottlingException, ProvisionedThroughputExceededException for DynamoDB;
HTTP 503 for a service whose protocol is not JSON) with probability `throttle`, an HTTP 500 InternalServerError with
`server_error`, or a connection reset (ConnectionClosedError) with `reset`; after it was sent and answered, the answer
may be lost (ReadTimeoutError: the write happened, the caller does not know) with `lost_answer`. The SDK retries
these as real faults. With probability `crash` an invocation's runtime process dies, before the handler runs or after
it ran (its effects done, its answer never given): the offline cloud reports Runtime.ExitError, as Lambda does.

Every fault is written to the function's log stream as one line, `[FAULT] <kind> <service>.<operation>`, which the
offline cloud counts (LocalCloud.faults). Randomness is seeded per worker (seed, function name, process id), so a
run is reproducible in distribution, not call by call (workers interleave as the machine schedules them).
Without a configuration nothing here is imported or installed: the normal path is unchanged.
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Callable
from typing import Any

ENV = "LOCALCLOUD_FAULTS"
LOG_PREFIX = "[FAULT] "
PROBABILITIES = ("throttle", "server_error", "reset", "lost_answer", "crash")
KINDS = (*PROBABILITIES[:-1], "crash_before", "crash_after")


def parse(text: str) -> dict[str, float]:
    """The configuration from its JSON text; ValueError naming what is wrong (an unknown key, a probability outside
    0..1, a seed that is not an integer)."""
    config = json.loads(text)
    if not isinstance(config, dict):
        raise ValueError(f"{ENV} must be a JSON object, not {text!r}")
    unknown = set(config) - {"seed", *PROBABILITIES}
    if unknown:
        raise ValueError(f"{ENV}: unknown keys {sorted(unknown)}; known: seed, {', '.join(PROBABILITIES)}")
    if not isinstance(config.get("seed", 0), int):
        raise ValueError(f"{ENV}: seed must be an integer, not {config['seed']!r}")
    for name in PROBABILITIES:
        value = config.get(name, 0)
        if not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ValueError(f"{ENV}: {name} must be a probability between 0 and 1, not {value!r}")
    return {"seed": int(config.get("seed", 0)), **{name: float(config.get(name, 0)) for name in PROBABILITIES}}


class Injector:
    """The faults of one worker process."""

    def __init__(self, config: dict[str, float], function_name: str) -> None:
        self.config = config
        self.random = random.Random(f"{config['seed']}:{function_name}:{os.getpid()}")

    def draw(self, kind: str) -> bool:
        return self.config[kind] > 0 and self.random.random() < self.config[kind]

    @staticmethod
    def record(kind: str, what: str) -> None:
        print(f"{LOG_PREFIX}{kind} {what}", file=sys.stderr, flush=True)

    def crash(self, when: str) -> None:
        """End the process now, with probability `crash` (the parent sees the runtime exit mid-invocation)."""
        if self.draw("crash"):
            self.record(f"crash_{when}", "handler")
            os._exit(1)

    def install(self) -> None:
        """Wrap botocore's Endpoint._send: every HTTP request of every client of this process passes there."""
        from botocore.endpoint import Endpoint  # the runtime's boto3, imported only when faults are asked for

        send: Callable[[Any, Any], Any] = Endpoint._send  # type: ignore[attr-defined]
        injector = self

        def faulty_send(endpoint: Any, request: Any) -> Any:
            return injector.send(send, endpoint, request)

        Endpoint._send = faulty_send  # type: ignore[attr-defined]

    def send(self, send: Callable[[Any, Any], Any], endpoint: Any, request: Any) -> Any:
        from botocore.exceptions import ConnectionClosedError, ReadTimeoutError

        service = str(endpoint._endpoint_prefix)
        target = _header(request, "X-Amz-Target")
        what = f"{service}.{target.rpartition('.')[2] if target else request.method}"
        if self.draw("throttle"):
            self.record("throttle", what)
            return _throttled(request, service, target)
        if self.draw("server_error"):
            self.record("server_error", what)
            return _answer(request, 500, "InternalServerError", "Internal server error (injected)", target)
        if self.draw("reset"):
            self.record("reset", what)
            raise ConnectionClosedError(endpoint_url=request.url)
        response = send(endpoint, request)
        if self.draw("lost_answer"):
            self.record("lost_answer", what)
            raise ReadTimeoutError(endpoint_url=request.url)
        return response


def _header(request: Any, name: str) -> str:
    value = request.headers.get(name)
    return value.decode() if isinstance(value, bytes) else str(value or "")


def _throttled(request: Any, service: str, target: str) -> Any:
    """A throttling answer in the service's own words (botocore retries both codes)."""
    if not target:  # a query/XML or REST service: answer with a bare 503, which every protocol's parser reads
        return _answer(request, 503, "ServiceUnavailable", "Slow down (injected)", target)
    code = "ProvisionedThroughputExceededException" if service == "dynamodb" else "ThrottlingException"
    return _answer(request, 400, code, "Rate exceeded (injected)", target)


def _answer(request: Any, status: int, code: str, message: str, target: str) -> Any:
    from botocore.awsrequest import AWSResponse

    body = json.dumps({"__type": code, "message": message}).encode() if target else b""
    headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "injected"} if target else {}
    return AWSResponse(request.url, status, headers, _Raw(body))


class _Raw:
    """The urllib3 response botocore reads an answer's body from (only `stream` is used)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        yield self.body
