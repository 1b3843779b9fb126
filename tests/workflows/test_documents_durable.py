"""The documents workflow as a Lambda durable function (DocumentsDurableFunction) end to end: the same Translate and
Macie jobs as test_documents.py, each waited for in a `wait_for_callback` whose callback id is registered in the token
table, and closed by the same completion events, resume function and reconciler.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from datetime import timedelta
from typing import Any

from localcloud import simulators
from localcloud.client import durable_history
from localcloud.cloud import LocalCloud
from localcloud.simulators import settle_all
from tests.localcloud.simulated import wait_for
from tests.workflows.conftest import PARAMETERS, TASK_TIMEOUT_SECONDS
from tests.workflows.test_documents import (
    CLEAN,
    PERSONAL,
    Run,
    dead_letters,
    item,
    simulate,
    tagged_as_found_and_nothing_left,
    tokens_left,
    translation_ended_before_its_wait,
)

ENDED_WITHIN_S = 90.0  # a safety net: the longest case (a wait timing out) ends after about 20 real seconds
CLOSES = frozenset({"CallbackSucceeded", "CallbackFailed", "CallbackTimedOut"})


def start(run: Run, name: str | None = None) -> str:
    """Invoke the durable function asynchronously with the run's request: the ARN of the execution it started."""
    response = run.cloud.client("lambda").invoke(
        FunctionName=f"{run.cloud.stack.name}-documents-durable",
        Qualifier="$LATEST",  # Lambda refuses an unqualified Invoke of a durable function; no version is published
        InvocationType="Event",
        Payload=json.dumps(run.request).encode(),
        DurableExecutionName=name or uuid.uuid4().hex,
    )
    return str(response["DurableExecutionArn"])


def ended(cloud: LocalCloud, execution_arn: str) -> dict[str, Any]:
    """GetDurableExecution once the execution has ended."""
    lambda_ = cloud.client("lambda")

    def probe() -> dict[str, Any] | None:
        described: dict[str, Any] = lambda_.get_durable_execution(DurableExecutionArn=execution_arn)
        if described["Status"] != "RUNNING":
            return described
        time.sleep(0.2)  # a few polls a second: the cloud answers them in this process
        return None

    return wait_for(probe, ENDED_WITHIN_S, "the durable execution's end")


def execute(run: Run, name: str | None = None) -> dict[str, Any]:
    return ended(run.cloud, start(run, name))


def callbacks_closed(cloud: LocalCloud, execution_arn: str) -> Counter[str]:
    """How many times each wait's callback was closed (succeeded, failed or timed out), by the callback's name (the
    job's service)."""
    return Counter(e["Name"] for e in durable_history(cloud, execution_arn) if e["EventType"] in CLOSES)


def registered(cloud: LocalCloud, execution_arn: str) -> dict[str, dict[str, Any]]:
    """The token table's items of the execution's waits, by the wait's name."""
    items = cloud.client("dynamodb").scan(TableName=cloud.stack.outputs["TokenTableName"], ConsistentRead=True)
    mine = [i for i in items["Items"] if i.get("executionArn", {}).get("S") == execution_arn]
    return {i["stateName"]["S"]: i for i in mine}


def translation_job(name: str) -> str:
    """The id of the Translate job the execution named `name` started (its JobName is `<stack>.<name>`)."""
    jobs = simulators.active("translate").jobs  # type: ignore[union-attr]
    return next(job_id for job_id, job in jobs.items() if job.request["JobName"].endswith(f".{name}"))


def test_happy_path_translates_classifies_and_tags(cloud: LocalCloud) -> None:
    # Given two documents, one with personal data, and jobs that finish after a simulated minute
    simulate(cloud)
    run = Run(cloud, {"clean.txt": CLEAN, "contact.txt": PERSONAL})
    # When the durable function runs
    described = execute(run)
    # Then it succeeds with both jobs' results and the tagging counts
    assert described["Status"] == "SUCCEEDED", described
    result = json.loads(described["Result"])
    assert result["translation"]["output"] == f"s3://{run.bucket}/{run.folder}/out/"
    # And each document and its translation carry the pii tag Macie's findings call for, no token is left behind
    # for either job, and each wait's callback was closed exactly once
    tagged_as_found_and_nothing_left(run, result)
    assert callbacks_closed(cloud, described["DurableExecutionArn"]) == {"translate": 1, "macie": 1}


def test_completion_before_registration_still_closes_the_callback(cloud: LocalCloud) -> None:
    # Given jobs whose completion is reported as soon as they start, and a Translate job that has ended, its completion
    # recorded, before the execution that starts it registers its wait (as when a submitter is replayed after it had
    # started the job: the same client token brings back the same job)
    simulate(cloud, translate={"delay_seconds": 0}, macie={"delay_seconds": 0})
    run, name = Run(cloud), uuid.uuid4().hex
    from shared.documents.durable import _client_token  # shared imports read their environment: in a test only

    job = translation_ended_before_its_wait(run, name, _client_token(name))
    # When the durable function runs
    described = execute(run, name)
    # Then the registration finds the recorded completion and closes its callback at once; each callback closed once
    assert described["Status"] == "SUCCEEDED", described
    assert json.loads(described["Result"])["translation"] == {
        "jobId": job,
        "status": "COMPLETED",
        "output": f"s3://{run.bucket}/{run.folder}/out/",
    }
    assert callbacks_closed(cloud, described["DurableExecutionArn"]) == {"translate": 1, "macie": 1}
    # And the recorded completion was taken: nothing is left for the job
    assert item(cloud, f"translate#{job}") is None


def test_completion_delivered_three_times_closes_each_callback_once(cloud: LocalCloud) -> None:
    # Given both completions arrive three times (Translate's event, Macie's log line)
    simulate(cloud, translate={"event_copies": 3}, macie={"log_copies": 3})
    # When the durable function runs
    described = execute(Run(cloud))
    # Then it succeeds, each callback was closed exactly once, and no duplicate is dead-lettered
    assert described["Status"] == "SUCCEEDED", described
    assert callbacks_closed(cloud, described["DurableExecutionArn"]) == {"translate": 1, "macie": 1}
    result = json.loads(described["Result"])
    assert dead_letters(cloud, result["translation"]["jobId"], result["classification"]["jobId"]) == []


def test_lost_events_are_recovered_by_the_reconciler(cloud: LocalCloud) -> None:
    # Given both jobs finish but neither Translate's event nor Macie's log line ever arrives
    simulate(cloud, translate={"drop_events": True}, macie={"drop_logs": True})
    # When the durable function runs (the reconciler runs every simulated minute)
    described = execute(Run(cloud))
    # Then the reconciler finds both jobs finished through their APIs and closes both callbacks
    assert described["Status"] == "SUCCEEDED", described
    result = json.loads(described["Result"])
    assert (result["translation"]["status"], result["classification"]["status"]) == ("COMPLETED", "JOB_COMPLETED")
    assert callbacks_closed(cloud, described["DurableExecutionArn"]) == {"translate": 1, "macie": 1}


def test_failed_translation_fails_the_execution_with_its_status_and_reason(cloud: LocalCloud) -> None:
    # Given Translate ends the job FAILED (a JobName, i.e. execution name, starting with "fail-")
    simulate(cloud)
    name = f"fail-{uuid.uuid4().hex}"
    # When the durable function runs
    described = execute(Run(cloud), name)
    # Then the execution fails with JobFailedError, its message opening with the Step Functions workflow's error and
    # carrying the job and Translate's reason
    assert described["Status"] == "FAILED", described
    error = described["Error"]
    assert error["ErrorType"].endswith("JobFailedError"), error
    assert error["ErrorMessage"].startswith("Translate.FAILED: "), error
    assert translation_job(name) in error["ErrorMessage"]
    assert "The job failed (simulated by localcloud)." in error["ErrorMessage"]
    # And the Macie job's wait was still closed (by its own completion), once
    assert callbacks_closed(cloud, described["DurableExecutionArn"]) == {"translate": 1, "macie": 1}


def test_job_outlasting_the_wait_times_out_and_its_late_event_is_acknowledged(cloud: LocalCloud) -> None:
    # Given a translation that outlasts the wait's timeout (TaskTimeoutSeconds; the reconciler heartbeats it meanwhile)
    late = TASK_TIMEOUT_SECONDS + 2 * cloud.config.speedup
    simulate(cloud, translate={"delay_seconds": late})
    name = uuid.uuid4().hex
    # When the durable function runs
    described = execute(Run(cloud), name)
    # Then the execution fails with JobTimedOutError and the named timeout instead of hanging
    assert described["Status"] == "FAILED", described
    error = described["Error"]
    assert error["ErrorType"].endswith("JobTimedOutError"), error
    assert error["ErrorMessage"].startswith("Translate.Timeout: "), error
    # And it ran out at TaskTimeoutSeconds: the reconciler's heartbeats kept it past its heartbeat timeout until then
    history = durable_history(cloud, described["DurableExecutionArn"])
    timed_out = [e for e in history if e["EventType"] == "CallbackTimedOut"]
    assert [e["Name"] for e in timed_out] == ["translate"]
    opened = next(e for e in history if e["EventType"] == "CallbackStarted" and e["Id"] == timed_out[0]["Id"])
    assert timed_out[0]["EventTimestamp"] - opened["EventTimestamp"] >= timedelta(seconds=TASK_TIMEOUT_SECONDS)
    # And when the job's event finally arrives, it is acknowledged: nothing fails, nothing is dead-lettered
    settle_all()  # the late job has ended and its event is out (dead_letters then waits for its delivery)
    job = translation_job(name)
    assert dead_letters(cloud, job) == []
    assert not tokens_left(cloud, f"translate#{job}")
    assert callbacks_closed(cloud, described["DurableExecutionArn"]) == {"translate": 1, "macie": 1}


def test_long_running_job_is_kept_alive_by_heartbeats(cloud: LocalCloud) -> None:
    # Given a translation that takes longer than the wait's heartbeat timeout (but less than its timeout)
    heartbeat = int(PARAMETERS["HeartbeatSeconds"])
    simulate(cloud, translate={"delay_seconds": heartbeat + 2 * cloud.config.speedup})
    # When the durable function runs
    described = execute(Run(cloud))
    # Then the reconciler's heartbeats keep the callback open until the job's event closes it
    assert described["Status"] == "SUCCEEDED", described
    assert callbacks_closed(cloud, described["DurableExecutionArn"]) == {"translate": 1, "macie": 1}


def test_durable_waits_are_registered_as_callback_ids(cloud: LocalCloud) -> None:
    # Given jobs that take five simulated minutes
    simulate(cloud, translate={"delay_seconds": 5 * 60}, macie={"delay_seconds": 5 * 60})
    # When the durable function runs, while its jobs run
    execution_arn = start(Run(cloud))

    def both() -> dict[str, dict[str, Any]] | None:
        found = registered(cloud, execution_arn)
        return found if len(found) == 2 else None

    items = wait_for(both, 30, "both registrations")
    # Then each wait's item holds its callback's id, marked as one (so the resume function closes it through Lambda)
    assert {name: entry["waiterKind"]["S"] for name, entry in items.items()} == {
        "translate": "callbackId",
        "macie": "callbackId",
    }
    history = durable_history(cloud, execution_arn)
    issued = {e["Name"]: e["CallbackStartedDetails"]["CallbackId"] for e in history if "CallbackStartedDetails" in e}
    assert {name: entry["token"]["S"] for name, entry in items.items()} == issued
    # And the execution still ends as usual
    assert ended(cloud, execution_arn)["Status"] == "SUCCEEDED"
