"""The patch registry: every change the offline cloud makes to moto is installed together and taken out again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.dynamodb.models import DynamoDBBackend
from moto.events.models import EventsBackend, Rule

from localcloud import patches
from localcloud.clock import Clock
from localcloud.lambdas import LambdaRuntime


def _attributes(installed: patches.Patches) -> dict[tuple[int, str], Any]:
    """What each patched attribute is now, read from its owner's own dictionary (None where it is inherited)."""
    return {(id(p.owner), p.name): vars(p.owner).get(p.name) for p in installed.patches}


@pytest.fixture
def offline_patches(tmp_path: Any) -> patches.Patches:
    runtime = LambdaRuntime(tmp_path, "us-east-1")
    return patches.offline_cloud(runtime, lambda arn, payload: None, lambda arn, payload, attributes: None, Clock())


def test_every_patch_cites_a_gap_of_the_catalogue_or_speed(offline_patches: patches.Patches) -> None:
    catalogue = (Path(__file__).resolve().parents[2] / "docs" / "offline-cloud.md").read_text(encoding="utf-8")
    for patch in offline_patches.patches:
        assert patch.why == "speed" or f"| {patch.why.removeprefix('gap ')} |" in catalogue, patch


def test_uninstall_gives_moto_back_exactly_as_it_was(offline_patches: patches.Patches) -> None:
    # Given moto as imported
    before = _attributes(offline_patches)
    moto_invoke, moto_put_item = LambdaSimpleBackend.invoke, DynamoDBBackend.put_item
    # When the offline cloud's patches are installed
    with offline_patches:
        # Then moto runs the offline cloud's replacements
        assert LambdaSimpleBackend.invoke is not moto_invoke
        assert DynamoDBBackend.put_item is not moto_put_item
        assert getattr(Rule.send_to_targets, "all_targets", None) is not None
    # And once uninstalled, every attribute is moto's own again (inherited ones inherited again)
    assert _attributes(offline_patches) == before
    assert LambdaSimpleBackend.invoke is moto_invoke
    assert DynamoDBBackend.put_item is moto_put_item


def test_a_nested_set_restores_the_outer_one(offline_patches: patches.Patches, tmp_path: Any) -> None:
    inner = patches.Patches(patches.event_delivery(lambda arn, payload: None, lambda arn, payload, attributes: None))
    with offline_patches:
        outer_delivery = Rule.send_to_targets
        with inner:
            assert Rule.send_to_targets is not outer_delivery
        assert Rule.send_to_targets is outer_delivery
        assert EventsBackend.put_events is patches.events.put_events


def test_a_set_with_an_attribute_moto_no_longer_has_is_refused_whole() -> None:
    moto_put_events = EventsBackend.put_events
    broken = patches.Patches(
        [
            patches.Patch(EventsBackend, "put_events", patches.events.put_events, "gap 12"),
            patches.Patch(Rule, "send_to_every_target", lambda: None, "gap 15"),
        ]
    )
    with pytest.raises(AttributeError, match=r"send_to_every_target to patch \(gap 15\): has moto changed"):
        broken.install()
    # And nothing of it stays installed
    assert EventsBackend.put_events is moto_put_events
    assert not hasattr(Rule, "send_to_every_target")
