"""Workflow tests: the real template.yaml, ASL and handlers on the offline cloud."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.account import Credential
from localcloud.client import SignedClient
from localcloud.clock import Clock
from localcloud.cloud import DEFAULT_CREDENTIAL, CloudConfig, LocalCloud
from localcloud.simulators.healthlake import HealthLakeSimulator

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
# A second SigV4 identity the HTTP API accepts (the first is the offline cloud's DEFAULT_CREDENTIAL).
OTHER_CALLER = Credential(
    access_key_id="AKIALOCALCLOUD00002",
    secret_access_key="other-secret-key",
    user_arn="arn:aws:iam::123456789012:user/other-developer",
    user_id="AIDAOTHERDEVELOPER02",
    account_id="123456789012",
)
SPEEDUP = 60  # one simulated minute per real second
CLOCK = Clock(SPEEDUP)  # the session cloud's one clock (its simulated HealthLake is made before the cloud)
# Durations are on the cloud's clock (Step Functions timers included): SPEEDUP simulated seconds per real second.
TASK_TIMEOUT_SECONDS = 16 * SPEEDUP  # short, so the late-event case times out quickly
PARAMETERS = {
    "TaskTimeoutSeconds": str(TASK_TIMEOUT_SECONDS),
    # The reconciler (every simulated minute) keeps waiting tasks alive; 8 real seconds leave room for its invocation
    # on a machine whose cores are both busy elsewhere (4 were not enough, once in 5 runs).
    "HeartbeatSeconds": str(8 * SPEEDUP),
    "ReconcileSchedule": "rate(1 minute)",
    "ReconcileAfterSeconds": "0",
    "ExportSchedule": "rate(1 day)",  # tests start exports themselves
    "ExportRecheckDelaySeconds": "1",  # an SQS DelaySeconds: real time
    "ExportHeartbeatSeconds": str(8 * SPEEDUP),  # > the re-check delay, with room for a loaded 2-core machine
    "ExportTimeoutSeconds": str(15 * SPEEDUP),  # a stuck export fails quickly
    "DataAutomationMaxConcurrentJobs": "5",  # the quota of most Regions (the simulated BDA enforces what a test sets)
    "EnableMacie": "true",  # the cloud is a new account (Macie off): the stack turns Macie on
    "LogLevel": "WARN",
}


@pytest.fixture(scope="session")
def healthlake() -> Iterator[HealthLakeSimulator]:
    """One simulated HealthLake with one data store for the whole session (the stack is deployed against it);
    exports finish after a simulated minute. Tests steer single jobs through their JobName (the execution name):
    `fail-`, `partial-`, `stuck-`."""
    simulator = HealthLakeSimulator(REGION, delay_seconds=60, clock=CLOCK, file_count=3, records_per_file=4)
    yield simulator
    simulator.stop()


@pytest.fixture(scope="session")
def cloud(healthlake: HealthLakeSimulator) -> Iterator[LocalCloud]:
    datastore_id = healthlake.create_datastore("callback-kit-tests")
    config = CloudConfig(
        template=ROOT / "template.yaml",
        region=REGION,
        aws_port=0,
        http_port=0,
        speedup=SPEEDUP,
        parameters={**PARAMETERS, "HealthLakeDatastoreId": datastore_id},
        async_retry_delay_seconds=0.1,
        credentials=[DEFAULT_CREDENTIAL, OTHER_CALLER],  # two identities: tasks are scoped to their owner
    )
    with LocalCloud(config, CLOCK) as running:
        running.add_simulator(healthlake)
        yield running


@pytest.fixture(scope="module")
def api(cloud: LocalCloud) -> SignedClient:
    """The task API, signed as the cloud's first identity."""
    assert cloud.http is not None, "template.yaml declares no HTTP API"
    return SignedClient(cloud.http.url, cloud.config.credentials[0], cloud.config.region)


@pytest.fixture(scope="module")
def other(cloud: LocalCloud) -> SignedClient:
    """The task API, signed as another identity (OTHER_CALLER)."""
    assert cloud.http is not None
    return SignedClient(cloud.http.url, OTHER_CALLER, cloud.config.region)
