"""moto's private state, read (and in one case written) in one place for the rest of the offline cloud (the ground
floor: it imports nothing of the offline cloud). Each function names the attribute it uses and why moto's public API
does not serve."""

from __future__ import annotations

from typing import Any

from moto.cloudformation.parsing import ResourceMap
from moto.stepfunctions.parser.asl.eval.callback.callback import (
    CallbackEndpoint,
    CallbackPoolManager,
    HeartbeatEndpoint,
)
from moto.stepfunctions.parser.asl.eval.variable_store import VariableStore


def parsed_resource(resource_map: ResourceMap, logical_id: str) -> Any:
    """The resource moto's CloudFormation made for `logical_id`, if any: reads `ResourceMap._parsed_resources`, as
    the map's public lookup creates a resource it has not made yet (and raises for one it never will)."""
    return resource_map._parsed_resources.get(logical_id)


def callback_endpoints(pool: CallbackPoolManager) -> list[CallbackEndpoint]:
    """The callback endpoints of an execution's pool: reads `CallbackPoolManager._pool`, which moto lists nowhere,
    for StopExecution to wake every waiting task (gap 4)."""
    return list(pool._pool.values())


def declare_variables(store: VariableStore, values: dict[str, Any]) -> None:
    """Variables a scope holds before its first state runs (TestState's `variables`): writes `_inner_scope`, as
    `VariableStore.set` is a state's assignment, which takes effect as that state exits (localcloud.fixes)."""
    store._inner_scope.update(values)


def variables(store: VariableStore) -> dict[str, Any]:
    """Every variable a Step Functions scope holds, by name: reads `VariableStore._outer_scope` and `_inner_scope`, as
    moto's one reader (`get_assigned_variables`) lists only what was assigned since the last state's exit reset it."""
    return {**store._outer_scope, **store._inner_scope}


def heartbeat_seconds(heartbeat: HeartbeatEndpoint) -> int:
    """A task's HeartbeatSeconds: reads `_heartbeat_seconds`, which moto keeps only there."""
    return heartbeat._heartbeat_seconds


def heartbeat_within(heartbeat: HeartbeatEndpoint, seconds: float) -> bool:
    """Whether a heartbeat came (or had come) within `seconds`, as `HeartbeatEndpoint.clear_and_wait` answers it for
    its own HeartbeatSeconds (and clears it as that does): uses `_mutex` and `_next_heartbeat_event`, as moto's wait
    takes no shorter time and a task's wait must also end at its TimeoutSeconds (localcloud.fixes.sfn, a waiting task
    on its execution's thread)."""
    with heartbeat._mutex:
        if heartbeat._next_heartbeat_event.is_set():
            heartbeat._next_heartbeat_event.clear()
            return True
    return heartbeat._next_heartbeat_event.wait(timeout=seconds)
