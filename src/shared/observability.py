"""Logger, metrics and tracer for every function (Powertools; service name from POWERTOOLS_SERVICE_NAME)."""

import hashlib
import warnings
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
metrics = Metrics()
tracer = Tracer()
# Not every invocation has a metric to publish (a duplicate callback, a status with nothing to count); Powertools
# would print a warning into the function's log for each of them.
warnings.filterwarnings("ignore", "No application metrics to publish")


def instrumented(handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A function's entry point with its Powertools context: log lines carry the invocation's context, metrics are
    flushed when it returns, and it is traced as an X-Ray subsegment."""
    return logger.inject_lambda_context(metrics.log_metrics(tracer.capture_lambda_handler(handler)))


def token_ref(task_token: str) -> str:
    """A short, stable reference to a task token for logs: tokens are secrets and never logged in clear."""
    return "tok-" + hashlib.sha256(task_token.encode()).hexdigest()[:12]
