"""Shared fixtures for the offline cloud's tests: one LocalCloud on the fixture app per test module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import CloudConfig, LocalCloud

FIXTURE_APP = Path(__file__).parent / "fixtures" / "app" / "template.yaml"
SPEEDUP = 60.0  # a rate(1 minute) schedule fires every real second


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    """The fixture app deployed into a fresh offline cloud on free ports, with schedules 60x faster than real time
    and short retry delays for asynchronous invocations."""
    config = CloudConfig(
        template=FIXTURE_APP,
        stack_name="fixture",
        aws_port=0,
        http_port=0,
        speedup=SPEEDUP,
        async_retry_delay_seconds=0.05,
    )
    with LocalCloud(config) as running:
        yield running
