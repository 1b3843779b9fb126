"""Scheduled: resumes finished jobs whose completion event never came; heartbeats the ones still running, nearest their
heartbeat deadline first, within the invocation's time (what it leaves is the next run's). One run at a time (a
lease): a tick during a long pass is skipped, the next one runs."""

from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.aws import transient_errors
from shared.callback.reconcile import Reconciler
from shared.callback.service import callbacks
from shared.lease import single_flight
from shared.observability import instrumented
from shared.settings import callback_settings


@cache
def reconciler() -> Reconciler:
    return Reconciler(callbacks(), callback_settings().reconcile_after_seconds)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # listing the waiting jobs (or taking the lease) failed: the next scheduled run is the retry
    with transient_errors(), single_flight("reconcile-jobs", context) as held:
        return reconciler().run(context) if held else {"skipped": True}
