"""Behaviour of the local HTTP API (localcloud.httpapi) as a client and a Lambda handler see it.

The reference event in fixtures/http-api-proxy.json is generated, not hand-written:

    SAM_CLI_TELEMETRY=0 /tmp/samv/bin/sam local generate-event apigateway http-api-proxy \
        > tests/localcloud/fixtures/http-api-proxy.json
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from localcloud.account import Credential
from localcloud.httpapi import REQUESTS, HttpApiServer, Requests, Route

FIXTURE = Path(__file__).parent / "fixtures" / "http-api-proxy.json"
REGION = "us-east-1"
ALICE = Credential(
    access_key_id="AKIAEXAMPLEALICE",
    secret_access_key="alice-secret-key",
    user_arn="arn:aws:iam::123456789012:user/alice",
    user_id="AIDAEXAMPLEALICE",
    account_id="123456789012",
)
SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key "
    "and signing method. Consult the service documentation for details."
)


class FakeLambda:
    """Stands in for the offline cloud's dispatcher: records every invocation and answers with `result`."""

    def __init__(self, result: Any = None, error: Exception | None = None) -> None:
        self.result = result if result is not None else {"statusCode": 200, "body": "ok"}
        self.error = error
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, function_name: str, event: dict[str, Any]) -> Any:
        self.calls.append((function_name, event))
        if self.error is not None:
            raise self.error
        return self.result

    @property
    def event(self) -> dict[str, Any]:
        assert len(self.calls) == 1, f"expected exactly one invocation, got {len(self.calls)}"
        return self.calls[0][1]


StartApi = Callable[..., HttpApiServer]


@pytest.fixture
def start_api() -> Iterator[StartApi]:
    servers: list[HttpApiServer] = []

    def start(routes: list[Route], fake: FakeLambda, **options: Any) -> HttpApiServer:
        server = HttpApiServer(routes, fake, [ALICE], port=0, region=REGION, **options)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def send_raw(
    server: HttpApiServer, method: str, target: str, headers: list[tuple[str, str]], body: bytes = b""
) -> http.client.HTTPResponse:
    """Send a request header by header, because requests cannot repeat a header."""
    parts = urlsplit(server.url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port)
    connection.putrequest(method, target)
    for name, value in headers:
        connection.putheader(name, value)
    connection.putheader("Content-Length", str(len(body)))
    connection.endheaders(body)
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


def botocore_signed(
    method: str,
    url: str,
    body: bytes = b"",
    *,
    key: str = ALICE.access_key_id,
    secret: str = ALICE.secret_access_key,
    service: str = "execute-api",
    region: str = REGION,
    headers: dict[str, str] | None = None,
) -> dict[str, str]:
    """Headers a botocore-based client (the AWS SDK for Python) would send."""
    request = AWSRequest(method=method, url=url, data=body, headers=headers or {})
    SigV4Auth(Credentials(key, secret), service, region).add_auth(request)
    return dict(request.headers.items())


def hand_signed(
    method: str, url: str, body: bytes, headers: dict[str, str], *, at: datetime | None = None
) -> dict[str, str]:
    """Headers signed straight from the SigV4 specification, independently of botocore, signing every header."""
    parts = urlsplit(url)
    amz_date = (at or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    signed = {name.lower(): value for name, value in headers.items()} | {"host": parts.netloc, "x-amz-date": amz_date}
    pairs = sorted(
        (quote(unquote(key), safe="-_.~"), quote(unquote(value), safe="-_.~"))
        for key, _, value in (pair.partition("=") for pair in parts.query.split("&") if pair)
    )
    canonical_request = "\n".join(
        [
            method,
            quote(parts.path, safe="/~"),
            "&".join(f"{key}={value}" for key, value in pairs),
            "".join(f"{name}:{' '.join(value.split())}\n" for name, value in sorted(signed.items())),
            ";".join(sorted(signed)),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{amz_date[:8]}/{REGION}/execute-api/aws4_request"
    string_to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
    )
    signing_key = f"AWS4{ALICE.secret_access_key}".encode()
    for part in (amz_date[:8], REGION, "execute-api", "aws4_request"):
        signing_key = hmac.new(signing_key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(signing_key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    signed["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={ALICE.access_key_id}/{scope}, "
        f"SignedHeaders={';'.join(sorted(signed))}, Signature={signature}"
    )
    return signed


def assert_same_shape(actual: Any, expected: Any, where: str = "event") -> None:
    """Same keys (recursively) and same JSON types; maps keyed by the request itself only need string values."""
    free_form_maps = {"event.headers", "event.queryStringParameters", "event.pathParameters"}
    assert type(actual) is type(expected), f"{where}: {type(actual).__name__} != {type(expected).__name__}"
    if isinstance(expected, dict):
        if where in free_form_maps:
            assert all(isinstance(value, str) for value in actual.values()), where
            return
        assert sorted(actual) == sorted(expected), f"{where}: keys differ"
        for key in expected:
            assert_same_shape(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        for index, item in enumerate(actual):
            assert_same_shape(item, expected[0], f"{where}[{index}]")


def assert_forbidden(response: requests.Response, fake: FakeLambda, message: str) -> None:
    assert response.status_code == 403
    assert response.json() == {"message": message}
    assert fake.calls == [], "a rejected request must never reach the function"


# --- the event ---------------------------------------------------------------------------------------------------


def test_event_has_the_keys_and_types_of_api_gateway_payload_2_0(start_api: StartApi) -> None:
    # Given a route with a path parameter, and a request using every optional part of the event
    fake = FakeLambda()
    api = start_api([Route("POST", "/path/{parameter1}", "Fn", iam_auth=False)], fake)
    headers = [("Header1", "value1"), ("Header2", "value1"), ("Header2", "value2"), ("Cookie", "cookie1; cookie2")]

    # When the request arrives
    send_raw(api, "POST", "/path/value1?parameter1=value1&parameter1=value2&parameter2=value", headers, b"\xff\xd8")

    # Then the event has exactly the fixture's keys and types, except for parts API Gateway fills in only sometimes
    reference = json.loads(FIXTURE.read_text())
    event = fake.event
    # stageVariables appear only when the stage defines some; this emulator has none.
    del reference["stageVariables"]
    assert "stageVariables" not in event
    # authentication is null unless the custom domain uses mutual TLS (the fixture shows an mTLS client cert).
    del reference["requestContext"]["authentication"]
    assert event["requestContext"].pop("authentication") is None
    # authorizer appears only on routes with an authorizer; the fixture shows JWT, IAM is covered by the SigV4 tests.
    del reference["requestContext"]["authorizer"]
    assert "authorizer" not in event["requestContext"]
    assert_same_shape(event, reference)


def test_path_query_headers_and_cookies_reach_the_function_as_api_gateway_delivers_them(start_api: StartApi) -> None:
    # Given a parameterised route
    fake = FakeLambda()
    api = start_api([Route("GET", "/task/{id}", "GetTaskFunction", iam_auth=False)], fake)
    headers = [("X-Trace", "a"), ("X-Trace", "b"), ("Cookie", "session=abc; theme=dark"), ("User-Agent", "probe/1")]

    # When a client asks for a task with repeated query parameters and headers
    before = time.time()
    send_raw(api, "GET", "/task/task-42?b=2&a=1&a=3&empty=", headers)

    # Then the function sees the same request the way API Gateway would show it
    function_name, event = fake.calls[0]
    assert function_name == "GetTaskFunction"
    assert event["routeKey"] == event["requestContext"]["routeKey"] == "GET /task/{id}"
    assert event["rawPath"] == event["requestContext"]["http"]["path"] == "/task/task-42"
    assert event["pathParameters"] == {"id": "task-42"}
    assert event["rawQueryString"] == "b=2&a=1&a=3&empty="
    assert event["queryStringParameters"] == {"b": "2", "a": "1,3", "empty": ""}
    assert event["headers"]["x-trace"] == "a,b"
    assert all(name == name.lower() for name in event["headers"])
    assert event["cookies"] == ["session=abc", "theme=dark"]
    assert "cookie" not in event["headers"]
    http_context = event["requestContext"]["http"]
    assert http_context == {
        "method": "GET",
        "path": "/task/task-42",
        "protocol": "HTTP/1.1",
        "sourceIp": "127.0.0.1",
        "userAgent": "probe/1",
    }
    context = event["requestContext"]
    assert context["stage"] == "$default"
    assert context["apiId"] == "localapi"
    assert re.fullmatch(r"\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} \+0000", context["time"])
    assert before * 1000 - 1000 <= context["timeEpoch"] <= time.time() * 1000 + 1000
    assert "body" not in event
    assert event["isBase64Encoded"] is False


def test_percent_encoded_path_values_are_decoded(start_api: StartApi) -> None:
    # Given a greedy route
    fake = FakeLambda()
    api = start_api([Route("GET", "/files/{proxy+}", "Fn", iam_auth=False)], fake)

    # When the path carries encoded characters over several segments
    requests.get(f"{api.url}/files/reports/q1%202026.pdf", timeout=5)

    # Then HTTP API semantics apply: path and parameters arrive decoded
    assert fake.event["pathParameters"] == {"proxy": "reports/q1 2026.pdf"}
    assert fake.event["rawPath"] == "/files/reports/q1 2026.pdf"


def test_text_body_is_passed_as_text(start_api: StartApi) -> None:
    # Given a POST route
    fake = FakeLambda()
    api = start_api([Route("POST", "/task", "Fn", iam_auth=False)], fake)

    # When a JSON body is posted
    requests.post(f"{api.url}/task", json={"name": "translate", "lang": "é"}, timeout=5)

    # Then the function gets the text untouched
    assert json.loads(fake.event["body"]) == {"name": "translate", "lang": "é"}
    assert fake.event["isBase64Encoded"] is False


def test_binary_body_is_base64_encoded(start_api: StartApi) -> None:
    # Given a POST route
    fake = FakeLambda()
    api = start_api([Route("POST", "/upload", "Fn", iam_auth=False)], fake)
    payload = bytes(range(256))

    # When bytes that are not UTF-8 text are posted
    requests.post(f"{api.url}/upload", data=payload, timeout=5)

    # Then the function gets them base64-encoded and flagged
    assert fake.event["isBase64Encoded"] is True
    assert base64.b64decode(fake.event["body"]) == payload


def test_most_specific_route_wins(start_api: StartApi) -> None:
    # Given overlapping routes
    fake = FakeLambda(result={"matched": True})
    routes = [
        Route("ANY", "$default", "Default", iam_auth=False),
        Route("GET", "/files/{proxy+}", "Greedy", iam_auth=False),
        Route("GET", "/files/{name}", "Param", iam_auth=False),
        Route("ANY", "/files/readme", "AnyLiteral", iam_auth=False),
        Route("GET", "/files/readme", "GetLiteral", iam_auth=False),
    ]
    api = start_api(routes, fake)

    # When requests hit each kind of route
    requests.get(f"{api.url}/files/readme", timeout=5)
    requests.post(f"{api.url}/files/readme", timeout=5)
    requests.get(f"{api.url}/files/notes", timeout=5)
    requests.get(f"{api.url}/files/a/b", timeout=5)
    requests.delete(f"{api.url}/elsewhere", timeout=5)

    # Then literal beats parameter beats greedy, exact method beats ANY, and $default catches the rest
    assert [(name, event["routeKey"], event.get("pathParameters")) for name, event in fake.calls] == [
        ("GetLiteral", "GET /files/readme", None),
        ("AnyLiteral", "ANY /files/readme", None),
        ("Param", "GET /files/{name}", {"name": "notes"}),
        ("Greedy", "GET /files/{proxy+}", {"proxy": "a/b"}),
        ("Default", "$default", None),
    ]


def test_named_stage_is_part_of_the_url_but_not_of_the_route(start_api: StartApi) -> None:
    # Given an API deployed to a named stage
    fake = FakeLambda()
    api = start_api([Route("GET", "/task/{id}", "Fn", iam_auth=False)], fake, stage="prod")

    # When the task is requested with and without the stage prefix
    with_stage = requests.get(f"{api.url}/prod/task/7", timeout=5)
    without_stage = requests.get(f"{api.url}/task/7", timeout=5)

    # Then only the prefixed URL reaches the function, which sees the stage in rawPath but not in the route
    assert with_stage.status_code == 200
    assert without_stage.status_code == 404
    assert fake.event["routeKey"] == "GET /task/{id}"
    assert fake.event["rawPath"] == "/prod/task/7"
    assert fake.event["requestContext"]["stage"] == "prod"


# --- the response --------------------------------------------------------------------------------------------------


def test_result_with_status_code_becomes_the_http_response(start_api: StartApi) -> None:
    # Given a function answering in the payload 2.0 response format
    fake = FakeLambda(
        result={
            "statusCode": 202,
            "headers": {"Location": "/task/7", "Retry-After": 5, "Content-Type": "application/json"},
            "cookies": ["session=abc; HttpOnly", "theme=dark"],
            "multiValueHeaders": {"X-Ignored": ["format 2.0 drops these"]},
            "body": '{"taskId": "7"}',
        }
    )
    api = start_api([Route("POST", "/task", "Fn", iam_auth=False)], fake)

    # When a client calls it
    response = send_raw(api, "POST", "/task", [])

    # Then status, headers, one Set-Cookie per cookie and body come through; multiValueHeaders does not
    assert response.status == 202
    assert response.getheader("Location") == "/task/7"
    assert response.getheader("Retry-After") == "5"
    assert response.getheader("Content-Type") == "application/json"
    assert response.headers.get_all("Set-Cookie") == ["session=abc; HttpOnly", "theme=dark"]
    assert response.getheader("X-Ignored") is None
    assert response.getheader("Apigw-Requestid") == fake.event["requestContext"]["requestId"]


def test_response_body_and_default_content_type(start_api: StartApi) -> None:
    # Given a function returning a body without a content type
    fake = FakeLambda(result={"statusCode": 200, "body": "plain words"})
    api = start_api([Route("GET", "/text", "Fn", iam_auth=False)], fake)

    # When a client calls it
    response = requests.get(f"{api.url}/text", timeout=5)

    # Then the body arrives as sent, typed as text the way HTTP APIs default it
    assert response.text == "plain words"
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"


def test_base64_encoded_result_body_is_decoded_for_the_client(start_api: StartApi) -> None:
    # Given a function returning binary content base64-encoded
    image = b"\x89PNG\r\n\x1a\n\x00\x01"
    fake = FakeLambda(
        result={
            "statusCode": 200,
            "headers": {"Content-Type": "image/png"},
            "body": base64.b64encode(image).decode(),
            "isBase64Encoded": True,
        }
    )
    api = start_api([Route("GET", "/logo", "Fn", iam_auth=False)], fake)

    # When a client downloads it
    response = requests.get(f"{api.url}/logo", timeout=5)

    # Then the client receives the raw bytes
    assert response.content == image


def test_result_without_status_code_is_a_200_json_body(start_api: StartApi) -> None:
    # Given a function returning a bare dict
    fake = FakeLambda(result={"taskId": "7", "status": "RUNNING"})
    api = start_api([Route("GET", "/task/{id}", "Fn", iam_auth=False)], fake)

    # When a client calls it
    response = requests.get(f"{api.url}/task/7", timeout=5)

    # Then API Gateway's assumption applies: 200 with the result as JSON
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {"taskId": "7", "status": "RUNNING"}


def test_unknown_route_is_404_not_found(start_api: StartApi) -> None:
    # Given an API without a $default route
    fake = FakeLambda()
    api = start_api([Route("GET", "/task/{id}", "Fn", iam_auth=False)], fake)

    # When a client calls a path or method no route covers
    wrong_path = requests.get(f"{api.url}/nothing/here", timeout=5)
    wrong_method = requests.delete(f"{api.url}/task/7", timeout=5)

    # Then both get API Gateway's 404 and no function runs
    for response in (wrong_path, wrong_method):
        assert response.status_code == 404
        assert response.json() == {"message": "Not Found"}
    assert fake.calls == []


def test_function_error_is_500_internal_server_error(start_api: StartApi) -> None:
    # Given a function that raises
    fake = FakeLambda(error=RuntimeError("boom"))
    api = start_api([Route("GET", "/task/{id}", "Fn", iam_auth=False)], fake)

    # When a client calls it
    response = requests.get(f"{api.url}/task/7", timeout=5)

    # Then the client sees API Gateway's generic 500, not the error's details
    assert response.status_code == 500
    assert response.json() == {"message": "Internal Server Error"}


class Throttled(Exception):
    """What the dispatcher raises when Lambda throttles the function (the offline cloud's is runtime.lambdas')."""


def test_a_throttled_function_is_500_and_one_log_line(start_api: StartApi, caplog: pytest.LogCaptureFixture) -> None:
    # Given a function Lambda throttles (at its concurrency limit: in a new account, ten executions for all functions)
    fake = FakeLambda(error=Throttled("Rate Exceeded."))
    api = start_api([Route("GET", "/task/{id}", "Fn", iam_auth=False)], fake, throttled=(Throttled,))

    # When a client calls it
    response = requests.get(f"{api.url}/task/7", timeout=5)

    # Then the client sees API Gateway's 500, as for any failed invocation
    assert response.status_code == 500
    assert response.json() == {"message": "Internal Server Error"}
    # and the log says so in one line, without a traceback: an expected condition, not a failure of the emulator
    logged = [record for record in caplog.records if record.name == "localcloud.httpapi"]
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in logged] == [
        ("WARNING", "Fn throttled handling GET /task/{id}: Rate Exceeded.", None)
    ]


class HeldLambda(FakeLambda):
    """A function whose invocation lasts until the test lets it answer."""

    def __init__(self) -> None:
        super().__init__()
        self.invoked, self.answer = threading.Event(), threading.Event()

    def __call__(self, function_name: str, event: dict[str, Any]) -> Any:
        self.invoked.set()
        assert self.answer.wait(timeout=30), "the test never let the function answer"
        return super().__call__(function_name, event)


def test_the_clouds_own_work_waits_while_a_request_is_served(
    start_api: StartApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a request being served (its function invoked, not yet answered)
    monkeypatch.setattr(REQUESTS, "patience", 60.0)  # longer than this test: the wait ends with the request
    fake = HeldLambda()
    api = start_api([Route("GET", "/task/{id}", "Fn", iam_auth=False)], fake)
    with ThreadPoolExecutor(2) as pool:
        response = pool.submit(requests.get, f"{api.url}/task/7", timeout=30)
        assert fake.invoked.wait(timeout=10)
        # When the cloud's own work (a state of an execution) asks to go on
        work = pool.submit(REQUESTS.wait_until_answered)
        # Then it waits for the request
        deadline = time.monotonic() + 10
        while not REQUESTS.waiting:
            assert time.monotonic() < deadline, "the work never waited"
            time.sleep(0.01)
        assert not work.done()
        # And goes on once the request is answered
        fake.answer.set()
        assert response.result().status_code == 200
        work.result(timeout=10)
    assert REQUESTS.waiting == 0


def test_a_stream_of_requests_delays_the_clouds_work_by_its_patience_at_most() -> None:
    # Given requests that are always being served, and a patience of 50 ms
    requests_served = Requests(patience=0.05)
    with requests_served.serving(), ThreadPoolExecutor(1) as pool:
        # When the cloud's own work asks to go on, it goes on while they are
        pool.submit(requests_served.wait_until_answered).result(timeout=10)
        assert requests_served.waiting == 0


def test_malformed_function_response_is_500(start_api: StartApi) -> None:
    # Given a function whose statusCode is not a status code
    fake = FakeLambda(result={"statusCode": "accepted", "body": "?"})
    api = start_api([Route("GET", "/task/{id}", "Fn", iam_auth=False)], fake)

    # When a client calls it
    response = requests.get(f"{api.url}/task/7", timeout=5)

    # Then the client gets a 500, as API Gateway gives for an invalid integration response
    assert response.status_code == 500
    assert response.json() == {"message": "Internal Server Error"}


# --- AWS_IAM routes ------------------------------------------------------------------------------------------------


@pytest.fixture
def iam_api(start_api: StartApi) -> tuple[HttpApiServer, FakeLambda]:
    fake = FakeLambda(result={"statusCode": 200, "body": "signed in"})
    api = start_api([Route("ANY", "/task/{id}", "Fn", iam_auth=True)], fake)
    return api, fake


def test_request_signed_by_botocore_is_accepted_with_the_caller_in_the_authorizer(
    iam_api: tuple[HttpApiServer, FakeLambda],
) -> None:
    # Given an AWS_IAM route and a client signing with botocore, query parameters deliberately out of order
    api, fake = iam_api
    url = f"{api.url}/task/task-42_v1.2~x?z=last&a=1&a=0&m="
    body = b'{"status": "done"}'
    headers = botocore_signed("POST", url, body, headers={"Content-Type": "application/json"})

    # When the signed request is sent
    response = requests.post(url, data=body, headers=headers, timeout=5)

    # Then it is served and the function learns who called
    assert response.status_code == 200, response.text
    assert response.text == "signed in"
    assert fake.event["pathParameters"] == {"id": "task-42_v1.2~x"}
    assert fake.event["requestContext"]["authorizer"] == {
        "iam": {
            "accessKey": ALICE.access_key_id,
            "accountId": ALICE.account_id,
            "callerId": ALICE.user_id,
            "cognitoIdentity": None,
            "principalOrgId": None,
            "userArn": ALICE.user_arn,
            "userId": ALICE.user_id,
        }
    }


def test_request_signed_by_hand_with_requests_is_accepted(iam_api: tuple[HttpApiServer, FakeLambda]) -> None:
    # Given a request signed from the SigV4 specification, signing user-agent too (botocore never would)
    api, fake = iam_api
    url = f"{api.url}/task/task-42?status=done&attempt=2&note=a%20b"
    body = b'{"status": "done"}'
    headers = hand_signed("PUT", url, body, {"Content-Type": "application/json", "User-Agent": "callback-kit-tests/1"})

    # When requests sends it
    response = requests.put(url, data=body, headers=headers, timeout=5)

    # Then it is accepted and the query arrives decoded
    assert response.status_code == 200, response.text
    assert fake.event["queryStringParameters"] == {"status": "done", "attempt": "2", "note": "a b"}
    assert fake.event["requestContext"]["authorizer"]["iam"]["userArn"] == ALICE.user_arn


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_request_signed_by_curl_is_accepted(iam_api: tuple[HttpApiServer, FakeLambda]) -> None:
    # Given curl's built-in signer. curl before 8.x signs the query unsorted (curl/curl#9717), which AWS rejects as
    # well, so the parameters are written in canonical order here.
    api, fake = iam_api
    url = f"{api.url}/task/task-42?a=1&b=2"

    # When curl posts a signed body
    completed = subprocess.run(
        [
            "curl", "--silent", "--show-error", "--max-time", "5",
            "--aws-sigv4", f"aws:amz:{REGION}:execute-api",
            "--user", f"{ALICE.access_key_id}:{ALICE.secret_access_key}",
            "--header", "Content-Type: application/json", "--data", '{"status":"done"}',
            "--write-out", "\n%{http_code}", url,
        ],
        capture_output=True, text=True, check=True, timeout=10,
    )  # fmt: skip

    # Then it is accepted
    body, _, status = completed.stdout.rpartition("\n")
    assert status == "200", body
    assert fake.event["body"] == '{"status":"done"}'
    assert fake.event["requestContext"]["authorizer"]["iam"]["accessKey"] == ALICE.access_key_id


def test_unsigned_request_is_forbidden(iam_api: tuple[HttpApiServer, FakeLambda]) -> None:
    # Given an AWS_IAM route
    api, fake = iam_api

    # When a client calls it without signing
    response = requests.get(f"{api.url}/task/7", timeout=5)

    # Then it is refused before the function runs
    assert_forbidden(response, fake, "Forbidden")


def test_tampered_body_is_forbidden(iam_api: tuple[HttpApiServer, FakeLambda]) -> None:
    # Given a request signed for one body
    api, fake = iam_api
    url = f"{api.url}/task/7"
    headers = botocore_signed("POST", url, b'{"amount": 1}')

    # When a different body is sent under that signature
    response = requests.post(url, data=b'{"amount": 1000}', headers=headers, timeout=5)

    # Then the signature no longer matches
    assert_forbidden(response, fake, SIGNATURE_MISMATCH)


def test_tampered_body_with_its_original_content_hash_is_forbidden(
    iam_api: tuple[HttpApiServer, FakeLambda],
) -> None:
    # Given a request whose signature covers an x-amz-content-sha256 header rather than the body itself
    api, fake = iam_api
    url = f"{api.url}/task/7"
    original = b'{"amount": 1}'
    headers = botocore_signed(
        "POST", url, original, headers={"X-Amz-Content-SHA256": hashlib.sha256(original).hexdigest()}
    )

    # When a different body is sent with the signature and hash still matching each other
    response = requests.post(url, data=b'{"amount": 1000}', headers=headers, timeout=5)

    # Then the body is checked against the declared hash and refused
    assert_forbidden(response, fake, "The provided 'x-amz-content-sha256' header does not match what was computed.")


def test_unknown_access_key_is_forbidden(iam_api: tuple[HttpApiServer, FakeLambda]) -> None:
    # Given a correctly signed request from keys the API does not know
    api, fake = iam_api
    url = f"{api.url}/task/7"
    headers = botocore_signed("GET", url, key="AKIAEXAMPLEMALLORY", secret="mallory-secret")

    # When it is sent
    response = requests.get(url, headers=headers, timeout=5)

    # Then it is refused
    assert_forbidden(response, fake, "The security token included in the request is invalid.")


def test_known_key_with_wrong_secret_is_forbidden(iam_api: tuple[HttpApiServer, FakeLambda]) -> None:
    # Given Alice's key id signed with someone else's secret
    api, fake = iam_api
    url = f"{api.url}/task/7"
    headers = botocore_signed("GET", url, secret="guessed-secret")

    # When it is sent
    response = requests.get(url, headers=headers, timeout=5)

    # Then it is refused
    assert_forbidden(response, fake, SIGNATURE_MISMATCH)


def test_signature_for_another_service_is_forbidden(iam_api: tuple[HttpApiServer, FakeLambda]) -> None:
    # Given a request signed for Lambda rather than execute-api
    api, fake = iam_api
    url = f"{api.url}/task/7"
    headers = botocore_signed("GET", url, service="lambda")

    # When it is sent to the API
    response = requests.get(url, headers=headers, timeout=5)

    # Then it is refused
    assert_forbidden(response, fake, "Credential should be scoped to correct service: 'execute-api'. ")


def test_signature_for_another_region_is_forbidden(iam_api: tuple[HttpApiServer, FakeLambda]) -> None:
    # Given a request signed for another region
    api, fake = iam_api
    url = f"{api.url}/task/7"
    headers = botocore_signed("GET", url, region="eu-west-1")

    # When it is sent
    response = requests.get(url, headers=headers, timeout=5)

    # Then it is refused
    assert_forbidden(response, fake, "Credential should be scoped to a valid region. ")


def test_stale_signature_is_forbidden(iam_api: tuple[HttpApiServer, FakeLambda]) -> None:
    # Given a request signed six minutes ago, beyond the five minutes of clock skew AWS allows
    api, fake = iam_api
    url = f"{api.url}/task/7"
    headers = hand_signed("GET", url, b"", {}, at=datetime.now(UTC) - timedelta(minutes=6))

    # When it is replayed now
    response = requests.get(url, headers=headers, timeout=5)

    # Then it is refused as expired
    assert response.status_code == 403
    assert response.json()["message"].startswith("Signature expired: ")
    assert fake.calls == []


def test_route_without_iam_needs_no_signature_and_has_no_authorizer(start_api: StartApi) -> None:
    # Given an API with a public route next to an IAM route
    fake = FakeLambda()
    api = start_api(
        [Route("GET", "/health", "Public", iam_auth=False), Route("GET", "/task/{id}", "Private", iam_auth=True)], fake
    )

    # When an unsigned client calls the public route
    response = requests.get(f"{api.url}/health", timeout=5)

    # Then it is served and the event carries no authorizer
    assert response.status_code == 200
    assert fake.calls[0][0] == "Public"
    assert "authorizer" not in fake.event["requestContext"]


def test_a_burst_of_clients_connecting_at_once_is_served_not_reset(start_api: StartApi) -> None:
    # Given an API
    fake = FakeLambda()
    api = start_api([Route("GET", "/health", "Public", iam_auth=False)], fake)
    host, port = urlsplit(api.url).netloc.split(":")
    start = threading.Barrier(64)
    statuses: list[int | str] = []

    def client() -> None:
        start.wait()
        try:
            connection = http.client.HTTPConnection(host, int(port), timeout=30)
            connection.request("GET", "/health")
            statuses.append(connection.getresponse().status)
            connection.close()
        except OSError as exc:  # a reset connection
            statuses.append(type(exc).__name__)

    # When 64 clients open a connection at the same instant
    overflows = listen_overflows()
    threads = [threading.Thread(target=client) for _ in range(64)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then every one is answered, and none had to retry: the kernel dropped no connection for a full listen backlog
    assert statuses == [200] * 64
    assert listen_overflows() == overflows


def listen_overflows() -> int:
    """The kernel's count of connections dropped because a listen backlog was full (TcpExt ListenOverflows)."""
    lines = [line.split() for line in Path("/proc/net/netstat").read_text().splitlines() if line.startswith("TcpExt:")]
    return int(dict(zip(lines[0], lines[1], strict=True))["ListenOverflows"])
