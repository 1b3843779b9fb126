"""Every sample in events/ replayed through the function it names (`<handler>.<case>.json` ->
`handlers.<handler>.handler`), the way Lambda would call it, on moto.

A completion sample is replayed against a real waiting task registered for its job, so a terminal status must
resume the task and a non-terminal one must leave it waiting.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from moto.events.models import EventPattern

from shared.adapters import ADAPTERS, Adapter
from tests.unit.support import EVENTS, SRC, Aws, WaitingTask, invoke, template, template_handlers

SAMPLE_NAME = re.compile(r"^(?P<handler>[a-z][a-z0-9_]*)\.(?P<case>[a-z0-9][a-z0-9-]*)\.json$")
SAMPLES = sorted(EVENTS.glob("*.json"))
# Every status a handler answers with (shared.callback.Result, plus the resume function's IGNORED).
STATUSES = {"REGISTERED", "DUPLICATE", "RESUMED", "RECORDED", "ALREADY_CLOSED", "IGNORED"}


def handler_of(sample: Path) -> str:
    match = SAMPLE_NAME.match(sample.name)
    assert match, f"events/{sample.name}: name it <handler>.<case>.json, e.g. resume_job.translate-completed.json"
    return match["handler"]


def adapter_for(event: dict[str, Any]) -> Adapter:
    adapter = next((adapter for adapter in ADAPTERS if adapter.matches(event)), None)
    assert adapter, f"no adapter for source={event.get('source')!r} detail-type={event.get('detail-type')!r}"
    return adapter


def test_there_is_a_sample_for_every_function_in_the_template() -> None:
    sampled = {f"handlers.{handler_of(sample)}.handler" for sample in SAMPLES}
    assert template_handlers() <= sampled, f"functions without a sample in events/: {template_handlers() - sampled}"


@pytest.mark.parametrize("sample", SAMPLES, ids=[sample.name for sample in SAMPLES])
def test_the_sample_names_a_function_of_the_template(sample: Path) -> None:
    # Given a sample named after its handler
    handler = f"handlers.{handler_of(sample)}.handler"

    # Then the template deploys a function with that handler, and the module defines it
    assert handler in template_handlers(), f"events/{sample.name}: no function in template.yaml has Handler {handler}"
    module = SRC / "handlers" / f"{handler_of(sample)}.py"
    assert module.is_file(), f"events/{sample.name}: no module {module.relative_to(SRC)} in src/"


@pytest.mark.parametrize("sample", SAMPLES, ids=[sample.name for sample in SAMPLES])
def test_the_sample_replays_through_its_handler(
    sample: Path, aws: Aws, waiting_task: Callable[..., WaitingTask]
) -> None:
    # Given the sample, and for a job event a workflow waiting for that job
    handler = handler_of(sample)
    assert importlib.util.find_spec(f"handlers.{handler}") is not None, f"events/{sample.name}: no handler {handler}"
    event = json.loads(sample.read_text())
    task = None
    if handler == "resume_job":
        adapter = adapter_for(event)
        task = waiting_task()
        job_id = event["detail"][adapter.job_id_field]
        registration = {"service": adapter.service, "jobId": job_id, "taskToken": task.token}
        assert invoke("register_token", registration) == {"status": "REGISTERED"}

    # When Lambda calls the handler with it
    result = invoke(handler, event)

    # Then the handler answers with a status
    assert isinstance(result, dict)
    assert result.get("status") in STATUSES
    if task is not None and result["status"] == "RESUMED":
        assert task.wait_until_closed()["status"] in {"SUCCEEDED", "FAILED"}
    elif task is not None:
        assert result["status"] == "IGNORED"
        assert task.status() == "RUNNING"


def _rule_patterns(handler: str) -> list[dict[str, Any]]:
    """The EventBridge rule patterns that invoke the function with this handler in template.yaml."""
    return [
        event["Properties"]["Pattern"]
        for resource in template()["Resources"].values()
        if resource.get("Type") == "AWS::Serverless::Function"
        and resource["Properties"]["Handler"] == f"handlers.{handler}.handler"
        for event in resource["Properties"].get("Events", {}).values()
        if event["Type"] == "EventBridgeRule"
    ]


@pytest.mark.parametrize(
    "sample",
    [sample for sample in SAMPLES if sample.name.startswith("resume_job.")],
    ids=lambda sample: sample.name,
)
def test_the_rule_delivers_a_job_event_exactly_when_the_adapter_sees_the_job_ended(sample: Path) -> None:
    # Given a job event sample and the template's EventBridge rules for the resume function
    event = json.loads(sample.read_text())
    patterns = [EventPattern.load(json.dumps(pattern)) for pattern in _rule_patterns("resume_job")]
    assert patterns, "template.yaml: the resume function has no EventBridgeRule event"

    # Then a rule matches it if and only if the adapter takes it for the end of the job
    delivered = any(pattern.matches_event(event) for pattern in patterns)
    assert delivered == (adapter_for(event).outcome(event) is not None)
