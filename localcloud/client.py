"""A client of the offline cloud, for the tools and tests that drive it: follow an execution to its end, call the HTTP
API signed as an AWS SDK signs, and send the libraries' logs to the cloud's log file."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from localcloud.account import Credential
from localcloud.cloud import LocalCloud


def wait_for_execution(
    cloud: LocalCloud, execution_arn: str, timeout: float = 60.0, show: bool = True
) -> dict[str, Any]:
    """Poll an execution until it ends, printing each state it enters; return DescribeExecution."""
    sfn = cloud.client("stepfunctions")
    seen = 0
    deadline = time.monotonic() + timeout
    while True:
        described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
        events = sfn.get_execution_history(executionArn=execution_arn)["events"]
        for event in events[seen:]:
            if show and event["type"].endswith("StateEntered"):
                print(f"    -> {event['stateEnteredEventDetails']['name']}", flush=True)
        seen = len(events)
        if described["status"] != "RUNNING":
            return described
        if time.monotonic() > deadline:
            raise TimeoutError(f"{execution_arn} still RUNNING after {timeout:.0f}s")
        time.sleep(0.2)


def durable_history(cloud: LocalCloud, execution_arn: str) -> list[dict[str, Any]]:
    """A durable execution's history (GetDurableExecutionHistory), every page of it."""
    lambda_ = cloud.client("lambda")
    events: list[dict[str, Any]] = []
    page: dict[str, str] = {}
    while True:
        answer = lambda_.get_durable_execution_history(DurableExecutionArn=execution_arn, **page)
        events += answer["Events"]
        if not answer.get("NextMarker"):
            return events
        page = {"Marker": answer["NextMarker"]}


def route_logs(log_file: Path) -> None:
    """Send Python logging to `log_file` too (where the functions' log lines go), and moto's internals, werkzeug and
    Python warnings only there: moto's interpreter logs the errors it handles at ERROR, and its CloudFormation warns
    about the resource types the offline cloud emulates itself. The offline cloud's own records (progress such as a
    `sam build`, a function's exhausted async retries) still reach the console as well."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    to_file = logging.FileHandler(log_file, encoding="utf-8")
    to_file.setFormatter(logging.Formatter("[%(name)s] %(levelname)s %(message)s"))
    logging.captureWarnings(True)
    for name in ("moto", "werkzeug", "py.warnings"):
        library = logging.getLogger(name)
        library.addHandler(to_file)
        library.propagate = False
    logging.getLogger().addHandler(to_file)


class SignedClient:
    """An HTTP client of the offline cloud's HTTP API that signs every request with SigV4 (service execute-api),
    as `curl --aws-sigv4` or an AWS SDK would."""

    def __init__(self, base_url: str, credential: Credential, region: str = "us-east-1") -> None:
        self.base_url = base_url
        self.credentials = Credentials(credential.access_key_id, credential.secret_access_key)
        self.region = region
        self.session = requests.Session()

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, sign: bool = True
    ) -> requests.Response:
        data = body if isinstance(body, str | bytes) or body is None else json.dumps(body)
        request = AWSRequest(
            method=method,
            url=self.base_url + path,
            data=data,
            headers={"content-type": "application/json", **(headers or {})},
        )
        if sign:
            SigV4Auth(self.credentials, "execute-api", self.region).add_auth(request)
        return self.session.request(method, request.url, headers=dict(request.headers), data=request.body, timeout=30)
