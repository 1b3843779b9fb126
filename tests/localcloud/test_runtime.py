"""The offline Lambda runtime runs each function's built artifact as Lambda does: only its package and the runtime's
boto3, one invocation per worker, Timeout, MemorySize and ReservedConcurrentExecutions enforced, logs captured."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from localcloud.client import wait_for_execution
from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.runtime.lambdas import FunctionError
from localcloud.simulators import Simulator
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator
from tests.localcloud.simulated import wait_for

FIXTURE = Path(__file__).parent / "fixtures" / "runtime" / "template.yaml"


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    log = tmp_path_factory.mktemp("runtime") / "functions.log"
    # An established account: the fixture reserves concurrency, which a new account refuses (test_account.py)
    config = CloudConfig(
        template=FIXTURE, stack_name="runtime", aws_port=0, http_port=0, function_log=log, account="established"
    )
    with LocalCloud(config) as running:
        yield running


def function_name(cloud: LocalCloud, logical_id: str) -> str:
    return next(r.physical_id for r in cloud.stack.resources if r.logical_id == logical_id)


def starts(cloud: LocalCloud, name: str) -> int:
    """How many invocations of the function began, from its START log lines."""
    return sum(line.startswith(f"[{name}] START ") for line in cloud.function_log.read_text().splitlines())


def invoke(cloud: LocalCloud, logical_id: str, event: Any) -> dict[str, Any]:
    """Invoke through the Lambda API, as a client would, without the SDK's retries."""
    client = boto3.client(
        "lambda", region_name=cloud.config.region, config=Config(retries={"total_max_attempts": 1, "mode": "standard"})
    )
    response = client.invoke(FunctionName=function_name(cloud, logical_id), Payload=json.dumps(event))
    response["Payload"] = json.loads(response["Payload"].read())
    return response  # type: ignore[no-any-return]


def test_a_module_missing_from_the_package_fails_at_init_as_on_aws(cloud: LocalCloud) -> None:
    # Given a function whose code imports `requests`, which the developer's environment has and its package lacks
    assert importlib.util.find_spec("requests") is not None
    # When it is invoked
    response = invoke(cloud, "UnpackagedFunction", {})
    # Then the init fails as Lambda's runtime reports it
    assert response["FunctionError"] == "Unhandled"
    assert response["Payload"]["errorType"] == "Runtime.ImportModuleError"
    assert response["Payload"]["errorMessage"] == (
        "Unable to import module 'handlers.needs_requests': No module named 'requests'"
    )
    assert response["Payload"]["stackTrace"] == []  # the runtime reports an import error without frames


def test_a_function_that_runs_past_its_timeout_is_stopped_and_reported_as_lambda_does(cloud: LocalCloud) -> None:
    # Given SleepFunction with Timeout 1
    # When it is asked to run for 5 seconds
    response = invoke(cloud, "SleepFunction", {"seconds": 5})
    # Then the invocation ends with Lambda's timeout error
    assert response["Payload"]["errorType"] == "Sandbox.Timedout"
    assert response["Payload"]["errorMessage"].endswith("Task timed out after 1.00 seconds")
    # And a state machine can catch it by that name
    sfn = cloud.client("stepfunctions")
    execution = sfn.start_execution(stateMachineArn=cloud.stack.outputs["SleepMachineArn"], input='{"seconds": 5}')
    described = wait_for_execution(cloud, execution["executionArn"], timeout=60, show=False)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"])["error"]["Error"] == "Sandbox.Timedout"
    # And the next invocation gets a fresh environment and succeeds
    assert invoke(cloud, "SleepFunction", {"seconds": 0})["Payload"]["slept"] == 0


def test_a_function_that_uses_more_than_its_memory_size_is_killed(cloud: LocalCloud) -> None:
    # Given HogFunction with MemorySize 128
    # When it holds 300 MB
    response = invoke(cloud, "HogFunction", {"mb": 300})
    # Then it is killed as out of memory
    assert response["Payload"]["errorType"] == "Runtime.OutOfMemory"
    # And within its memory size it runs
    assert invoke(cloud, "HogFunction", {"mb": 8, "hold_seconds": 0})["Payload"] == {"held_mb": 8}


def test_invocations_beyond_reserved_concurrency_are_throttled(cloud: LocalCloud, tmp_path: Path) -> None:
    # Given LimitedFunction (ReservedConcurrentExecutions 1) busy with one invocation
    release = tmp_path / "release"
    name = function_name(cloud, "LimitedFunction")
    first: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: first.update(invoke(cloud, "LimitedFunction", {"until": str(release)})))
    thread.start()
    wait_for(lambda: cloud.runtime.in_flight(name) == 1, timeout=30, what="the first invocation")
    # When a second one arrives
    with pytest.raises(ClientError) as throttled:
        invoke(cloud, "LimitedFunction", {"until": str(release)})
    # Then it is refused with Lambda's throttling error, and the first one is not disturbed
    assert throttled.value.response["Error"]["Code"] == "TooManyRequestsException"
    assert throttled.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429
    release.touch()
    thread.join(timeout=30)
    assert first["Payload"] == {"released": True}
    # And once it is done the function takes invocations again, in its warm environment
    assert invoke(cloud, "LimitedFunction", {"until": str(release)})["Payload"] == {"released": True}
    assert cloud.runtime.cold_starts(name) == 1


def test_asynchronous_invocations_wait_for_a_free_environment_instead_of_failing(
    cloud: LocalCloud, tmp_path: Path
) -> None:
    # Given LimitedFunction (ReservedConcurrentExecutions 1)
    release = tmp_path / "release"
    name = function_name(cloud, "LimitedFunction")
    before = starts(cloud, name)
    # When three events arrive at once
    for _ in range(3):
        cloud.runtime.invoke_async(name, {"until": str(release)})
    wait_for(lambda: cloud.runtime.in_flight(name) == 1, timeout=30, what="one running invocation")
    release.touch()
    cloud.runtime.drain(timeout=60)
    # Then all three ran, one after the other in the one environment, none throttled into a failure
    assert starts(cloud, name) == before + 3
    assert cloud.runtime.cold_starts(name) == 1


def test_warm_invocations_reuse_the_environment_and_logs_are_captured_per_function(cloud: LocalCloud) -> None:
    # Given SleepFunction
    name = function_name(cloud, "SleepFunction")
    # When it is invoked twice in a row
    first = invoke(cloud, "SleepFunction", {"seconds": 0})["Payload"]
    second = invoke(cloud, "SleepFunction", {"seconds": 0})["Payload"]
    # Then both ran, each with its own request id
    assert first["request_id"] != second["request_id"]
    # And each invocation's output is in the function log with the function's name, between START and REPORT
    lines = [line for line in cloud.function_log.read_text().splitlines() if second["request_id"] in line]
    assert lines[0] == f"[{name}] START RequestId: {second['request_id']} Version: $LATEST"
    assert lines[-1].startswith(f"[{name}] REPORT RequestId: {second['request_id']}\tDuration: ")
    assert f'[{name}] {{"level": "INFO", "message": "sleeping", "seconds": 0}}' in cloud.function_log.read_text()


def test_the_runtime_error_reaches_the_caller_in_process(cloud: LocalCloud) -> None:
    # Given the offline cloud's own invoke path (used by the HTTP API and pollers)
    # When a function fails to import
    with pytest.raises(FunctionError) as failed:
        cloud.runtime.invoke(function_name(cloud, "UnpackagedFunction"), {})
    # Then the error carries Lambda's payload
    assert failed.value.payload["errorType"] == "Runtime.ImportModuleError"


@pytest.mark.parametrize(
    "simulator,command,key",
    [
        (TranslateSimulator, ["translate", "list-text-translation-jobs"], "TextTranslationJobPropertiesList"),
        (MacieSimulator, ["macie2", "list-findings"], "findingIds"),
    ],
)
def test_simulated_services_answer_the_aws_cli_on_the_endpoint(
    cloud: LocalCloud, simulator: type[Simulator], command: list[str], key: str
) -> None:
    # Given a simulated service of the offline cloud
    cloud.add_simulator(simulator(cloud.config.region))
    # When the stock AWS CLI calls it on the offline cloud's endpoint (what a function's worker does too)
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("aws")),
            "--endpoint-url",
            cloud.aws_endpoint,
            "--output",
            "json",
            *command,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={
            **os.environ,
            "AWS_ACCESS_KEY_ID": "any",
            "AWS_SECRET_ACCESS_KEY": "any",
            "AWS_DEFAULT_REGION": "us-east-1",
        },
    )
    # Then the simulator answers in the service's shape
    assert done.returncode == 0, done.stderr
    assert key in json.loads(done.stdout)
