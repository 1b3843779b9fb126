"""moto backends (and its request routing) linearizable across threads, as the services are: each listed operation of
a backend runs under that backend's lock. The offline cloud's endpoint serves every worker's call on a thread of its
own, and its own threads (executions, schedules, pollers) call the backends directly, so moto's check-then-act and
iterate-while-changed windows are hit under load.

Gap 14, DynamoDB: moto checks a ConditionExpression and then writes, with nothing between the two, so two conditional
puts of one key both succeeded (two export runs both took the run lock); the TTL sweeper's scan failed with
"dictionary changed size during iteration" while items were written.
Gap 21, EventBridge: PutEvents matches an event against the bus's rules by iterating them, and delivers to each rule's
targets by iterating those; a PutRule or PutTargets meanwhile failed the PutEvents with "OrderedDict mutated during
iteration" (the event was lost: a completion never resumed its job).
Gap 22, moto's request routing: a service model's `operation_model` caches botocore's operation model and then
replaces it with moto's under the same cache key, so a thread routing the service's first requests at the same time
could be handed botocore's, which has no `http_trait` (the call failed with "'OperationModel' object has no
attribute 'http_trait'": a Task state FAILED with States.Runtime).
Speed, moto's request routing again: a service's model, pagination model and request router are built on its first
request and kept in caches that build without a lock, so every request that came before the first build ended built
them again (`built_once`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from moto.core.model import ServiceModel
from moto.core.routing import ServiceOperationRouter
from moto.dynamodb.models import DynamoDBBackend
from moto.events.models import EventsBackend

OPERATIONS: dict[type, tuple[str, ...]] = {
    DynamoDBBackend: (
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
    ),
    EventsBackend: (  # and PutEvents, whose replacement (localcloud.fixes.events.put_events) takes the lock itself
        "put_rule",
        "delete_rule",
        "enable_rule",
        "disable_rule",
        "put_targets",
        "remove_targets",
        "create_event_bus",
        "delete_event_bus",
    ),
    ServiceModel: ("operation_model",),  # one model per service, shared by every request routed to it
    ServiceOperationRouter: ("_get_router",),  # a service's router per protocol, built on the first request
}
_locks_guard = threading.Lock()


def lock(backend: Any) -> threading.RLock:
    """The lock every listed operation of `backend` (or service model) runs under (hold it to read or change several
    items at once). Reentrant: a PutEvents that starts an execution puts that execution's status event from the same
    thread."""
    with _locks_guard:
        return backend.__dict__.setdefault("localcloud_lock", threading.RLock())  # type: ignore[no-any-return]


def serialised(
    owner: type, name: str, extend: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None
) -> Callable[..., Any]:
    """moto's operation `name` of the backend class `owner` (or `extend` applied to it), run under its backend's
    lock (the replacement localcloud/fixes/patches.py installs)."""
    original = getattr(owner, name)
    run = extend(original) if extend else original

    @functools.wraps(original)
    def operation(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock(self):
            return run(self, *args, **kwargs)

    operation.__localcloud_original__ = getattr(original, "__localcloud_original__", original)  # type: ignore[attr-defined]
    return operation


def built_once[T](build: Callable[..., T]) -> Callable[..., T]:
    """`build` run once per argument however many threads call it at once (where a cache such as moto's builds
    without a lock): the first caller builds under a lock, the others wait for what it built."""
    built: dict[tuple[Any, ...], T] = {}
    building = threading.Lock()

    @functools.wraps(build)
    def once(*args: Any) -> T:
        if args not in built:
            with building:
                if args not in built:
                    built[args] = build(*args)
        return built[args]

    return once
