"""Simulated AWS services that moto lacks (Translate, Macie classification jobs, Bedrock Data Automation, HealthLake).

A simulator answers the real API calls of one botocore service in this process: botocore's `before-send` event is
caught for that service, the request is parsed with the service's own model and the answer is serialised back in
the service's protocol, so clients see exactly the shapes botocore expects. Simulators finish their jobs after a
configurable delay (on the offline cloud's clock), write their outputs to moto S3 and emit the service's documented
completion event on the default bus. They are test and demo infrastructure, never production code.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from datetime import datetime
from http import HTTPStatus
from typing import Any, ClassVar, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

import boto3
import botocore.handlers
import botocore.session
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import EndpointConnectionError
from botocore.model import OperationModel, ServiceModel

from localcloud.account import Account
from localcloud.clock import Clock, Timer
from localcloud.fixes.events import as_service
from localcloud.regions import ENDPOINT_SERVICES, has_service

LOG = logging.getLogger("localcloud.simulators")


def split_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/key/or/prefix` -> (bucket, key or prefix)."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


class ServiceError(Exception):
    """Raised by a simulator operation to answer with an AWS error (e.g. ResourceNotFoundException)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


class Simulator:
    """Base class: subclasses set `service` (botocore's name) and `outcomes` (what the `outcome` knob may name: the
    terminal status of every job), and define one method per operation name. `jobs` holds the jobs by id,
    `_by_token` their ids by client token (idempotent retries); `_lock` guards both (re-entrant: a locked
    operation may call a helper that takes it again). `throttling_error` is the error the service's model names for
    a caller over its request rate, which `throttle` answers with."""

    service: ClassVar[str]
    outcomes: ClassVar[tuple[str, ...]]
    throttling_error: ClassVar[str] = "ThrottlingException"  # Macie's, BDA's, HealthLake's; Translate names its own

    def __init__(self, region: str, delay_seconds: float, clock: Clock | None, outcome: str) -> None:
        if outcome not in self.outcomes:
            raise ValueError(f"outcome must be one of {self.outcomes}, not {outcome!r}")
        self.region = region
        self.delay_seconds = delay_seconds
        self.clock = clock or Clock()  # the offline cloud's (LocalCloud.clock), or real time
        self.outcome = outcome
        self.account = Account()  # the account it answers in: a new one, until LocalCloud.add_simulator gives its own
        self.jobs: dict[str, Any] = {}  # subclasses declare their job type
        self._by_token: dict[str, str] = {}
        self._lock = threading.RLock()
        self._timers: list[Timer] = []
        self._closed = False  # a step that runs while the simulator stops schedules no next step
        self._clients: dict[str, Any] = {}
        self._refusals: dict[str, int] = {}  # calls still to refuse, by operation name (`throttle`)
        self._base_lock = threading.Lock()  # guards the clients, the timers and the refusals (`_lock` the jobs)

    def now(self) -> datetime:
        return self.clock.now()

    def client(self, service: str) -> Any:
        """The simulator's boto3 client of `service`, made once, from the session every simulator shares: simulators
        work on timer threads, and clients are thread-safe once made but creating them is not. A session per call
        grew the offline cloud by gigabytes under load; a session per simulator still parsed botocore's models and
        endpoint rules again for each one (about 30 MB per simulator, docs/offline-cloud.md "Under load")."""
        with self._base_lock:
            if service not in self._clients:
                with _session_lock:
                    session = _session()
                    self._clients[service] = session.client(service, region_name=self.region)  # type: ignore[call-overload]
            return self._clients[service]

    def later(self, seconds: float, action: Callable[[], None]) -> None:
        """Run `action` after `seconds` on the clock; never for `math.inf` (a job that does not end by itself holds
        no timer, and so no thread, of its own)."""
        if seconds == math.inf:
            return

        def run() -> None:
            try:
                action()
            except Exception:  # a job stuck for no visible reason is worse than a logged one
                LOG.exception("simulated %s job step failed", self.service)
                raise

        with self._base_lock:
            if not self._closed:
                self._timers = [t for t in self._timers if t.is_alive()] + [self.clock.call_later(seconds, run)]

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until every job step scheduled so far, and every step those schedule, has run: the positive signal
        that a job which has ended will emit or write nothing more (within `timeout` real seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._base_lock:
                pending = [t for t in self._timers if t.is_alive() and t.thread is not threading.current_thread()]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"a simulated {self.service} job step is still pending after {timeout} s")
            for timer in pending:
                timer.join(max(0.0, deadline - time.monotonic()))

    def stop(self) -> None:
        """Cancel pending job steps and wait for running ones, so none acts on the next test's cloud."""
        with self._base_lock:
            self._closed = True
            timers = list(self._timers)
        for timer in timers:
            timer.cancel()
        for timer in timers:
            timer.join(timeout=5)

    def emit(self, source: str, detail_type: str, detail: dict[str, Any], resources: list[str] | None = None) -> None:
        """Put the service's event on the default bus, as the service itself does (its `aws.*` source is reserved)."""
        with as_service():
            response = self.client("events").put_events(
                Entries=[
                    {
                        "Source": source,
                        "DetailType": detail_type,
                        "Detail": json.dumps(detail),
                        "Resources": resources or [],
                    }
                ]
            )
        if response["FailedEntryCount"]:
            raise RuntimeError(f"simulated {self.service} event was refused: {response['Entries']}")

    def throttle(self, operation: str, calls: int = 1) -> None:
        """Refuse the next `calls` calls of `operation` (its API name, e.g. "StartTextTranslationJob") as the service
        refuses a caller over its request rate: `throttling_error`, with the HTTP status the service's model gives it,
        and nothing done. The calls after them are answered as usual: a caller's retry succeeds."""
        with self._base_lock:
            self._refusals[operation] = self._refusals.get(operation, 0) + calls

    def handle(self, operation: OperationModel, params: dict[str, Any]) -> dict[str, Any]:
        with self._base_lock:
            refused = self._refusals.get(operation.name, 0) > 0
            if refused:
                self._refusals[operation.name] -= 1
        if refused:
            error = operation.service_model.shape_for(self.throttling_error).metadata.get("error", {})
            raise ServiceError(self.throttling_error, "Rate exceeded", error.get("httpStatusCode", 400))
        method = getattr(self, operation.name, None)
        if method is None:
            raise ServiceError("InvalidAction", f"{self.service}.{operation.name} is not simulated offline")
        return method(params)  # type: ignore[no-any-return]


class Answerer(Protocol):
    """What the registry answers a service's calls with: a Simulator, or an answerer of a few operations of a service
    moto serves (`partial`: the operations it does not define go on to moto, e.g. localcloud.account's
    LambdaAccountSettings)."""

    service: ClassVar[str]

    def handle(self, operation: OperationModel, params: dict[str, Any]) -> dict[str, Any]: ...

    def settle(self, timeout: float = 10.0) -> None: ...

    def stop(self) -> None: ...


def _answers(answerer: Answerer, operation: OperationModel) -> bool:
    return not getattr(answerer, "partial", False) or hasattr(answerer, operation.name)


_active: dict[str, tuple[Answerer, ServiceModel]] = {}  # by botocore service id, hyphenized
_session_lock = threading.Lock()  # boto3 sessions are not thread-safe: every client is made under it


@functools.cache
def _session() -> boto3.session.Session:
    """The simulators' boto3 session, made on first use, with `_before_send` installed (a session reads botocore's
    handlers when it is made)."""
    _install()
    return boto3.session.Session()


def _params(body: bytes | str | None, url: str, operation: OperationModel) -> dict[str, Any]:
    """The call's parameters: the JSON body, plus URI labels and query-string members for rest-json services. An
    input whose body is one member (rest-json's payload trait: Lambda's SendDurableExecutionCallbackSuccess sends its
    Result as the raw body) gets the body as that member: a blob as sent, a structure parsed."""
    payload = operation.input_shape.serialization.get("payload") if operation.input_shape is not None else None
    if payload is None:
        params: dict[str, Any] = json.loads(body) if body else {}
    elif operation.input_shape.members[payload].type_name == "blob":
        params = {payload: body.encode() if isinstance(body, str) else body or b""}
    else:
        params = {payload: json.loads(body)} if body else {}
    parts = urlsplit(url)
    match = _uri_pattern(operation).fullmatch(parts.path)
    query = parse_qs(parts.query)
    if operation.input_shape is not None:
        for member, shape in operation.input_shape.members.items():
            label, location = shape.serialization.get("name", member), shape.serialization.get("location")
            if location == "uri" and match and label in match.groupdict():
                params[member] = unquote(match.group(label))
            elif location == "querystring" and label in query:
                values = query[label]
                params[member] = values if shape.type_name == "list" else _scalar(values[0], shape.type_name)
    return params


@functools.cache  # botocore keeps one OperationModel per operation; the pattern is built once, not per request
def _uri_pattern(operation: OperationModel) -> re.Pattern[str]:
    """The operation's requestUri as a regex: `{Label}` one path segment, `{Label+}` (greedy) the rest."""
    template = re.escape(operation.http.get("requestUri", "/").split("?")[0])
    greedy = re.sub(r"\\{(\w+)\\\+\\}", r"(?P<\1>[^?]+)", template)
    return re.compile(re.sub(r"\\{(\w+)\\}", r"(?P<\1>[^/?]+)", greedy))


def _scalar(value: str, type_name: str) -> Any:
    if type_name in ("integer", "long"):
        return int(value)
    if type_name == "boolean":
        return value == "true"
    return value


_CREDENTIAL_SCOPE = re.compile(r"Credential=[^/]+/[^/]+/([^/]+)/([^/]+)/aws4_request")  # (Region, signing name)
_signed_region: ContextVar[str | None] = ContextVar("signed_region", default=None)


def signed_region() -> str | None:
    """The Region the call being answered was signed for (its SigV4 credential scope); None outside a call."""
    return _signed_region.get()


def _answer(
    simulator: Answerer, operation: OperationModel, params: dict[str, Any], authorization: str
) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of the simulator's answer to one call, in the service's JSON protocols."""
    scope = _CREDENTIAL_SCOPE.search(authorization)
    token = _signed_region.set(scope[1] if scope else None)
    try:
        status, payload = 200, simulator.handle(operation, params)
    except ServiceError as exc:
        status, payload = exc.status, {"__type": exc.code, "message": exc.message}
        LOG.info("%s.%s -> %s", simulator.service, operation.name, exc.code)
    finally:
        _signed_region.reset(token)
    headers = {"Content-Type": "application/json", "x-amzn-RequestId": str(uuid.uuid4())}
    if status >= 300:
        headers["x-amzn-ErrorType"] = str(payload["__type"])
    return status, headers, json.dumps(payload, default=_wire).encode()


def _wire(value: Any) -> Any:
    """How a payload's datetimes travel: epoch seconds, botocore's default for JSON bodies (Macie's shapes, whose
    model says ISO 8601, are strings already)."""
    return value.timestamp() if isinstance(value, datetime) else str(value)


def _before_send(request: AWSPreparedRequest, event_name: str = "", **_: Any) -> AWSResponse | None:
    """In-process clients: botocore hands the prepared request to the simulator before sending it. A call signed for a
    Region where its service has no endpoint fails as botocore fails to reach one (EndpointConnectionError)."""
    parts = [*event_name.split("."), "", ""]
    service_id, operation_name = parts[1], parts[2]  # the service id hyphenized: ENDPOINT_SERVICES' SDK names
    if service_id in ENDPOINT_SERVICES and not _has_endpoint(service_id, str(request.headers.get("Authorization"))):
        raise EndpointConnectionError(endpoint_url=request.url)
    if service_id not in _active:
        return None
    simulator, model = _active[service_id]
    operation = model.operation_model(operation_name)
    if not _answers(simulator, operation):
        return None
    authorization = str(request.headers.get("Authorization", ""))
    status, headers, body = _answer(simulator, operation, _params(request.body, request.url, operation), authorization)
    return AWSResponse(request.url, status, headers, _Raw(body))


def _has_endpoint(service: str, authorization: str) -> bool:
    """Whether the Region a call is signed for has an endpoint of `service` (localcloud.regions); on AWS, a Region
    without one has no host name to resolve."""
    scope = _CREDENTIAL_SCOPE.search(authorization)
    return scope is None or has_service(service, scope[1])


def wsgi(app: Callable[..., Any]) -> Callable[..., Any]:
    """HTTP clients (the functions' workers, the AWS CLI): a request signed for a simulated service is answered by its
    simulator, every other request by `app` (moto's server). The service is the one in the SigV4 credential scope.
    A request signed for a Region where its service (of ENDPOINT_SERVICES) has no endpoint is not answered: its
    connection is closed, as close as a local endpoint comes to a host name that does not resolve (botocore raises
    ConnectionClosedError, and retries it as it retries EndpointConnectionError)."""

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        scope = _CREDENTIAL_SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
        if scope is None:  # unsigned: not a call of a simulated service
            return app(environ, start_response)
        if _without_endpoint(scope, environ):
            connection = environ.get("werkzeug.socket")
            if connection is not None:
                connection.shutdown(socket.SHUT_RDWR)
            raise ConnectionAbortedError("no endpoint of this service in the Region the request is signed for")
        found = _operation_of(scope, environ)
        if found is None:
            return app(environ, start_response)
        simulator, operation = found
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        params = _params(body, _raw_uri(environ), operation)
        status, headers, payload = _answer(simulator, operation, params, environ.get("HTTP_AUTHORIZATION", ""))
        start_response(f"{status} {HTTPStatus(status).phrase}", list(headers.items()))
        return [payload]

    return serve


def _operation_of(scope: re.Match[str], environ: dict[str, Any]) -> tuple[Answerer, OperationModel] | None:
    for simulator, model in list(_active.values()):
        operation = _operation_in(model, scope, environ)
        if operation is not None:
            return (simulator, operation) if _answers(simulator, operation) else None
    return None


def _without_endpoint(scope: re.Match[str], environ: dict[str, Any]) -> bool:
    """Whether a request calls a service of ENDPOINT_SERVICES in a Region that has no endpoint of it."""
    return any(
        not has_service(service, scope[1]) and _operation_in(_model(service), scope, environ) is not None
        for service in ENDPOINT_SERVICES
    )


@functools.cache
def _model(service: str) -> ServiceModel:
    return botocore.session.get_session().get_service_model(service)


def _operation_in(model: ServiceModel, scope: re.Match[str], environ: dict[str, Any]) -> OperationModel | None:
    """The operation of `model` a request calls: its SigV4 credential `scope` names the model's signing name, and its
    X-Amz-Target, or its method and path, name the operation; None for a request of another service."""
    if model.signing_name != scope[2]:
        return None
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        prefix, _, name = target.rpartition(".")
        known = prefix == model.metadata.get("targetPrefix") and name in model.operation_names
        return model.operation_model(name) if known else None
    path, method = urlsplit(_raw_uri(environ)).path, environ.get("REQUEST_METHOD", "GET")
    for name in model.operation_names:
        operation = model.operation_model(name)
        if operation.http.get("method") == method and _uri_pattern(operation).fullmatch(path):
            return operation
    return None


def _raw_uri(environ: dict[str, Any]) -> str:
    """The request's path and query as the client sent them (PATH_INFO is already percent-decoded)."""
    query = environ.get("QUERY_STRING")
    return str(environ.get("RAW_URI") or environ.get("PATH_INFO", "/") + (f"?{query}" if query else ""))


class _Raw:
    """The raw-response object AWSResponse reads its body from."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


def register(simulator: Answerer) -> None:
    """Answer `simulator.service` from now on, for clients of every botocore session created after this module was
    imported. A simulator it replaces is stopped: its jobs end there, and none of its events arrives later."""
    model = botocore.session.get_session().get_service_model(simulator.service)
    replaced = _active.get(model.service_id.hyphenize())
    if replaced is not None and replaced[0] is not simulator:
        replaced[0].stop()
    _active[model.service_id.hyphenize()] = (simulator, model)
    _install()


def _install() -> None:
    if ("before-send", _before_send) not in botocore.handlers.BUILTIN_HANDLERS:
        # Ahead of moto's own stubber, which would send services it does not know to the network.
        botocore.handlers.BUILTIN_HANDLERS.insert(0, ("before-send", _before_send))


def active(service: str) -> Simulator | None:
    """The simulator currently answering `service` (botocore's name, e.g. "healthlake"), if any."""
    return next((s for s, _ in _active.values() if isinstance(s, Simulator) and s.service == service), None)


def settle_all(timeout: float = 10.0) -> None:
    """`Simulator.settle` for every registered simulator."""
    for simulator, _ in list(_active.values()):
        simulator.settle(timeout)


def unregister(simulator: Answerer) -> None:
    """Stop `simulator` and stop answering with it; the other simulators (another cloud's, say) go on."""
    simulator.stop()
    for service, (registered, _) in list(_active.items()):
        if registered is simulator:
            del _active[service]


def unregister_all() -> None:
    for simulator, _ in _active.values():
        simulator.stop()
    _active.clear()


# At import, not at the first register(): a botocore session copies BUILTIN_HANDLERS when it is created, so clients
# of a session created before the first register() (e.g. boto3's default session) would never be answered. The
# handler answers nothing while no simulator is active.
_install()
