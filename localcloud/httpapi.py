"""Local stand-in for an API Gateway HTTP API with Lambda proxy integrations (payload format 2.0).

moto has no invoke path for HTTP APIs, so this server plays API Gateway's part the way ``sam local start-api``
does: it turns real HTTP requests into payload format 2.0 events, hands them to ``invoke`` (the offline cloud's
Lambda dispatcher) and turns the function's result back into an HTTP response.

Emulated, following API Gateway rather than ``sam local`` where the two differ:

* Route selection: exact method before ``ANY``; literal segments before ``{param}`` before ``{proxy+}``;
  ``$default`` last. No match answers 404 ``{"message":"Not Found"}``.
* The event: lower-cased header names, repeated headers and query parameters joined with ",", cookies moved
  from the ``cookie`` header into ``cookies``, percent-decoded ``rawPath`` and ``pathParameters``, bodies that
  are not UTF-8 text base64-encoded, ``authentication`` null (no mTLS), optional keys left out when empty.
* The result: ``statusCode``/``headers``/``cookies``/``body``/``isBase64Encoded``, or a result without
  ``statusCode`` sent as a 200 JSON body. ``multiValueHeaders`` is ignored, as format 2.0 ignores it. A raising
  or malformed invocation answers 500 ``{"message":"Internal Server Error"}``, a throttled one too (as API Gateway
  answers Lambda's 429): ``invoke`` raising one of ``throttled`` is expected (a new account has ten concurrent
  executions for all its functions), so it is one log line, not a traceback.
* ``AWS_IAM`` routes: the SigV4 ``Authorization`` header is checked against ``credentials`` (service
  ``execute-api``, the configured region, five minutes of clock skew), failures answer 403 without invoking,
  and the caller is passed on in ``requestContext.authorizer.iam``.

Requests are served on concurrent threads, so ``invoke`` must be safe to call from several at once, and ahead of the
cloud's own work (``REQUESTS``: on AWS the API and the workflows it starts share no CPU). The serving
pieces (``LocalServer``, ``LocalHandler``, ``Request``) and ``verify_sigv4`` also serve the simulated HealthLake
FHIR endpoint.

Deliberately not emulated: JWT and Lambda authorizers, IAM policy evaluation (any known key may call any IAM
route), session-token validation, presigned-URL (query string) SigV4, stage variables, CORS configuration,
throttling, the 30 s integration timeout, payload size limits, custom domains and API mappings, and payload
format 1.0.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import Message
from http.client import HTTPMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, cast
from urllib.parse import parse_qsl, unquote, urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

from localcloud.account import ACCOUNT_ID, Credential

logger = logging.getLogger(__name__)

Event = dict[str, Any]
Invoke = Callable[[str, Event], dict[str, Any]]

DEFAULT_ROUTE = "$default"
DEFAULT_STAGE = "$default"
_SIGNING_SERVICE = "execute-api"
_MAX_CLOCK_SKEW = timedelta(minutes=5)
_AMZ_DATE_FORMAT = "%Y%m%dT%H%M%SZ"
# strftime's %b follows the process locale; API Gateway always writes English month names.
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# We compute Content-Length ourselves; passing the function's copies on would corrupt the framing.
_HOP_BY_HOP = frozenset({"connection", "content-length", "keep-alive", "transfer-encoding"})
# Segment ranks for route specificity: lower sorts first, compared left to right, so the earliest literal wins.
_LITERAL, _PARAM, _GREEDY = 0, 1, 2
_AUTH_PARAM = re.compile(r"(Credential|SignedHeaders|Signature)=([^,\s]+)")


@dataclass(frozen=True)
class Route:
    method: str  # "GET", "POST", ..., or "ANY"
    path: str  # OpenAPI-style: "/task", "/task/{id}", "/files/{proxy+}", or "$default"
    function_name: str  # passed to `invoke`
    iam_auth: bool  # True when the route's authorizer is AWS_IAM


class Requests:
    """The HTTP API's requests being served, which the cloud's own work lets go first (`wait_until_answered`).

    On AWS, API Gateway and the workflows its requests start share nothing. Offline, one process serves the API and
    runs every workflow (moto's interpreter, its simulated services, their events), and under load the workflows
    took the process from the requests that started them: 200 POST /task from 20 clients, p50 1.39 s, p99 4.5 s.
    Each state of an execution now waits to start while a request is served (docs/performance.md), for at most
    `patience` seconds, so a stream of requests delays a workflow but never stops it."""

    def __init__(self, patience: float) -> None:
        self.patience = patience
        self._served = 0
        self._waiting = 0
        self._answered = threading.Condition()

    @property
    def waiting(self) -> int:
        """How many are waiting for the requests now."""
        return self._waiting

    @contextmanager
    def serving(self) -> Iterator[None]:
        with self._answered:
            self._served += 1
        try:
            yield
        finally:
            with self._answered:
                self._served -= 1
                if not self._served:
                    self._answered.notify_all()

    def wait_until_answered(self) -> None:
        """Return once no request is being served, or after `patience` seconds."""
        if self._served:  # read without the lock: a request that starts just after goes unseen, as one would
            with self._answered:
                self._waiting += 1
                try:
                    self._answered.wait_for(lambda: not self._served, timeout=self.patience)
                finally:
                    self._waiting -= 1


REQUESTS = Requests(patience=1.0)


class HttpApiServer:
    """Serve ``routes`` over HTTP on a daemon thread, invoking ``invoke(function_name, event)`` per request."""

    def __init__(
        self,
        routes: list[Route],
        invoke: Invoke,
        credentials: list[Credential],
        host: str = "127.0.0.1",
        port: int = 3000,
        region: str = "us-east-1",
        api_id: str = "localapi",
        stage: str = "$default",
        throttled: tuple[type[Exception], ...] = (),
    ) -> None:
        self._routes = [_CompiledRoute(route) for route in routes]
        self._invoke = invoke
        self._credentials = {c.access_key_id: c for c in credentials}
        self._host = host
        self._port = port
        self._region = region
        self._api_id = api_id
        self._stage = stage
        self._throttled = throttled
        self._server: _Server | None = None

    def start(self) -> None:
        if self._server is not None:
            return
        server = _Server((self._host, self._port), _Handler)
        server.api = self
        self._port = server.port
        self._server = server
        server.start("httpapi")
        logger.info("HTTP API %s listening on %s", self._api_id, self.url)

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._port}"

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    def _handle(self, request: Request) -> _Response:
        """Answer one request exactly as API Gateway would, short of the network, ahead of the cloud's own work."""
        with REQUESTS.serving():
            return self._answer(request)

    def _answer(self, request: Request) -> _Response:
        request_id = base64.b64encode(secrets.token_bytes(11)).decode()
        path = request.path
        if self._stage != DEFAULT_STAGE:
            # Named stages are addressed as /{stage}/...; routes are declared without that prefix.
            prefix = f"/{self._stage}"
            if path != prefix and not path.startswith(prefix + "/"):
                return _message(404, "Not Found", request_id)
            path = path[len(prefix) :] or "/"
        match = self._select_route(request.method, path)
        if match is None:
            return _message(404, "Not Found", request_id)
        route, path_parameters = match
        authorizer: dict[str, Any] | None = None
        if route.route.iam_auth:
            identity = self._authenticate(request)
            if isinstance(identity, str):
                return _message(403, identity, request_id)
            authorizer = {"iam": identity}
        event = self._build_event(request, route, path_parameters, authorizer, request_id)
        try:
            result = self._invoke(route.route.function_name, event)
        except self._throttled as exc:
            logger.warning("%s throttled handling %s: %s", route.route.function_name, event["routeKey"], exc)
            return _message(500, "Internal Server Error", request_id)
        except Exception:
            logger.exception("%s failed handling %s", route.route.function_name, event["routeKey"])
            return _message(500, "Internal Server Error", request_id)
        try:
            return _response_from_result(result, request_id)
        except (TypeError, ValueError, binascii.Error) as exc:
            logger.warning("%s returned a malformed response: %s", route.route.function_name, exc)
            return _message(500, "Internal Server Error", request_id)

    def _select_route(self, method: str, path: str) -> tuple[_CompiledRoute, dict[str, str]] | None:
        best: tuple[tuple[tuple[int, ...], bool], _CompiledRoute, dict[str, str]] | None = None
        fallback: _CompiledRoute | None = None
        segments = path.split("/")[1:]
        for route in self._routes:
            if route.route.path == DEFAULT_ROUTE:
                fallback = fallback or route
                continue
            if route.route.method not in ("ANY", method):
                continue
            parameters = route.match(segments)
            if parameters is None:
                continue
            rank = (route.specificity, route.route.method == "ANY")
            if best is None or rank < best[0]:
                best = (rank, route, parameters)
        if best is not None:
            return best[1], best[2]
        return (fallback, {}) if fallback is not None else None

    def _authenticate(self, request: Request) -> dict[str, Any] | str:
        """Return the caller for ``requestContext.authorizer.iam``, or the 403 message API Gateway would give."""
        if not request.headers.get("authorization"):
            return "Forbidden"
        credential = verify_sigv4(request, self._credentials, self._region, _SIGNING_SERVICE)
        if isinstance(credential, str):
            return credential
        return {
            "accessKey": credential.access_key_id,
            "accountId": credential.account_id,
            "callerId": credential.user_id,
            "cognitoIdentity": None,
            "principalOrgId": None,
            "userArn": credential.user_arn,
            "userId": credential.user_id,
        }

    def _build_event(
        self,
        request: Request,
        route: _CompiledRoute,
        path_parameters: dict[str, str],
        authorizer: dict[str, Any] | None,
        request_id: str,
    ) -> Event:
        now = datetime.now(UTC)
        route_key = route.route_key
        headers: dict[str, str] = {}
        cookies: list[str] = []
        for original_name, value in request.headers.items():
            name = original_name.lower()
            if name == "cookie":
                cookies.extend(c.strip() for c in value.split(";") if c.strip())
            else:
                headers[name] = f"{headers[name]},{value}" if name in headers else value
        # API Gateway adds these for every request; handlers use them to find the caller and the original scheme.
        forwarded_for = headers.get("x-forwarded-for")
        headers["x-forwarded-for"] = f"{forwarded_for}, {request.client_ip}" if forwarded_for else request.client_ip
        headers.setdefault("x-forwarded-port", str(self._port))
        headers.setdefault("x-forwarded-proto", "http")
        headers.setdefault("x-amzn-trace-id", f"Root=1-{int(now.timestamp()):08x}-{secrets.token_hex(12)}")
        query: dict[str, str] = {}
        for key, value in parse_qsl(request.query, keep_blank_values=True):
            query[key] = f"{query[key]},{value}" if key in query else value
        # Keeping the port (API Gateway never has one) lets handlers build links that work against this server.
        host = request.headers.get("host", f"{self._host}:{self._port}")
        # HTTP APIs hand over the path percent-decoded (REST APIs and function URLs do not).
        decoded_path = unquote(request.path)
        event: Event = {
            "version": "2.0",
            "routeKey": route_key,
            "rawPath": decoded_path,
            "rawQueryString": request.query,
        }
        if cookies:
            event["cookies"] = cookies
        event["headers"] = headers
        if query:
            event["queryStringParameters"] = query
        context: dict[str, Any] = {
            "accountId": ACCOUNT_ID,
            "apiId": self._api_id,
            "authentication": None,
        }
        if authorizer is not None:
            context["authorizer"] = authorizer
        context.update(
            {
                "domainName": host,
                "domainPrefix": host.split(":", 1)[0].split(".", 1)[0],
                "http": {
                    "method": request.method,
                    "path": decoded_path,
                    "protocol": request.protocol,
                    "sourceIp": request.client_ip,
                    "userAgent": request.headers.get("user-agent", ""),
                },
                "requestId": request_id,
                "routeKey": route_key,
                "stage": self._stage,
                "time": f"{now:%d}/{_MONTHS[now.month - 1]}/{now:%Y:%H:%M:%S} +0000",
                "timeEpoch": int(now.timestamp() * 1000),
            }
        )
        event["requestContext"] = context
        is_base64 = False
        if request.body:
            try:
                event["body"] = request.body.decode("utf-8")
            except UnicodeDecodeError:
                event["body"] = base64.b64encode(request.body).decode("ascii")
                is_base64 = True
        if path_parameters:
            event["pathParameters"] = path_parameters
        event["isBase64Encoded"] = is_base64
        return event


@dataclass(frozen=True)
class Request:
    """A request a LocalServer received."""

    method: str
    path: str  # as sent, still percent-encoded (SigV4 signs this form), like the query
    query: str
    headers: Message
    body: bytes
    client_ip: str
    protocol: str


@dataclass(frozen=True)
class _Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


class _CompiledRoute:
    def __init__(self, route: Route) -> None:
        self.route = Route(route.method.upper(), route.path, route.function_name, route.iam_auth)
        self.route_key = DEFAULT_ROUTE if route.path == DEFAULT_ROUTE else f"{self.route.method} {route.path}"
        self.segments = [] if route.path == DEFAULT_ROUTE else route.path.split("/")[1:]
        self.specificity = tuple(
            _GREEDY if s.startswith("{") and s.endswith("+}") else _PARAM if s.startswith("{") else _LITERAL
            for s in self.segments
        )
        if _GREEDY in self.specificity[:-1]:
            raise ValueError(f"greedy path variable must be the last segment: {route.path}")

    def match(self, segments: list[str]) -> dict[str, str] | None:
        parameters: dict[str, str] = {}
        for index, (pattern, rank) in enumerate(zip(self.segments, self.specificity, strict=True)):
            if rank == _GREEDY:
                rest = segments[index:]
                if not rest or not rest[0]:
                    return None
                parameters[pattern[1:-2]] = "/".join(unquote(s) for s in rest)
                return parameters
            if index >= len(segments):
                return None
            value = unquote(segments[index])
            if rank == _PARAM:
                if not value:
                    return None
                parameters[pattern[1:-1]] = value
            elif value != pattern:
                return None
        return parameters if len(segments) == len(self.segments) else None


def verify_sigv4(
    request: Request, credentials: Mapping[str, Credential], region: str, service: str
) -> Credential | str:
    """Check a received request's SigV4 ``Authorization`` header; return the signing credential or AWS's reason.

    ``credentials`` maps access key ids to the keys allowed to sign; the signature must be scoped to ``region`` and
    ``service`` and made within five minutes of now. What a missing ``Authorization`` header means differs between
    services, so callers check for it first.
    """
    headers = request.headers
    authorization = headers.get("authorization") or ""
    params = dict(_AUTH_PARAM.findall(authorization))
    if not authorization.startswith("AWS4-HMAC-SHA256 ") or len(params) != 3:
        return (
            "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters. "
            f"Authorization={authorization}"
        )
    access_key, _, scope = params["Credential"].partition("/")
    scope_parts = scope.split("/")
    if len(scope_parts) != 4 or scope_parts[3] != "aws4_request":
        return "Credential should be scoped with a valid terminator: 'aws4_request'. "
    scope_date, scope_region, scope_service, _ = scope_parts
    if scope_service != service:
        return f"Credential should be scoped to correct service: '{service}'. "
    if scope_region != region:
        return "Credential should be scoped to a valid region. "
    amz_date = headers.get("x-amz-date", "")
    try:
        signed_at = datetime.strptime(amz_date, _AMZ_DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
    if scope_date != amz_date[:8]:
        return (
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
            f"'{scope_date}' != '{amz_date[:8]}', from '{amz_date}'."
        )
    now = datetime.now(UTC)  # signers use the real clock, whatever a simulated one says
    if signed_at < now - _MAX_CLOCK_SKEW:
        return (
            f"Signature expired: {amz_date} is now earlier than "
            f"{now - _MAX_CLOCK_SKEW:{_AMZ_DATE_FORMAT}} ({now:{_AMZ_DATE_FORMAT}} - 5 min.)"
        )
    if signed_at > now + _MAX_CLOCK_SKEW:
        return (
            f"Signature not yet current: {amz_date} is still later than "
            f"{now + _MAX_CLOCK_SKEW:{_AMZ_DATE_FORMAT}} ({now:{_AMZ_DATE_FORMAT}} + 5 min.)"
        )
    signed_headers = params["SignedHeaders"].lower().split(";")
    if "host" not in signed_headers:
        return "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization."
    credential = credentials.get(access_key)
    if credential is None:
        return "The security token included in the request is invalid."
    declared_hash = headers.get("x-amz-content-sha256")
    # botocore signs the declared hash verbatim, so without this check a signed request could carry any body.
    if declared_hash is not None and declared_hash.lower() != hashlib.sha256(request.body).hexdigest():
        return "The provided 'x-amz-content-sha256' header does not match what was computed."
    url = f"http://{headers.get('host', 'localhost')}{request.path}"
    # SigV4 signs the decoded parameters re-encoded in one canonical way. botocore does that for params, but signs a
    # query left in the URL byte for byte as sent, which would accept encodings AWS's canonical form rejects.
    # A list of pairs (botocore accepts one) keeps repeated keys that a dict would merge.
    query: Any = [
        (unquote(key), unquote(value)) for key, _, value in (p.partition("=") for p in request.query.split("&") if p)
    ]
    # botocore signs a declared payload hash instead of hashing the body, exactly as the client did.
    declared = {"X-Amz-Content-SHA256": declared_hash} if declared_hash is not None else {}
    aws_request = AWSRequest(method=request.method, url=url, headers=declared, data=request.body, params=query)
    # botocore takes the signing time from the context; add_auth would stamp "now" instead.
    aws_request.context["timestamp"] = amz_date
    signer = _ReceivedRequestSigner(
        Credentials(credential.access_key_id, credential.secret_access_key), service, region, headers, signed_headers
    )
    canonical_request = signer.canonical_request(aws_request)
    expected = signer.signature(signer.string_to_sign(aws_request, canonical_request), aws_request)
    if not hmac.compare_digest(expected, params["Signature"]):
        return (
            "The request signature we calculated does not match the signature you provided. Check your AWS "
            "Secret Access Key and signing method. Consult the service documentation for details."
        )
    return credential


class _ReceivedRequestSigner(SigV4Auth):
    """SigV4Auth that signs exactly the received headers the client listed in SignedHeaders.

    botocore's own choice (every header but a deny-list, e.g. never user-agent) suits a sender, not a verifier.
    """

    def __init__(
        self, credentials: Credentials, service: str, region: str, received: Message, signed_headers: list[str]
    ) -> None:
        super().__init__(credentials, service, region)
        self._received = received
        self._signed_headers = signed_headers

    def headers_to_sign(self, request: AWSRequest) -> HTTPMessage:
        selected = HTTPHeaders()
        for name in self._signed_headers:
            for value in self._received.get_all(name) or []:
                selected[name] = value
        return selected


def _response_from_result(result: Any, request_id: str) -> _Response:
    if not isinstance(result, dict) or "statusCode" not in result:
        # Format 2.0 treats any result without statusCode as the JSON body of a 200.
        return _Response(
            200,
            [("Content-Type", "application/json"), ("Apigw-Requestid", request_id)],
            json.dumps(result).encode(),
        )
    status = result["statusCode"]
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        raise ValueError(f"statusCode must be an HTTP status code, got {status!r}")
    body = result.get("body")
    if body is not None and not isinstance(body, str):
        raise TypeError(f"body must be a string, got {type(body).__name__}")
    payload = b""
    if body:
        payload = base64.b64decode(body, validate=True) if result.get("isBase64Encoded") else body.encode()
    headers = [
        (str(name), str(value))
        for name, value in (result.get("headers") or {}).items()
        if str(name).lower() not in _HOP_BY_HOP
    ]
    # Format 2.0 drops multiValueHeaders; Set-Cookie is repeated through the cookies list instead.
    headers.extend(("Set-Cookie", str(cookie)) for cookie in result.get("cookies") or [])
    if not any(name.lower() == "content-type" for name, _ in headers):
        headers.append(("Content-Type", "text/plain; charset=utf-8"))
    headers.append(("Apigw-Requestid", request_id))
    return _Response(status, headers, payload)


def _message(status: int, message: str, request_id: str) -> _Response:
    body = json.dumps({"message": message}, separators=(",", ":")).encode()
    return _Response(status, [("Content-Type", "application/json"), ("Apigw-Requestid", request_id)], body)


class LocalServer(ThreadingHTTPServer):
    """A local HTTP server that serves on a daemon thread of its own between `start` and `stop`."""

    daemon_threads = True
    # The socket's listen backlog (socketserver's default is 5): a burst of clients connecting at once was reset.
    request_queue_size = 128
    _thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.server_address[1]

    def start(self, name: str) -> None:
        # stop() waits up to one poll interval; the default half second adds up across a test suite.
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, name=f"{name}-{self.port}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:  # shutdown() waits for a serve_forever that never started
            self.shutdown()
            self._thread.join()
        self.server_close()


class LocalHandler(BaseHTTPRequestHandler):
    """One request to a LocalServer: its body read (Content-Length or chunked), `answer`'s response written back."""

    # HTTP/1.1 keeps connections alive, which clients such as requests.Session and curl expect.
    protocol_version = "HTTP/1.1"
    log: ClassVar[logging.Logger] = logger

    def answer(self, request: Request) -> tuple[int, list[tuple[str, str]], bytes]:
        """The response to `request`: status, headers and body."""
        raise NotImplementedError

    def _serve(self) -> None:
        split = urlsplit(self.path)
        try:
            body = self._read_body()
        except ValueError:
            self.send_error(400, "Bad request body framing")
            return
        request = Request(
            method=self.command,
            path=split.path or "/",
            query=split.query,
            headers=self.headers,
            body=body,
            client_ip=self.client_address[0],
            protocol=self.request_version,
        )
        status, headers, payload = self.answer(request)
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            chunks = []
            while size := int(self.rfile.readline().split(b";", 1)[0].strip(), 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline().strip():  # trailers
                pass
            return b"".join(chunks)
        length = int(self.headers.get("content-length") or 0)
        if length < 0:
            raise ValueError("negative Content-Length")
        return self.rfile.read(length)

    def log_message(self, format: str, *args: Any) -> None:
        self.log.debug("%s - " + format, self.client_address[0], *args)


class _Server(LocalServer):
    api: HttpApiServer


class _Handler(LocalHandler):
    server_version = "localcloud-httpapi"
    do_OPTIONS = LocalHandler._serve

    def answer(self, request: Request) -> tuple[int, list[tuple[str, str]], bytes]:
        response = cast(_Server, self.server).api._handle(request)
        return response.status, response.headers, response.body


__all__ = ["HttpApiServer", "LocalHandler", "LocalServer", "Request", "Route", "verify_sigv4"]
