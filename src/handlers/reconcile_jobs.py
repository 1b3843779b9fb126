"""Scheduled: resumes finished jobs whose completion event never came; heartbeats the ones still running."""

from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.aws import transient_errors
from shared.callback.reconcile import Reconciler
from shared.callback.service import callbacks
from shared.observability import instrumented
from shared.settings import callback_settings


@cache
def reconciler() -> Reconciler:
    return Reconciler(callbacks(), callback_settings().reconcile_after_seconds)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    with transient_errors():  # listing the waiting jobs failed: the next scheduled run is the retry
        return reconciler().run()
