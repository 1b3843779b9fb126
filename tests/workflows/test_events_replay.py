"""Every sample in events/ replayed through its function's built artifact in a worker, as `python -m localcloud invoke
<LogicalId> -e events/<file>` does (the offline `sam local invoke`): the packaged handler imports on the Lambda
runtime interpreter and answers the sample as its contract says. What each sample means for the function's logic is
tested in tests/unit/test_events.py; here the package is what is under test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator
from shared import exceptions

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "events").glob("*.json"))
# What a broken package looks like: the runtime's own errors (import, handler, marshalling, exit, limits) and an
# import that fails only when a code path first runs.
NAMED_ERRORS = {name for name, value in vars(exceptions).items() if isinstance(value, type)}
PACKAGE_DEFECTS = ("Runtime.", "Sandbox.", "ModuleNotFoundError", "ImportError")
# Samples that name resources of another deployment (a bucket, a Macie job the function confirms with Macie): on
# this stack their function answers with the AWS error for the missing resource, as it would on AWS.
NAMES_OTHER_RESOURCES = {
    "ensure_macie_log_group.create.json",  # its answer goes to the ResponseURL of `make local`'s stack (port 4566)
    "export_job.check-message.json",
    "publish_records.file.json",
    "resume_job.macie-bucket-access-denied.json",
    "resume_job.macie-job-cancelled.json",
    "resume_job.macie-job-completed.json",
    "tag_documents.tag.json",
    "tally_export_run.tally.json",
}


@pytest.fixture(scope="module", autouse=True)
def simulated_services(cloud: LocalCloud) -> None:
    """Translate and Macie answer the calls the samples make (HealthLake is the session's)."""
    cloud.add_simulator(TranslateSimulator(cloud.config.region))
    cloud.add_simulator(MacieSimulator(cloud.config.region))


def function_of(cloud: LocalCloud, sample: Path) -> str:
    """The logical ID of the function whose handler module names the sample (`<module>.<case>.json`)."""
    module = sample.name.split(".")[0]
    handlers = {r.properties["Handler"]: r.logical_id for r in cloud.stack.of_type("AWS::Lambda::Function")}
    return handlers[f"handlers.{module}.handler"]


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.name for s in SAMPLES])
def test_each_sample_runs_through_its_packaged_function(cloud: LocalCloud, sample: Path) -> None:
    # Given a sample event and the function it is for, deployed from its sam build artifact
    logical_id = function_of(cloud, sample)
    # When it is invoked with the sample
    response, failed = cloud.invoke_function(logical_id, json.loads(sample.read_text()))
    # Then the packaged handler ran and answered as its contract says: a result, or one of the project's named errors
    assert not response.get("errorType", "").startswith(PACKAGE_DEFECTS) if failed else response is not None, response
    if sample.name in NAMES_OTHER_RESOURCES:
        assert failed, response
    elif failed:  # a durable function's error type carries its module, as the durable execution SDK names it
        assert response["errorType"].removeprefix(f"{exceptions.__name__}.") in NAMED_ERRORS, response


def invoke_command(event: Path) -> subprocess.CompletedProcess[str]:
    """`python -m localcloud invoke RegisterTokenFunction -e <event>`, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "localcloud", "invoke", "RegisterTokenFunction", "-e", str(event)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_the_invoke_command_prints_the_response_and_the_logs_apart() -> None:
    # Given a sample for the registration function
    sample = ROOT / "events" / "register_token.register.json"
    # When `python -m localcloud invoke` runs it (as `sam local invoke` would)
    done = invoke_command(sample)
    # Then the response is the only thing on stdout, the function's log lines are on stderr, and it exits 0
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"status": "REGISTERED"}
    assert "REPORT RequestId:" in done.stderr


def test_the_invoke_command_exits_non_zero_when_the_function_fails(tmp_path: Path) -> None:
    # Given an event the registration function refuses
    event = tmp_path / "bad.json"
    event.write_text(json.dumps({"service": "translate"}))
    # When it is invoked
    done = invoke_command(event)
    # Then Lambda's error payload is printed and the exit code says it failed
    assert done.returncode == 1
    assert json.loads(done.stdout)["errorType"] == "ValidationError"


def test_every_function_has_a_sample(cloud: LocalCloud) -> None:
    # Given the functions of the stack (the export deployed too)
    modules = {r.properties["Handler"].split(".")[1] for r in cloud.stack.of_type("AWS::Lambda::Function")}
    # Then each has at least one sample in events/, so the replay above covers every package
    assert modules == {sample.name.split(".")[0] for sample in SAMPLES}
