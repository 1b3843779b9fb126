"""Every test, in every thread: fake credentials, and no connection to AWS (tests/aws_guard.py).

The guard is installed when pytest starts, before any test module is imported, and stays for the whole session: a
thread that outlives its test's mock (a simulator, a poller) gets a refusal instead of reaching a real endpoint.

One run is let through, on purpose only: the state tier against an AWS account (`TESTSTATE_AWS_ROLE_ARN`, see
tests/statemachines/conftest.py), which runs that tier alone and never in CI.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import aws_guard

STATE_TIER = Path(__file__).parent / "statemachines"


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(aws_guard.ON_AWS):
        _state_tier_on_aws(config)
        return
    aws_guard.install()


def _state_tier_on_aws(config: pytest.Config) -> None:
    """The state tier's run on AWS: the environment's credentials and Region, no guard, and nothing but that tier."""
    if os.environ.get("CI"):
        raise pytest.UsageError(f"{aws_guard.ON_AWS} is set in CI: the tests never reach AWS there")
    paths = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    if not paths or any(not path.is_relative_to(STATE_TIER) for path in paths):
        raise pytest.UsageError(f"with {aws_guard.ON_AWS} set, run the state tier alone: pytest tests/statemachines")


def pytest_unconfigure(config: pytest.Config) -> None:
    aws_guard.uninstall()
