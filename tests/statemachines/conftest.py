"""The state tier: this project's own states (statemachines/*.asl.json), one at a time, through Step Functions'
TestState, each with its work mocked (a result, or an error): every Retry, Catch and Choice of the waiting states
and of the states that start and end their waits.

The same tests run in two places:
- offline, by default and in CI: on the offline cloud's endpoint (localcloud.simulators.teststate);
- on AWS, when TESTSTATE_AWS_ROLE_ARN names a role of the account to test in:
  `TESTSTATE_AWS_ROLE_ARN=arn:aws:iam::<account>:role/<role> AWS_PROFILE=<profile> AWS_REGION=<region>
  .venv/bin/python -m pytest tests/statemachines`. The environment's credentials and Region are used and the role is
  passed to every call; nothing is deployed and, every Task being mocked, nothing is called. tests/conftest.py lets
  this tier alone reach AWS, and never in CI.

What is asserted holds in both places. A retrier with `JitterStrategy: FULL` waits a random time up to its backoff
ceiling; AWS does not document which TestState reports (the offline cloud reports the ceiling), so a jittered wait is
asserted within its ceiling.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from localcloud.aslcheck import substitute
from localcloud.cloud import CloudConfig, LocalCloud
from tests.aws_guard import ON_AWS

ROOT = Path(__file__).resolve().parents[2]
# The offline endpoint needs a cloud, and a cloud a stack: the lightest there is (one function).
OFFLINE_STACK = ROOT / "tests" / "localcloud" / "fixtures" / "account" / "template.yaml"
# Lambda refusing or losing an invoke, and the retrier every plain invoke of the workflows carries for it: six
# retries, jittered, each at most 1, 2, 4, 8, 16 and 30 s (the MaxDelaySeconds)
LAMBDA_INVOKE_ERRORS = [
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
]
LAMBDA_INVOKE_BACKOFFS = [1, 2, 4, 8, 16, 30]


@functools.cache
def definition(machine: str) -> str:
    """statemachines/<machine>.asl.json with its ${DefinitionSubstitutions} filled as `make lint` fills them
    (localcloud.aslcheck: an ARN for `...Arn`, the bare name otherwise): plausible values, as nothing is called."""
    return substitute((ROOT / "statemachines" / f"{machine}.asl.json").read_text())


@dataclass(frozen=True)
class StateCaller:
    """TestState of one state of one of our state machines, at the DEBUG level."""

    client: Any
    role_arn: str | None  # on AWS, passed with every call

    def __call__(
        self,
        machine: str,
        state: str,
        state_input: dict[str, Any],
        *,
        result: Any = None,
        error: str | None = None,
        retries: int = 0,
        validation: str | None = None,
        caused_by: str | None = None,
    ) -> dict[str, Any]:
        """The answer for `state` given `state_input`, its work mocked by `result` or `error` (its cause is
        "mocked <error>"), after `retries` retries; `validation` is the mock's fieldValidationMode (STRICT when
        unsaid), `caused_by` the state inside a Parallel or Map that raised `error`."""
        request: dict[str, Any] = {
            "definition": definition(machine),
            "stateName": state,
            "input": json.dumps(state_input),
            "inspectionLevel": "DEBUG",
        }
        if self.role_arn:
            request["roleArn"] = self.role_arn
        if result is not None:
            request["mock"] = {"result": json.dumps(result), "fieldValidationMode": validation or "STRICT"}
        if error is not None:
            request["mock"] = {"errorOutput": {"error": error, "cause": f"mocked {error}"}}
        configuration = {"retrierRetryCount": retries} if retries else {}
        if caused_by:
            configuration["errorCausedByState"] = caused_by
        if configuration:
            request["stateConfiguration"] = configuration
        answer = dict(self.client.test_state(**request))
        answer.pop("ResponseMetadata")
        return answer


@pytest.fixture(scope="module")
def teststate() -> Iterator[StateCaller]:
    role_arn = os.environ.get(ON_AWS)
    if role_arn:
        yield StateCaller(boto3.client("stepfunctions"), role_arn)
        return
    # A cloud per module: one kept for the session would hold moto patched under the unit tests that follow
    config = CloudConfig(template=OFFLINE_STACK, stack_name="state-tier", aws_port=0, http_port=0)
    with LocalCloud(config) as cloud:
        # TestState's endpoint has a host prefix (`sync-`) no local address takes
        client = boto3.client(
            "stepfunctions",
            endpoint_url=cloud.aws_endpoint,
            region_name=config.region,
            config=Config(inject_host_prefix=False),
        )
        yield StateCaller(client, None)


def output(answer: dict[str, Any]) -> Any:
    return json.loads(answer["output"])


def inspected(answer: dict[str, Any], field: str) -> Any:
    return json.loads(answer["inspectionData"][field])


def retried(
    teststate: StateCaller,
    machine: str,
    state: str,
    state_input: dict[str, Any],
    error: str,
    backoffs: list[int],
    *,
    jitter: bool = False,
) -> dict[str, Any]:
    """Assert that `state`'s first Retry retries `error` once per backoff, waiting that many seconds before each (at
    most that many, for a jittered retrier); the answer once those retries are spent."""
    for count, backoff in enumerate(backoffs):
        answer = teststate(machine, state, state_input, error=error, retries=count)
        assert answer["status"] == "RETRIABLE", (count, answer)
        details = answer["inspectionData"]["errorDetails"]
        assert details["retryIndex"] == 0
        waited = details["retryBackoffIntervalSeconds"]
        assert 0 <= waited <= backoff if jitter else waited == backoff, (count, waited)
    return teststate(machine, state, state_input, error=error, retries=len(backoffs))


def caught(answer: dict[str, Any]) -> tuple[str, str, str]:
    """(status, next state, the error) of an answer."""
    return answer["status"], answer.get("nextState", ""), answer.get("error", "")
