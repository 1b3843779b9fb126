"""The reconciler: what to do for jobs whose completion event is late or lost.

Translate and HealthLake events are durable, Bedrock Data Automation and Step Functions events are best effort, and
Macie may log nothing. On a schedule, every task waiting longer than a threshold is looked up through its service's
API: a finished job is resumed through the same path as its event (so the event, if it still comes, is a harmless
duplicate); a running job gets a heartbeat (SendTaskHeartbeat, or SendDurableExecutionCallbackHeartbeat for a durable
execution's callback), which keeps a wait with a heartbeat timeout alive exactly as long as its job's progress can be
confirmed. A job the API cannot confirm gets no heartbeat, so its wait ends at its missed heartbeat (States.Timeout in
the history, which a Catch on States.HeartbeatTimeout also matches; a durable callback's timeout error) instead of
waiting out its whole timeout.

Under pressure (a burst of lost events, many jobs waiting at once):
- a run takes the waiting jobs nearest their heartbeat deadline first (tokens.Waiting.deadline), so that what it
  cannot reach is what has the most time left;
- a service that lists its jobs (Translate) is asked once per page of up to 500 jobs, not once per job; every other
  job is described on its own;
- each service's calls are paced to its own rate (Adapter.calls_per_second): its listing first, one service after
  another, then the describes on a few threads, services side by side;
- a run takes no job FINISH_SECONDS before its invocation's deadline: the jobs it leaves (DEFERRED) are the next
  run's, which takes them first again. Runs are one at a time (the handler's lease); each run does the whole job.

Each job is reconciled on its own: one job's failure (a throttled SendTaskHeartbeat, say) is counted and logged while
the others go on. Only after every job taken has been tried does a run with failures raise ReconcileIncompleteError,
so its invocation fails visibly (its destination gets it); the next schedule tries again.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from shared.callback.adapters import ADAPTERS, adapter
from shared.callback.service import Callbacks, Result
from shared.callback.tokens import Waiting
from shared.exceptions import ReconcileIncompleteError, UnknownServiceError
from shared.lease import Invocation
from shared.observability import logger, metrics, token_ref
from shared.outcome import Detail
from shared.waits import send_heartbeat

FINISH_SECONDS = 10  # a job taken this close to the deadline still has its calls and the SDK's retries done in time
# Jobs are listed from this long before the oldest waiting one registered: a job is submitted just before its task
# registers (its Retry backs off for minutes at most). A job submitted earlier still is described on its own.
LIST_MARGIN_SECONDS = 3600

Answer = tuple[str, Detail]  # a job's status and details, as its service's describe or list answered


class Action(StrEnum):
    RESUMED = "RESUMED"  # the job had ended: its outcome was delivered as its event would have
    HEARTBEAT = "HEARTBEAT"  # the job is still running: the waiting task was told so
    CLOSED = "CLOSED"  # the waiting task no longer exists (timed out, stopped): its entry was removed
    UNCONFIRMED = "UNCONFIRMED"  # the service could not describe the job: no heartbeat, the task will time out
    DEFERRED = "DEFERRED"  # not taken, the run's time being up: the next run takes it, nearest its deadline first


class Pacer:
    """At most `per_second` calls start per second, across threads (a rate limit is per account and operation)."""

    def __init__(
        self,
        per_second: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval = 1.0 / per_second
        self._clock, self._sleep = clock, sleep
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = self._clock()
            start = max(now, self._next)
            self._next = start + self.interval
        self._sleep(start - now)


class Reconciler:
    """`clock` and `sleep` are the time calls are paced and a run's time is measured on (a test's virtual time)."""

    def __init__(
        self,
        callbacks: Callbacks,
        waiting_longer_than_seconds: int,
        workers: int = 8,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.callbacks = callbacks
        self.waiting_longer_than_seconds = waiting_longer_than_seconds
        self.workers = workers
        self.clock = clock
        self.pacers = {
            (service, call): Pacer(each.calls_per_second, clock, sleep)
            for service, each in ADAPTERS.items()
            for call in ("describe", "list")
            if call == "describe" or each.list_jobs is not None
        }

    def run(self, invocation: Invocation) -> dict[str, int]:
        """Reconcile the tasks waiting longer than the threshold, nearest their heartbeat deadline first, until
        FINISH_SECONDS before the invocation's deadline; return how many got each action. Raises
        ReconcileIncompleteError, after trying every job it took, if some could not be reconciled."""
        last_take = self.clock() + invocation.get_remaining_time_in_millis() / 1000 - FINISH_SECONDS
        cutoff = int(time.time()) - self.waiting_longer_than_seconds
        waiting = sorted(self.callbacks.waiting(registered_before=cutoff), key=lambda job: job.deadline)
        listed = self.listed(waiting, last_take)

        def take(job: Waiting) -> Action | None:
            if self.clock() > last_take:
                return Action.DEFERRED
            return self.isolated(job, listed.get((job.service, job.job_id)))

        with ThreadPoolExecutor(max_workers=self.workers) as pool:  # its queue hands the jobs out in this order
            results = list(pool.map(take, waiting))
        actions = Counter(result for result in results if result is not None)
        failed = results.count(None)
        for action, count in actions.items():
            metrics.add_metric(name=f"Reconciled{action.title()}", unit=MetricUnit.Count, value=count)
        metrics.add_metric(name="ReconcileFailed", unit=MetricUnit.Count, value=failed)
        logger.info(
            "reconciled waiting tasks", extra={"actions": dict(actions), "failed": failed, "listed": len(listed)}
        )
        if failed:
            raise ReconcileIncompleteError(
                f"{failed} of {len(results)} waiting tasks could not be reconciled; the next scheduled run tries "
                "them again"
            )
        return {action.value: actions[action] for action in Action}

    def listed(self, waiting: list[Waiting], last_take: float) -> dict[tuple[str, str], Answer]:
        """What the services that list their jobs answer for the waiting ones, a page of jobs per call, until the
        clock passes `last_take`. Best effort: a job the listing did not reach (it failed, the time ran short, the job
        is older than the window) is described on its own."""
        answers: dict[tuple[str, str], Answer] = {}
        for service in sorted({job.service for job in waiting}):
            list_jobs = ADAPTERS[service].list_jobs if service in ADAPTERS else None
            if list_jobs is None:
                continue
            jobs = [job for job in waiting if job.service == service]
            wanted = {job.job_id for job in jobs}
            since = min(job.registered_at for job in jobs) - LIST_MARGIN_SECONDS
            try:
                for page in list_jobs(since, self.pacers[(service, "list")].wait):
                    for job_id, status, detail in page:
                        if job_id in wanted:
                            answers[(service, job_id)] = (status, detail)
                            wanted.discard(job_id)
                    if not wanted or self.clock() > last_take:
                        break
            except (BotoCoreError, ClientError) as exc:
                logger.warning(
                    "jobs could not be listed: each is described on its own",
                    extra={"service": service, "error": f"{type(exc).__name__}: {exc}"},
                )
        return answers

    def isolated(self, waiting: Waiting, answer: Answer | None) -> Action | None:
        """reconcile(), or None if this job's reconciliation failed (e.g. a throttled heartbeat or resume): the
        error is logged, and never stops the other jobs."""
        try:
            return self.reconcile(waiting, answer)
        except Exception as exc:  # noqa: BLE001 - one job's failure must never stop the others
            logger.warning(
                "job could not be reconciled",
                extra={"service": waiting.service, "jobId": waiting.job_id, "error": f"{type(exc).__name__}: {exc}"},
            )
            return None

    def reconcile(self, waiting: Waiting, answer: Answer | None) -> Action:
        """Act on what the job's service says of it: `answer` if its listing had it, else a describe."""
        reference = {"service": waiting.service, "jobId": waiting.job_id, "token": token_ref(waiting.token)}
        try:
            service = adapter(waiting.service)
            if answer is None:
                self.pacers[(service.service, "describe")].wait()
                answer = service.describe(waiting.job_id)
            outcome = service.described(waiting.job_id, *answer)
        except (BotoCoreError, ClientError, UnknownServiceError) as exc:  # an error, or no answer at all
            logger.warning("job could not be described", extra={**reference, "error": str(exc)})
            return Action.UNCONFIRMED
        if outcome is not None:
            logger.info("finished job resumed by the reconciler", extra={**reference, "status": outcome.status})
            resumed = self.callbacks.resume(outcome) == Result.RESUMED
            return Action.RESUMED if resumed else Action.CLOSED
        sent_at = int(time.time())
        if not send_heartbeat(waiting.token, waiting.job_id, waiting.kind):
            self.callbacks.forget(waiting)
            return Action.CLOSED
        try:
            self.callbacks.record_heartbeat(waiting, sent_at)
        except (BotoCoreError, ClientError) as exc:  # the heartbeat was sent: the job's deadline only looks nearer
            logger.warning("heartbeat not recorded", extra={**reference, "error": str(exc)})
        return Action.HEARTBEAT
