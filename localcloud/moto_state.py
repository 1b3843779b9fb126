"""moto's private state, read in one place for the rest of the offline cloud (the ground floor: it imports nothing of
the offline cloud). Each reader names the attribute it reads and why moto's public API does not serve."""

from __future__ import annotations

from typing import Any

from moto.cloudformation.parsing import ResourceMap
from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackEndpoint, CallbackPoolManager


def parsed_resource(resource_map: ResourceMap, logical_id: str) -> Any:
    """The resource moto's CloudFormation made for `logical_id`, if any: reads `ResourceMap._parsed_resources`, as
    the map's public lookup creates a resource it has not made yet (and raises for one it never will)."""
    return resource_map._parsed_resources.get(logical_id)


def callback_endpoints(pool: CallbackPoolManager) -> list[CallbackEndpoint]:
    """The callback endpoints of an execution's pool: reads `CallbackPoolManager._pool`, which moto lists nowhere,
    for StopExecution to wake every waiting task (gap 4)."""
    return list(pool._pool.values())
