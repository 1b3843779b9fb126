"""Workflow tests: the real template.yaml, ASL and handlers on the offline cloud."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import CloudConfig, LocalCloud

ROOT = Path(__file__).resolve().parents[2]
TASK_TIMEOUT_SECONDS = 8  # short, so the late-event case times out quickly
PARAMETERS = {
    "TaskTimeoutSeconds": str(TASK_TIMEOUT_SECONDS),
    "HeartbeatSeconds": "4",  # the reconciler (every simulated minute = 1 s here) must keep waiting tasks alive
    "ReconcileSchedule": "rate(1 minute)",
    "ReconcileAfterSeconds": "0",
    "LogLevel": "WARNING",
}


@pytest.fixture(scope="session")
def cloud() -> Iterator[LocalCloud]:
    config = CloudConfig(
        template=ROOT / "template.yaml",
        aws_port=0,
        http_port=0,
        speedup=60,
        parameters=PARAMETERS,
        async_retry_delay_seconds=0.1,
    )
    with LocalCloud(config) as running:
        yield running
