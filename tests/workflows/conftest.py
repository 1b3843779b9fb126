"""Workflow tests: the real template.yaml, ASL and handlers on the offline cloud."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import CloudConfig, LocalCloud

ROOT = Path(__file__).resolve().parents[2]
TASK_TIMEOUT_SECONDS = 8  # short, so the lost-event case times out quickly


@pytest.fixture(scope="session")
def cloud() -> Iterator[LocalCloud]:
    config = CloudConfig(
        template=ROOT / "template.yaml",
        aws_port=0,
        http_port=0,
        speedup=60,
        parameters={"TaskTimeoutSeconds": str(TASK_TIMEOUT_SECONDS), "LogLevel": "WARNING"},
        async_retry_delay_seconds=0.1,
    )
    with LocalCloud(config) as running:
        yield running
