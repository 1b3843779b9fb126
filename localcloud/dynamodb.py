"""DynamoDB linearizable across threads, as the service is.

Gap 14: moto's DynamoDB backend checks a ConditionExpression and then writes, with nothing between the two: two threads
(the offline cloud's endpoint serves every worker's call on a thread of its own) can both pass the check, so two
conditional puts of one key both succeeded (two export runs both took the run lock). Every item operation of a
backend runs under that backend's lock here, which makes each one atomic and every read see whole writes (the TTL
sweeper's scan also failed with "dictionary changed size during iteration" while items were written).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from moto.dynamodb.models import DynamoDBBackend

OPERATIONS = (
    "put_item",
    "get_item",
    "query",
    "scan",
    "update_item",
    "delete_item",
    "transact_write_items",
    "execute_statement",
    "execute_transaction",
    "batch_execute_statement",
)
_locks_guard = threading.Lock()


def lock(backend: DynamoDBBackend) -> threading.RLock:
    """The lock every item operation of `backend` runs under (hold it to read or change several items at once)."""
    with _locks_guard:
        return backend.__dict__.setdefault("localcloud_lock", threading.RLock())  # type: ignore[no-any-return]


def serialised(name: str) -> Callable[..., Any]:
    """moto's item operation `name`, run under its backend's lock (the replacement localcloud/patches.py installs)."""
    original = getattr(DynamoDBBackend, name)

    @functools.wraps(original)
    def operation(self: DynamoDBBackend, *args: Any, **kwargs: Any) -> Any:
        with lock(self):
            return original(self, *args, **kwargs)

    operation.__localcloud_original__ = getattr(original, "__localcloud_original__", original)  # type: ignore[attr-defined]
    return operation
