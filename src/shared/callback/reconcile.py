"""The reconciler: what to do for jobs whose completion event is late or lost.

Translate and HealthLake events are durable, Bedrock Data Automation and Step Functions events are best effort, and
Macie may log nothing. On a schedule, every task waiting longer than a threshold is looked up through its service's
API: a finished job is resumed through the same path as its event (so the event, if it still comes, is a harmless
duplicate); a running job gets SendTaskHeartbeat, which keeps a waiting task with HeartbeatSeconds alive exactly as
long as its job's progress can be confirmed. A job the API cannot confirm gets no heartbeat, so its task ends with
States.HeartbeatTimeout instead of waiting out its whole TimeoutSeconds.

Each job is reconciled on its own: jobs run in parallel on a few threads, their describe calls paced to stay within
the services' describe rate limits, and one job's failure (a throttled SendTaskHeartbeat, say) is counted and logged
while the others go on. Only after every job has been tried does a run with failures raise
ReconcileIncompleteError, so its invocation fails visibly (its destination gets it); the next schedule tries again.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from shared.callback.adapters import adapter
from shared.callback.service import Callbacks, Result
from shared.callback.tokens import Waiting
from shared.exceptions import ReconcileIncompleteError, UnknownServiceError
from shared.observability import logger, metrics, token_ref
from shared.tasktoken import send_heartbeat


class Action(StrEnum):
    RESUMED = "RESUMED"  # the job had ended: its outcome was delivered as its event would have
    HEARTBEAT = "HEARTBEAT"  # the job is still running: the waiting task was told so
    CLOSED = "CLOSED"  # the waiting task no longer exists (timed out, stopped): its entry was removed
    UNCONFIRMED = "UNCONFIRMED"  # the service could not describe the job: no heartbeat, the task will time out


class Pacer:
    """At most `per_second` calls start per second, across threads (a describe rate limit is per account)."""

    def __init__(self, per_second: float) -> None:
        self.interval = 1.0 / per_second
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        time.sleep(start - now)


class Reconciler:
    def __init__(
        self,
        callbacks: Callbacks,
        waiting_longer_than_seconds: int,
        workers: int = 8,
        describes_per_second: float = 10.0,
    ) -> None:
        self.callbacks = callbacks
        self.waiting_longer_than_seconds = waiting_longer_than_seconds
        self.workers = workers
        self.pacer = Pacer(describes_per_second)

    def run(self) -> dict[str, int]:
        """Reconcile every task waiting longer than the threshold; return how many got each action. Raises
        ReconcileIncompleteError, after trying every job, if some could not be reconciled."""
        cutoff = int(time.time()) - self.waiting_longer_than_seconds
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            results = list(pool.map(self.isolated, self.callbacks.waiting(registered_before=cutoff)))
        actions = Counter(result for result in results if result is not None)
        failed = results.count(None)
        for action, count in actions.items():
            metrics.add_metric(name=f"Reconciled{action.title()}", unit=MetricUnit.Count, value=count)
        metrics.add_metric(name="ReconcileFailed", unit=MetricUnit.Count, value=failed)
        logger.info("reconciled waiting tasks", extra={"actions": dict(actions), "failed": failed})
        if failed:
            raise ReconcileIncompleteError(
                f"{failed} of {len(results)} waiting tasks could not be reconciled; the next scheduled run tries "
                "them again"
            )
        return {action.value: actions[action] for action in Action}

    def isolated(self, waiting: Waiting) -> Action | None:
        """reconcile(), or None if this job's reconciliation failed (e.g. a throttled heartbeat or resume): the
        error is logged, and never stops the other jobs."""
        try:
            return self.reconcile(waiting)
        except Exception as exc:  # noqa: BLE001 - one job's failure must never stop the others
            logger.warning(
                "job could not be reconciled",
                extra={"service": waiting.service, "jobId": waiting.job_id, "error": f"{type(exc).__name__}: {exc}"},
            )
            return None

    def reconcile(self, waiting: Waiting) -> Action:
        reference = {"service": waiting.service, "jobId": waiting.job_id, "token": token_ref(waiting.token)}
        self.pacer.wait()
        try:
            outcome = adapter(waiting.service).current(waiting.job_id)
        except (BotoCoreError, ClientError, UnknownServiceError) as exc:  # an error, or no answer at all
            logger.warning("job could not be described", extra={**reference, "error": str(exc)})
            return Action.UNCONFIRMED
        if outcome is not None:
            logger.info("finished job resumed by the reconciler", extra={**reference, "status": outcome.status})
            resumed = self.callbacks.resume(outcome) == Result.RESUMED
            return Action.RESUMED if resumed else Action.CLOSED
        if send_heartbeat(waiting.token, waiting.job_id):
            return Action.HEARTBEAT
        self.callbacks.forget(waiting)
        return Action.CLOSED
