"""Logger and metrics for every function (Powertools; service name from POWERTOOLS_SERVICE_NAME).

No tracer in the code: `Tracing: Active` has Lambda record each invocation's segment and Step Functions trace the
workflows without an SDK in the package. The X-Ray SDK that Powertools' Tracer wraps has been in maintenance mode
since 2026-02-25 (end of support 2027-02-25; AWS recommends OpenTelemetry) and cost 24-46 ms of every cold start
(aws_xray_sdk, wrapt and the patching of botocore). Subsegments per AWS call are one layer away when wanted: the
AWS Distro for OpenTelemetry Lambda layer instruments botocore without a line of code here (docs/offline-cloud.md)."""

import hashlib
import warnings
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics

logger = Logger()
metrics = Metrics()
# Not every invocation has a metric to publish (a duplicate callback, a status with nothing to count); Powertools
# would print a warning into the function's log for each of them.
warnings.filterwarnings("ignore", "No application metrics to publish")


def instrumented(handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A function's entry point with its Powertools context: log lines carry the invocation's context, metrics are
    flushed when it returns."""
    return logger.inject_lambda_context(metrics.log_metrics(handler))


def token_ref(task_token: str) -> str:
    """A short, stable reference to a task token for logs: tokens are secrets and never logged in clear."""
    return "tok-" + hashlib.sha256(task_token.encode()).hexdigest()[:12]
