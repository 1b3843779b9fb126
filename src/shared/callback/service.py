"""The generalized callback: pair a waiter's token with a job, resume it exactly once when the job ends. The waiter
is a Step Functions task (its task token) or a Lambda durable execution (its callback id): the same path serves both.

Registration and completion may arrive in either order, more than once, or late. Both sides write conditionally
to the same item, so exactly one of them wins and the loser finishes the job: a late registration finds the
recorded outcome and resumes at once; a completion finds the token and resumes. Duplicate and late callbacks
are acknowledged and counted, never retried (shared.waits).
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from functools import cache

from shared.callback.adapters import adapter
from shared.callback.tokens import TokenStore, Waiter, Waiting, job_key
from shared.exceptions import TokenConflictError
from shared.observability import logger, token_ref
from shared.outcome import Outcome
from shared.settings import callback_settings
from shared.waits import Sent, send_outcome


class Result(StrEnum):
    REGISTERED = "REGISTERED"  # token stored; the job's completion will resume the task
    DUPLICATE = "DUPLICATE"  # nothing to do: this exact registration or completion was already handled
    RESUMED = Sent.RESUMED.value  # SendTaskSuccess/Failure delivered
    RECORDED = "RECORDED"  # completion stored; the late registration will resume the task
    ALREADY_CLOSED = Sent.ALREADY_CLOSED.value  # the task had timed out or was already resumed
    FOREIGN = "FOREIGN"  # another stack's job (its name says so): acknowledged, nothing stored


class Callbacks:
    def __init__(self, store: TokenStore, default_ttl_seconds: int, job_prefix: str) -> None:
        self.store = store
        self.default_ttl_seconds = default_ttl_seconds
        self.job_prefix = job_prefix  # this stack's job names start with it: `<stack>.`

    def register(
        self, service: str, job_id: str, task_token: str, waiter: Waiter, ttl_seconds: int | None = None
    ) -> Result:
        """Pair `task_token` with the job. A repeated registration is a no-op; a retry of the same Task state (same
        execution, state and entry time, a later attempt) replaces the token it registered before, which died with
        the failed attempt; any other token is refused, an earlier attempt's that arrives last too."""
        adapter(service)  # an unknown service is refused before anything is written
        key = job_key(service, job_id)
        ttl = ttl_seconds or self.default_ttl_seconds
        for _ in range(2):  # a second pass only runs if the entry changed between the write and the read
            if self.store.put_token(key, task_token, waiter, ttl):
                logger.info("token registered", extra={"jobKey": key, "token": token_ref(task_token)})
                return Result.REGISTERED
            entry = self.store.get(key)
            if entry is None:
                continue
            if entry.token == task_token:
                return Result.DUPLICATE
            if entry.token is not None and entry.waiter is not None and waiter.retries(entry.waiter):
                if self.store.replace_token(key, task_token, waiter, ttl):
                    logger.info(
                        "token of a retried registration replaced",
                        extra={"jobKey": key, "token": token_ref(task_token), "replaced": token_ref(entry.token)},
                    )
                    return Result.REGISTERED
                continue
            if entry.token is not None:
                raise TokenConflictError(f"job {key} is already paired with task token {token_ref(entry.token)}")
            if entry.outcome is not None:
                result = Result(send_outcome(task_token, entry.outcome, waiter.kind))
                self.store.delete_outcome(key)
                return result
        raise TokenConflictError(f"job {key}: could not register the task token")

    def waiting(self, registered_before: int) -> Iterator[Waiting]:
        """Every task still waiting for its job, registered before the given time (epoch seconds)."""
        return self.store.waiting(registered_before)

    def forget(self, waiting: Waiting) -> None:
        """Remove a registration whose task no longer exists (it timed out or its execution was stopped)."""
        self.store.delete_token(job_key(waiting.service, waiting.job_id), waiting.token)

    def record_heartbeat(self, waiting: Waiting, sent_at: int) -> None:
        """Note the heartbeat sent to a waiting task at `sent_at` (epoch seconds): its deadline moves on."""
        self.store.record_heartbeat(job_key(waiting.service, waiting.job_id), waiting.token, sent_at)

    def resume(self, outcome: Outcome) -> Result:
        """Resume the task waiting for this job, or record the outcome for a registration still to come."""
        key = job_key(outcome.service, outcome.job_id)
        for _ in range(2):  # the second pass only runs if a registration won the race to the item
            entry = self.store.get(key)
            if entry is not None and entry.token is not None:
                result = Result(send_outcome(entry.token, outcome, entry.kind))
                self.store.delete_token(key, entry.token)
                return result
            if entry is not None:
                return Result.DUPLICATE
            if not adapter(outcome.service).named(outcome.job_id, self.job_prefix):
                # Another stack's job in this account (its events reach every stack's rules): nothing to keep
                logger.info("completion of another stack's job ignored", extra={"jobKey": key})
                return Result.FOREIGN
            if self.store.put_outcome(key, outcome, self.default_ttl_seconds):
                logger.info("completion recorded before registration", extra={"jobKey": key})
                return Result.RECORDED
        return Result.DUPLICATE


@cache
def callbacks() -> Callbacks:
    """The Callbacks of this function, configured from its environment (once per container)."""
    settings = callback_settings()
    return Callbacks(TokenStore(settings.token_table), settings.default_token_ttl_seconds, f"{settings.stack_name}.")
