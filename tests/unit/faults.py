"""Injected AWS faults: an operation of one of the functions' own clients fails as a throttled, failing or unreachable
service does once botocore's own retries are spent (the caller sees the ClientError or connection error it would see).

    fail(client("stepfunctions"), "SendTaskHeartbeat", times=1)  # the next call is throttled, later ones go through

The fault answers from botocore's `before-call` event, the hook botocore's Stubber uses, so the request never reaches
moto; `when` picks the calls to fail by their API parameters (e.g. one task token of many).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError

CONNECTION_LOST = "connection lost"  # `code` that raises botocore's EndpointConnectionError instead of answering


class Fault:
    def __init__(
        self,
        code: str,
        status: int,
        times: int | None,
        when: Callable[[dict[str, Any]], bool] | None,
    ) -> None:
        self.code, self.status, self.times, self.when = code, status, times, when
        self.failed = 0
        self._lock = threading.Lock()

    def __call__(self, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        body = params.get("body") or b"{}"
        if self.when is not None and not self.when(json.loads(body)):
            return None
        with self._lock:
            if self.times is not None and self.failed >= self.times:
                return None
            self.failed += 1
        if self.code == CONNECTION_LOST:
            raise EndpointConnectionError(endpoint_url=params.get("url", "https://offline"))
        error = {"Error": {"Code": self.code, "Message": f"injected {self.code}"}}
        metadata = {"ResponseMetadata": {"HTTPStatusCode": self.status, "HTTPHeaders": {}}}
        return AWSResponse(params.get("url", ""), self.status, {}, None), {**error, **metadata}


def fail(
    client: Any,
    operation: str,
    code: str = "ThrottlingException",
    status: int = 400,
    times: int | None = None,
    when: Callable[[dict[str, Any]], bool] | None = None,
) -> Fault:
    """Make `operation` (e.g. "PutItem") of `client` fail with `code` (every call, or the first `times` calls that
    `when` selects by their parameters); return the fault, which counts the calls it failed."""
    fault = Fault(code, status, times, when)
    service = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register_first(f"before-call.{service}.{operation}", fault)
    return fault
