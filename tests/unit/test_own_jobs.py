"""A stack acts on its own jobs only. Translate's completion events carry a job id and a status, and reach every
stack's rules in the account; a completion that finds no token is either this stack's early completion (kept for the
registration to come) or another stack's (nothing to keep). The job's name, which this stack gives every job
(`<stack>.<execution>`), tells them apart: the resume function asks DescribeTextTranslationJob for it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from botocore.stub import Stubber

from tests.unit.payloads import translate_job
from tests.unit.support import EVENTS, STACK, Aws, invoke

JOB_ID = "2f1e7c4a9b3d4e5f8a6b7c8d9e0f1a2b"


def completed(job_id: str) -> dict[str, Any]:
    event = json.loads((EVENTS / "resume_job.translate-completed.json").read_text())
    event["detail"] |= {"jobId": job_id, "jobStatus": "COMPLETED"}
    return event


def named(stubbed: Callable[[str], Stubber], name: str) -> None:
    described = translate_job(JOB_ID, "COMPLETED")
    described["TextTranslationJobProperties"]["JobName"] = name
    stubbed("translate").add_response("describe_text_translation_job", described, {"JobId": JOB_ID})


def test_another_stacks_completion_is_acknowledged_and_nothing_is_stored(
    aws: Aws, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a finished Translate job of another stack of the account, whose name begins with this stack's name
    named(stubbed, f"{STACK}-prod.3c9e2d1a-documents")
    # When its completion event reaches this stack's resume function (no token waits for it here)
    result = invoke("resume_job", completed(JOB_ID))
    # Then it is acknowledged as another stack's, and nothing is kept for a registration that will never come
    assert result == {"status": "FOREIGN"}
    assert aws.items() == []
    stubbed("translate").assert_no_pending_responses()


def test_this_stacks_early_completion_is_kept_for_its_registration(aws: Aws, stubbed: Callable[[str], Stubber]) -> None:
    # Given a finished Translate job of this stack whose token is not registered yet (the early-completion race)
    named(stubbed, f"{STACK}.3c9e2d1a-documents")
    # When its completion event arrives
    result = invoke("resume_job", completed(JOB_ID))
    # Then the outcome is kept for the registration
    assert result == {"status": "RECORDED"}
    assert [item["jobKey"] for item in aws.items()] == [f"translate#{JOB_ID}"]


def test_a_completion_of_a_job_translate_does_not_know_is_no_job_of_this_stack(
    aws: Aws, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a completion event of a job this account's Translate does not know (an event replayed from elsewhere)
    stubbed("translate").add_client_error(
        "describe_text_translation_job", "ResourceNotFoundException", "The job does not exist", 400
    )
    # When it reaches the resume function
    result = invoke("resume_job", completed(JOB_ID))
    # Then it is acknowledged as not this stack's, and nothing is kept
    assert result == {"status": "FOREIGN"}
    assert aws.items() == []
