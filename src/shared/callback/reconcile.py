"""The reconciler: what to do for jobs whose completion event is late or lost.

Translate and HealthLake events are durable, Bedrock Data Automation and Step Functions events are best effort, and
Macie may log nothing. On a schedule, every task waiting longer than a threshold is looked up through its service's
API: a finished job is resumed through the same path as its event (so the event, if it still comes, is a harmless
duplicate); a running job gets SendTaskHeartbeat, which keeps a waiting task with HeartbeatSeconds alive exactly as
long as its job's progress can be confirmed. A job the API cannot confirm gets no heartbeat, so its task ends with
States.HeartbeatTimeout instead of waiting out its whole TimeoutSeconds.
"""

from __future__ import annotations

import time
from collections import Counter
from enum import StrEnum

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from shared.callback.adapters import adapter
from shared.callback.service import Callbacks, Result
from shared.callback.tokens import Waiting
from shared.exceptions import UnknownServiceError
from shared.observability import logger, metrics, token_ref
from shared.tasktoken import send_heartbeat


class Action(StrEnum):
    RESUMED = "RESUMED"  # the job had ended: its outcome was delivered as its event would have
    HEARTBEAT = "HEARTBEAT"  # the job is still running: the waiting task was told so
    CLOSED = "CLOSED"  # the waiting task no longer exists (timed out, stopped): its entry was removed
    UNCONFIRMED = "UNCONFIRMED"  # the service could not describe the job: no heartbeat, the task will time out


class Reconciler:
    def __init__(self, callbacks: Callbacks, waiting_longer_than_seconds: int) -> None:
        self.callbacks = callbacks
        self.waiting_longer_than_seconds = waiting_longer_than_seconds

    def run(self) -> dict[str, int]:
        """Reconcile every task waiting longer than the threshold; return how many got each action."""
        actions: Counter[str] = Counter()
        cutoff = int(time.time()) - self.waiting_longer_than_seconds
        for waiting in self.callbacks.waiting(registered_before=cutoff):
            actions[self.reconcile(waiting)] += 1
        for action, count in actions.items():
            metrics.add_metric(name=f"Reconciled{action.title()}", unit=MetricUnit.Count, value=count)
        logger.info("reconciled waiting tasks", extra={"actions": dict(actions)})
        return {action.value: actions[action] for action in Action}

    def reconcile(self, waiting: Waiting) -> Action:
        reference = {"service": waiting.service, "jobId": waiting.job_id, "token": token_ref(waiting.token)}
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
