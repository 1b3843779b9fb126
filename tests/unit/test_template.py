"""What template.yaml grants: task tokens resume only this stack's workflows, and no function gets broad access."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.unit.support import template

CALLBACK_ACTIONS = {"states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"}


def statements() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every inline policy statement of every function and state machine, with its resource's logical id."""
    for logical_id, resource in template()["Resources"].items():
        if resource["Type"] not in {"AWS::Serverless::Function", "AWS::Serverless::StateMachine"}:
            continue
        for policy in resource["Properties"].get("Policies", []):
            if isinstance(policy, dict) and "Statement" in policy:
                for statement in policy["Statement"]:
                    yield logical_id, statement


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_callbacks_can_only_resume_this_stacks_state_machines() -> None:
    # Given every statement that lets a function call SendTaskSuccess / SendTaskFailure / SendTaskHeartbeat
    granting = [(f, s) for f, s in statements() if CALLBACK_ACTIONS & set(as_list(s["Action"]))]
    assert {f for f, _ in granting} >= {"RegisterTokenFunction", "ResumeJobFunction", "ReconcileJobsFunction"}
    # Then each is scoped to state machines named after this stack, never to "*" or another account's machines
    for function, statement in granting:
        for resource in as_list(statement["Resource"]):
            arn = resource["Fn::Sub"] if isinstance(resource, dict) else resource
            assert arn.startswith("arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:"), (
                function,
                arn,
            )
            assert ":stateMachine:${AWS::StackName}-" in arn, (function, arn)


@pytest.mark.parametrize("kind", ["managed policy", "action"])
def test_nothing_is_granted_full_access(kind: str) -> None:
    resources = template()["Resources"].values()
    if kind == "managed policy":
        # Then no function or state machine attaches an AWS managed *FullAccess policy
        names = [p for r in resources for p in r.get("Properties", {}).get("Policies", []) if isinstance(p, str)]
        assert not [n for n in names if n.endswith("FullAccess")]
    else:
        # Then no statement grants every action of a service
        assert not [(f, a) for f, s in statements() for a in as_list(s["Action"]) if str(a).endswith(":*")]
