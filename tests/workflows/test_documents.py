"""The documents workflow end to end: Translate and Macie jobs in parallel, each waiting on a task token and
resumed by its completion (Translate's event; Macie's job log relayed by the shim), then pii tags from the findings.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from localcloud import simulators
from localcloud.client import wait_for_execution
from localcloud.cloud import LocalCloud
from localcloud.simulators import settle_all
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator
from tests.localcloud.simulated import wait_for
from tests.workflows.conftest import PARAMETERS, TASK_TIMEOUT_SECONDS

CLEAN = "The meeting is on Tuesday."
PERSONAL = "Please write to jane.doe@example.com about the contract."


class Run:
    """One execution of the documents workflow over its own folder of documents."""

    def __init__(self, cloud: LocalCloud, documents: dict[str, str] | None = None) -> None:
        self.cloud = cloud
        self.bucket = cloud.stack.outputs["DocumentBucketName"]
        self.folder = uuid.uuid4().hex
        self.request = {
            "inputPrefix": f"{self.folder}/in/",
            "outputPrefix": f"{self.folder}/out/",
            "sourceLanguage": "en",
            "targetLanguages": ["de"],
        }
        for name, text in (documents or {"doc.txt": CLEAN}).items():
            cloud.client("s3").put_object(Bucket=self.bucket, Key=f"{self.folder}/in/{name}", Body=text.encode())

    def start(self, name: str | None = None) -> str:
        execution = self.cloud.client("stepfunctions").start_execution(
            stateMachineArn=self.cloud.stack.outputs["DocumentsWorkflowArn"],
            name=name or str(uuid.uuid4()),
            input=json.dumps(self.request),
        )
        return str(execution["executionArn"])

    def run(self, name: str | None = None) -> dict[str, Any]:
        return wait_for_execution(self.cloud, self.start(name), timeout=40, show=False)

    def tags(self, key: str) -> dict[str, str]:
        tag_set = self.cloud.client("s3").get_object_tagging(Bucket=self.bucket, Key=key)["TagSet"]
        return {t["Key"]: t["Value"] for t in tag_set}

    def outputs(self) -> list[str]:
        listed = self.cloud.client("s3").list_objects_v2(Bucket=self.bucket, Prefix=f"{self.folder}/out/")
        return [o["Key"] for o in listed.get("Contents", []) if "/details/" not in o["Key"]]


def simulate(cloud: LocalCloud, translate: dict[str, Any] | None = None, macie: dict[str, Any] | None = None) -> None:
    """Fresh simulated Translate and Macie for this test (each finishes after one simulated minute by default)."""
    region = cloud.config.region
    cloud.add_simulator(TranslateSimulator(region, clock=cloud.clock, **{"delay_seconds": 60, **(translate or {})}))
    cloud.add_simulator(MacieSimulator(region, clock=cloud.clock, **{"delay_seconds": 60, **(macie or {})}))


def history(cloud: LocalCloud, execution_arn: str) -> list[dict[str, Any]]:
    return list(cloud.client("stepfunctions").get_execution_history(executionArn=execution_arn)["events"])


def waits_resumed(cloud: LocalCloud, execution_arn: str) -> int:
    """How many waiting tasks were resumed with success (a task resumed twice would count twice)."""
    return sum(
        1
        for e in history(cloud, execution_arn)
        if e["type"] == "TaskSucceeded" and e["taskSucceededEventDetails"]["resource"] == "invoke.waitForTaskToken"
    )


def dead_letters(cloud: LocalCloud, *jobs: str) -> list[str]:
    """Dead-lettered messages about these jobs (other tests' late events may be there too)."""
    cloud.runtime.drain()
    queue = cloud.stack.outputs["ResumeDeadLetterQueueUrl"]
    messages = cloud.client("sqs").receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=0)
    bodies = [m["Body"] for m in messages.get("Messages", [])]
    return [body for body in bodies if any(job in body for job in jobs)]


def job_ids(cloud: LocalCloud, execution_arn: str) -> list[str]:
    """The Translate and Macie job ids an execution started."""
    return list(started(cloud, execution_arn).values())


def started(cloud: LocalCloud, execution_arn: str) -> dict[str, str]:
    """The job ids an execution has started so far, by the task's resource type (e.g. `aws-sdk:macie2`)."""
    outputs = {
        e["taskSucceededEventDetails"]["resourceType"]: json.loads(e["taskSucceededEventDetails"]["output"])
        for e in history(cloud, execution_arn)
        if e["type"] == "TaskSucceeded" and e["taskSucceededEventDetails"]["resourceType"].startswith("aws-sdk:")
    }
    return {service: output["JobId"] for service, output in outputs.items() if "JobId" in output}


def tokens_left(cloud: LocalCloud, job_key: str) -> list[dict[str, Any]]:
    """Task tokens still stored for a job. (A completion delivered again after the resume may record an outcome
    item, by design: it cannot tell a duplicate from an early completion; TTL removes it.)"""
    items = cloud.client("dynamodb").scan(TableName=cloud.stack.outputs["TokenTableName"], ConsistentRead=True)
    return [i for i in items["Items"] if i["jobKey"]["S"] == job_key and "token" in i]


def item(cloud: LocalCloud, job_key: str) -> dict[str, Any] | None:
    """The token table's item of a job (its waiter's token, or its outcome when the completion came first)."""
    table = cloud.stack.outputs["TokenTableName"]
    found = cloud.client("dynamodb").get_item(TableName=table, Key={"jobKey": {"S": job_key}}, ConsistentRead=True)
    stored: dict[str, Any] | None = found.get("Item")
    return stored


def translation_ended_before_its_wait(run: Run, name: str, client_token: str) -> str:
    """Start the Translate job that the execution named `name` will start (its JobName, the client token it will
    send: the same request, as an earlier attempt would have sent), and wait until its completion is recorded in the
    token table: the job's id. The execution's start then gets this job, already ended, back."""
    cloud = run.cloud
    role = next(r.physical_id for r in cloud.stack.resources if r.logical_id == "TranslateDataAccessRole")
    job = cloud.client("translate").start_text_translation_job(
        JobName=f"{cloud.stack.name}.{name}",
        ClientToken=client_token,
        InputDataConfig={"S3Uri": f"s3://{run.bucket}/{run.request['inputPrefix']}", "ContentType": "text/plain"},
        OutputDataConfig={"S3Uri": f"s3://{run.bucket}/{run.request['outputPrefix']}"},
        DataAccessRoleArn=cloud.client("iam").get_role(RoleName=role)["Role"]["Arn"],
        SourceLanguageCode=run.request["sourceLanguage"],
        TargetLanguageCodes=run.request["targetLanguages"],
    )
    job_id = str(job["JobId"])
    wait_for(lambda: "outcome" in (item(cloud, f"translate#{job_id}") or {}), 30, "the completion's record")
    return job_id


def test_happy_path_translates_classifies_and_tags(cloud: LocalCloud) -> None:
    # Given two documents, one with personal data, and jobs that finish after a simulated minute
    simulate(cloud)
    run = Run(cloud, {"clean.txt": CLEAN, "contact.txt": PERSONAL})
    # When the workflow runs
    described = run.run()
    # Then it succeeds with both jobs' results and the tagging counts
    assert described["status"] == "SUCCEEDED", described
    # And each document and its translation carry the pii tag Macie's findings call for; no token is left behind
    tagged_as_found_and_nothing_left(run, json.loads(described["output"]))


def tagged_as_found_and_nothing_left(run: Run, output: dict[str, Any]) -> None:
    """What the happy path leaves, whichever engine ran it: both jobs' results and the tagging counts; each of the
    run's two documents (`contact.txt` with personal data, `clean.txt` without) and its translation tagged as Macie's
    findings call for; no token left for either job."""
    assert output["translation"]["status"] == "COMPLETED"
    assert output["classification"]["status"] == "JOB_COMPLETED"
    assert output["tagged"] == {"documents": 2, "translations": 2, "withPii": 1}
    assert run.tags(f"{run.folder}/in/contact.txt")["pii"] == "true"
    assert run.tags(f"{run.folder}/in/clean.txt")["pii"] == "false"
    translated = {key.rsplit("/", 1)[1]: run.tags(key)["pii"] for key in run.outputs()}
    assert translated == {"de.contact.txt": "true", "de.clean.txt": "false"}
    assert not tokens_left(run.cloud, f"translate#{output['translation']['jobId']}")
    assert not tokens_left(run.cloud, f"macie#{output['classification']['jobId']}")


def test_with_macie_off_the_workflow_fails_before_it_starts_any_job(cloud: LocalCloud) -> None:
    # Given an account where Macie is off (the stack turned it on; someone turned it off since)
    simulate(cloud)
    macie = cloud.client("macie2")
    macie.disable_macie()
    try:
        # When the workflow runs
        described = Run(cloud).run()
    finally:
        macie.enable_macie()
    # Then it fails with a named error that says what to do
    assert (described["status"], described["error"]) == ("FAILED", "Macie.NotEnabled"), described
    assert "EnableMacie=true" in described["cause"]
    # And it started no job: no Translate job runs on with nothing waiting for it
    assert started(cloud, described["executionArn"]) == {}
    assert not simulators.active("translate").jobs  # type: ignore[union-attr]


def test_lifecycle_rules_expire_documents_by_their_pii_tag(cloud: LocalCloud) -> None:
    # Given the deployed bucket
    rules = cloud.client("s3").get_bucket_lifecycle_configuration(Bucket=cloud.stack.outputs["DocumentBucketName"])
    # Then pii=true and pii=false objects expire after their own retention (template defaults here)
    by_tag = {r["Filter"]["Tag"]["Value"]: r["Expiration"]["Days"] for r in rules["Rules"] if r["Status"] == "Enabled"}
    assert by_tag == {"true": 30, "false": 365}


def test_macie_without_findings_tags_everything_pii_false(cloud: LocalCloud) -> None:
    simulate(cloud)
    run = Run(cloud, {"a.txt": CLEAN, "b.txt": "Nothing personal here."})
    described = run.run()
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"])["tagged"]["withPii"] == 0
    assert {run.tags(f"{run.folder}/in/{n}")["pii"] for n in ("a.txt", "b.txt")} == {"false"}


def test_failed_translation_fails_the_workflow_with_its_status(cloud: LocalCloud) -> None:
    # Given Translate ends the job FAILED (a JobName, i.e. execution name, starting with "fail-")
    simulate(cloud)
    described = Run(cloud).run(name=f"fail-{uuid.uuid4()}")
    assert described["status"] == "FAILED"
    assert described["error"] == "Translate.FAILED"


def test_translation_completed_with_error_is_a_failure(cloud: LocalCloud) -> None:
    simulate(cloud, translate={"outcome": "COMPLETED_WITH_ERROR"})
    described = Run(cloud).run()
    assert described["status"] == "FAILED"
    assert described["error"] == "Translate.COMPLETED_WITH_ERROR"


def test_cancelled_classification_fails_the_workflow(cloud: LocalCloud) -> None:
    simulate(cloud, macie={"outcome": "JOB_CANCELLED"})
    described = Run(cloud).run()
    assert described["status"] == "FAILED"
    assert described["error"] == "Macie.JOB_CANCELLED"


def test_classification_that_could_not_read_the_bucket_fails_instead_of_tagging_pii_false(cloud: LocalCloud) -> None:
    # Given Macie logs BUCKET_ACCESS_DENIED (and then, as Macie does, JOB_COMPLETED)
    simulate(cloud, macie={"outcome": "BUCKET_ACCESS_DENIED"})
    run = Run(cloud, {"contact.txt": PERSONAL})
    described = run.run()
    # Then the workflow fails, whichever of the two log lines is delivered first (JOB_COMPLETED is confirmed against
    # the job's error status), and no document is tagged as free of personal data
    assert described["status"] == "FAILED"
    assert described["error"] in {"Macie.BUCKET_ACCESS_DENIED", "Macie.JOB_COMPLETED_WITH_ERRORS"}
    assert "pii" not in run.tags(f"{run.folder}/in/contact.txt")


def test_completion_before_registration_still_resumes(cloud: LocalCloud) -> None:
    # Given jobs whose completion is reported as soon as they start, and a Translate job that has ended, its completion
    # recorded, before the execution that starts it registers its token (StartTranslation's client token is the
    # execution's name: the same request brings back the same job)
    simulate(cloud, translate={"delay_seconds": 0}, macie={"delay_seconds": 0})
    run, name = Run(cloud), str(uuid.uuid4())
    job = translation_ended_before_its_wait(run, name, name)
    # When the workflow runs
    described = run.run(name)
    # Then the registration finds the recorded completion and resumes its branch at once; each wait resumed once
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"])["translation"]["jobId"] == job
    assert waits_resumed(cloud, described["executionArn"]) == 2
    # And the recorded completion was taken: nothing is left for the job
    assert item(cloud, f"translate#{job}") is None


def test_completion_delivered_three_times_resumes_each_wait_once(cloud: LocalCloud) -> None:
    # Given both completions arrive three times (Translate's event, Macie's log line)
    simulate(cloud, translate={"event_copies": 3}, macie={"log_copies": 3})
    described = Run(cloud).run()
    # Then the workflow succeeds, each waiting task succeeded exactly once, and no duplicate is dead-lettered
    assert described["status"] == "SUCCEEDED", described
    assert waits_resumed(cloud, described["executionArn"]) == 2
    assert dead_letters(cloud, *job_ids(cloud, described["executionArn"])) == []


def test_lost_events_are_recovered_by_the_reconciler(cloud: LocalCloud) -> None:
    # Given both jobs finish but neither Translate's event nor Macie's log line ever arrives
    simulate(cloud, translate={"drop_events": True}, macie={"drop_logs": True})
    # When the workflow runs (the reconciler runs every simulated minute)
    described = Run(cloud).run()
    # Then the reconciler finds both jobs finished through their APIs and resumes the workflow
    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    assert (output["translation"]["status"], output["classification"]["status"]) == ("COMPLETED", "JOB_COMPLETED")


def test_long_running_job_is_kept_alive_by_heartbeats(cloud: LocalCloud) -> None:
    # Given a translation that takes longer than HeartbeatSeconds (but less than the task timeout)
    heartbeat = int(PARAMETERS["HeartbeatSeconds"])
    simulate(cloud, translate={"delay_seconds": heartbeat + 2 * cloud.config.speedup})
    described = Run(cloud).run()
    # Then the reconciler's heartbeats keep the waiting task alive until the job's event resumes it
    assert described["status"] == "SUCCEEDED", described


def test_event_after_the_task_timed_out_is_acknowledged(cloud: LocalCloud) -> None:
    # Given a translation that outlasts the waiting task's timeout
    late = TASK_TIMEOUT_SECONDS + 2 * cloud.config.speedup
    simulate(cloud, translate={"delay_seconds": late})
    run = Run(cloud)
    described = run.run()
    # Then the workflow fails with the named timeout instead of hanging
    assert described["status"] == "FAILED"
    assert described["error"] == "Translate.Timeout"
    # And when the job's event finally arrives, it is acknowledged: nothing fails, nothing is dead-lettered
    settle_all()  # the late job has ended and its event is out (dead_letters then waits for its delivery)
    assert dead_letters(cloud, *job_ids(cloud, described["executionArn"])) == []
    assert history(cloud, described["executionArn"])[-1]["type"] == "ExecutionFailed"


def test_a_forged_macie_completion_resumes_nothing_while_the_job_still_runs(cloud: LocalCloud) -> None:
    # Given a workflow waiting for a Macie job that still runs (it ends after ten simulated minutes)
    simulate(cloud, macie={"delay_seconds": 10 * cloud.config.speedup})
    run = Run(cloud, {"contact.txt": PERSONAL})
    execution_arn = run.start()
    job = wait_for(lambda: started(cloud, execution_arn).get("aws-sdk:macie2"), timeout=20, what="the Macie job")
    wait_for(lambda: tokens_left(cloud, f"macie#{job}"), timeout=20, what="the Macie wait's registration")

    # When someone allowed events:PutEvents on the default bus sends the relayed event's shape: JOB_COMPLETED
    forged = {
        "jobId": job,
        "jobName": f"{cloud.stack.name}.{execution_arn.rpartition(':')[2]}",
        "eventType": "JOB_COMPLETED",
        "description": "The job finished running.",
    }
    cloud.client("events").put_events(
        Entries=[
            {
                "Source": "callback-kit.macie",
                "DetailType": "Macie Classification Job Log Event",
                "Detail": json.dumps(forged),
            }
        ]
    )

    # Then DescribeClassificationJob does not confirm it: the event is retried, then dead-lettered with the named
    # error, and the workflow still waits for the job, its token kept
    letters = wait_for(
        lambda: [d for d in dead_letters(cloud, job) if "JobEventNotConfirmedError" in d], timeout=20, what="the DLQ"
    )
    assert letters
    assert cloud.client("stepfunctions").describe_execution(executionArn=execution_arn)["status"] == "RUNNING"
    assert tokens_left(cloud, f"macie#{job}")
    # And the job's real completion still resumes it
    described = wait_for_execution(cloud, execution_arn, timeout=40, show=False)
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"])["tagged"]["withPii"] == 1
