"""Every test, in every thread: fake credentials, and no connection to AWS (tests/aws_guard.py).

The guard is installed when pytest starts, before any test module is imported, and stays for the whole session: a
thread that outlives its test's mock (a simulator, a poller) gets a refusal instead of reaching a real endpoint.
"""

from __future__ import annotations

import pytest

from tests import aws_guard


def pytest_configure(config: pytest.Config) -> None:
    aws_guard.install()


def pytest_unconfigure(config: pytest.Config) -> None:
    aws_guard.uninstall()
