"""The endpoint guard every test runs under (installed by tests/conftest.py for the whole session, every thread).

Name resolution is where every client meets the network (botocore, urllib3, requests), so the guard sits there: a
public AWS endpoint name is refused; the offline cloud (127.0.0.1) and localhost resolve as usual.
"""

from __future__ import annotations

import os
import socket
from typing import Any

# The one run the guard lets through: the state tier against an AWS account, when this names a role there
# (tests/conftest.py, tests/statemachines/conftest.py).
ON_AWS = "TESTSTATE_AWS_ROLE_ARN"
# Public AWS endpoints (commercial, China, dual-stack); the offline cloud serves on 127.0.0.1.
AWS_DOMAINS = ("amazonaws.com", "amazonaws.com.cn", "api.aws")
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}


class AwsEndpointRefusedError(socket.gaierror):
    """A test tried to reach a real AWS endpoint."""


def is_aws_endpoint(host: str | bytes | None) -> bool:
    name = (host.decode() if isinstance(host, bytes) else host or "").lower().rstrip(".")
    return any(name == domain or name.endswith(f".{domain}") for domain in AWS_DOMAINS)


_resolve = socket.getaddrinfo


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if is_aws_endpoint(host):
        raise AwsEndpointRefusedError(socket.EAI_NONAME, f"tests never reach AWS: refused to resolve {host}")
    return _resolve(host, *args, **kwargs)


def install() -> None:
    """Fake credentials for every client, and no public AWS endpoint resolves (in every thread)."""
    os.environ.pop("AWS_PROFILE", None)
    os.environ.update(FAKE_CREDENTIALS)
    socket.getaddrinfo = _guarded_getaddrinfo


def uninstall() -> None:
    socket.getaddrinfo = _resolve
