"""Logger, metrics and tracer for every function (Powertools; service name from POWERTOOLS_SERVICE_NAME)."""

import hashlib
import warnings

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
metrics = Metrics()
tracer = Tracer()
# Not every invocation has a metric to publish (a duplicate callback, a status with nothing to count); Powertools
# would print a warning into the function's log for each of them.
warnings.filterwarnings("ignore", "No application metrics to publish")


def token_ref(task_token: str) -> str:
    """A short, stable reference to a task token for logs: tokens are secrets and never logged in clear."""
    return "tok-" + hashlib.sha256(task_token.encode()).hexdigest()[:12]
