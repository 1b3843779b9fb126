"""What `make local` (python -m localcloud serve --seed tools.demo.sample_documents) gives a developer: the README's
Async API example works as written (on the sample documents it seeds), a failed job tells why, and the banner prints
outputs a developer can use."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from localcloud.__main__ import banner
from localcloud.client import SignedClient
from localcloud.cloud import LocalCloud
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator
from tests.workflows.test_api import follow
from tools.demo import DOCUMENTS, SAMPLE_PREFIX, sample_documents

ROOT = Path(__file__).resolve().parents[2]


def readme_example() -> dict[str, Any]:
    """The README's Async API example: its SigV4 credential, POST /task body and Idempotency-Key."""
    section = (ROOT / "README.md").read_text().partition("## Async API")[2].partition("\n## ")[0]
    credential = re.search(r"--aws-sigv4 aws:amz:([\w-]+):execute-api --user (\w+):(\S+?)'", section)
    submit = re.search(
        r"-H 'Idempotency-Key: ([^']+)'\s*\\?\s*-d '(\{.*?\})' http://127\.0\.0\.1:3000/task\b", section, re.S
    )
    assert credential and submit, "README.md, Async API: the curl example is not where this test reads it"
    return {
        "region": credential[1],
        "access_key_id": credential[2],
        "secret_access_key": credential[3],
        "idempotency_key": submit[1],
        "body": json.loads(submit[2]),
    }


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    return readme_example()


@pytest.fixture(scope="module")
def api(cloud: LocalCloud, example: dict[str, Any]) -> SignedClient:
    # The README's credential is the one the offline cloud accepts
    credential = cloud.config.credentials[0]
    assert (example["access_key_id"], example["secret_access_key"]) == (
        credential.access_key_id,
        credential.secret_access_key,
    )
    assert example["region"] == cloud.config.region
    assert cloud.http is not None, "template.yaml declares no HTTP API"
    return SignedClient(cloud.http.url, credential, example["region"])


@pytest.fixture
def served(cloud: LocalCloud) -> LocalCloud:
    """The offline cloud as `make local` prepares it: the sample documents seeded (its --seed), Translate and Macie
    simulated with serve's job durations (2 and 3 simulated minutes)."""
    assert SAMPLE_PREFIX in sample_documents(cloud)
    region = cloud.config.region
    cloud.add_simulator(TranslateSimulator(region, delay_seconds=120, clock=cloud.clock))
    cloud.add_simulator(MacieSimulator(region, delay_seconds=180, clock=cloud.clock))
    return cloud


def test_the_readme_documents_task_succeeds_on_the_seeded_documents(
    served: LocalCloud, api: SignedClient, example: dict[str, Any]
) -> None:
    # Given the offline cloud as `make local` starts it, with the sample documents where the README's task reads
    assert example["body"]["input"]["inputPrefix"] == SAMPLE_PREFIX
    bucket, s3 = served.stack.outputs["DocumentBucketName"], served.client("s3")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=SAMPLE_PREFIX).get("Contents", [])
    assert {o["Key"] for o in listed} >= {f"{SAMPLE_PREFIX}{name}" for name in DOCUMENTS}

    # When a developer submits the README's request, signed as the README's curl signs it
    submitted = api.request("POST", "/task", example["body"], {"Idempotency-Key": example["idempotency_key"]})

    # Then it is accepted, and the status resource follows it to SUCCEEDED with a result
    assert submitted.status_code == 202, submitted.text
    task = follow(api, submitted.headers["Location"])
    assert (task["status"], task["error"], task["cause"]) == ("SUCCEEDED", None, None)
    result = api.request("GET", task["resultUrl"])
    assert result.status_code == 200, result.text
    targets = example["body"]["input"]["targetLanguages"]
    pii = sum("@" in text for text in DOCUMENTS.values())
    expected = {"documents": len(DOCUMENTS), "translations": len(DOCUMENTS) * len(targets), "withPii": pii}
    assert result.json()["tagged"] == expected
    # and the translations are where the README's outputPrefix says
    output = example["body"]["input"]["outputPrefix"]
    translated = s3.list_objects_v2(Bucket=bucket, Prefix=output).get("Contents", [])
    assert {o["Key"].rsplit("/", 1)[-1] for o in translated} >= {f"{t}.{name}" for t in targets for name in DOCUMENTS}
    # and the history, the README's fourth curl, ends with it
    history = api.request("GET", f"{submitted.headers['Location']}/history").json()["entries"]
    assert [entry["status"] for entry in history][-1] == "SUCCEEDED"


def test_a_task_over_a_prefix_without_documents_fails_with_translates_reason(
    served: LocalCloud, api: SignedClient, example: dict[str, Any]
) -> None:
    # Given the README's request over a prefix nothing was uploaded to
    folder = uuid.uuid4().hex
    body = {**example["body"], "input": {**example["body"]["input"], "inputPrefix": f"{folder}/in/"}}

    # When it is submitted and followed
    submitted = api.request("POST", "/task", body, {"Idempotency-Key": folder})
    assert submitted.status_code == 202, submitted.text
    task = follow(api, submitted.headers["Location"])

    # Then it ends FAILED with the error a Catch matches, and a cause that says why in Translate's own words
    bucket = served.stack.outputs["DocumentBucketName"]
    assert (task["status"], task["error"]) == ("FAILED", "Translate.FAILED")
    assert f"No documents were found at the input S3 location s3://{bucket}/{folder}/in/" in task["cause"]


def test_the_stack_outputs_give_the_local_url_of_the_http_api(cloud: LocalCloud) -> None:
    # Given the stack's TaskApiUrl output (on AWS `https://${TaskHttpApi}.execute-api.<region>.amazonaws.com`)
    assert cloud.http is not None
    # Then offline it is the URL the offline cloud serves the API on, and the banner prints that
    assert cloud.stack.outputs["TaskApiUrl"] == cloud.http.url
    lines = banner(cloud).splitlines()
    assert f"    TaskApiUrl = {cloud.http.url}" in lines
    # and it says where the logs are
    assert any(line.startswith("  logs ") and str(cloud.function_log) in line for line in lines)
