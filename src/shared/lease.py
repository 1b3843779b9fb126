"""Single-flight runs of a scheduled function: a lease on one DynamoDB item per name, `{pk: name, holder,
expiresAt, takenAt}`, in the lease table (LEASE_TABLE).

A run takes the lease with one conditional write, which succeeds only if nobody holds it or its holder's lease has
expired; the lease lasts the holder's remaining invocation time, so a holder that crashes or times out loses it at
its deadline without anyone releasing it. A run that does not get the lease does nothing: the next schedule tick
runs (the schedules deliver at least once, and every run does the whole job). The holder releases it with a delete
conditional on still holding it, so a run that outlived its lease never frees its successor's. `expiresAt` (epoch
seconds) is also the table's TTL attribute: items of names no longer used vanish.

This replaces `ReservedConcurrentExecutions: 1`, which a new account (whose unreserved concurrency may not go below
its whole quota of 10) refuses at CreateFunction.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from shared.aws import conditionally, table
from shared.observability import logger
from shared.settings import lease_settings


class Invocation(Protocol):
    """What a lease needs of the Lambda context object: who holds it, and until when it may."""

    @property
    def aws_request_id(self) -> str: ...

    def get_remaining_time_in_millis(self) -> int: ...


class Lease:
    """The lease called `name` in a lease table."""

    def __init__(self, table_name: str, name: str, now: Callable[[], float] = time.time) -> None:
        self._table = table(table_name)
        self.name = name
        self._now = now

    def take(self, holder: str, seconds: float) -> bool:
        """Take the lease for `seconds` unless another holder's lease has not expired yet. A retried take by the same
        holder succeeds: the SDK's retry of a write whose answer was lost (else the run would skip while holding the
        lease), and Lambda's retry of an asynchronous invocation (under its request id, after the attempt ended)."""
        now = self._now()
        taken = conditionally(
            lambda: self._table.put_item(
                Item={
                    "pk": self.name,
                    "holder": holder,
                    # Rounded up, and compared with the time rounded down: a lease is never taken over early.
                    "expiresAt": math.ceil(now + seconds),
                    "takenAt": int(now),
                },
                ConditionExpression="attribute_not_exists(pk) OR expiresAt < :now OR holder = :me",
                ExpressionAttributeValues={":now": int(now), ":me": holder},
            )
        )
        return taken is not None

    def release(self, holder: str) -> bool:
        """Give the lease back if `holder` still holds it; False (and nothing changed) if it does not."""
        released = conditionally(
            lambda: self._table.delete_item(
                Key={"pk": self.name},
                ConditionExpression="holder = :me",
                ExpressionAttributeValues={":me": holder},
            )
        )
        return released is not None

    def current(self) -> dict[str, Any] | None:
        """The lease item as it is now (None if nobody holds it): who holds it and until when, for the logs."""
        item = self._table.get_item(Key={"pk": self.name}, ConsistentRead=True).get("Item")
        return None if item is None else dict(item)


@contextmanager
def single_flight(name: str, invocation: Invocation) -> Iterator[bool]:
    """`with single_flight(name, context) as held:` True if this invocation holds the lease `name` for the block (for
    at most its remaining time), then gives it back; False if another run holds it: the block should do nothing, and
    the skip is logged. An error taking the lease is raised; one giving it back is only logged, as the lease expires
    at this invocation's deadline anyway."""
    lease = Lease(lease_settings().table_name, name)
    holder = invocation.aws_request_id
    if not lease.take(holder, invocation.get_remaining_time_in_millis() / 1000):
        logger.info("skipped: another run holds the lease", extra={"lease": name, "heldBy": lease.current()})
        yield False
        return
    try:
        yield True
    finally:
        try:
            lease.release(holder)
        except (BotoCoreError, ClientError):
            logger.warning(
                "lease not released: it expires at this run's deadline", extra={"lease": name}, exc_info=True
            )
