"""The simulated Bedrock Data Automation runtime (localcloud.simulators.bda), seen by a boto3 client on plain moto."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from localcloud.clock import Clock, ManualClock
from localcloud.simulators import register
from localcloud.simulators.bda import BdaSimulator
from tests.localcloud.simulated import ACCOUNT, REGION, client, collect, offline_account, wait_for
from tests.localcloud.simulated import event_queue as queue_for

BUCKET = "docs"
PROJECT = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:data-automation-project/invoices"
PROFILE = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:data-automation-profile/us.data-automation-v1"
DELAY, SPEEDUP = 2.0, 20.0  # InProgress after 0.05 s, ended after 0.1 s of real time
TERMINAL = {"Success", "ClientError", "ServiceError"}


@pytest.fixture
def aws() -> Iterator[None]:
    with offline_account(BUCKET):
        yield


@pytest.fixture
def simulate(aws: None) -> Callable[..., tuple[Any, BdaSimulator]]:
    """Register a BdaSimulator with the given knobs; return a client answered by it, and the simulator."""

    def make(**knobs: Any) -> tuple[Any, BdaSimulator]:
        simulator = BdaSimulator(REGION, **{"delay_seconds": DELAY, "clock": Clock(SPEEDUP), **knobs})
        register(simulator)
        return client("bedrock-data-automation-runtime"), simulator

    return make


def put_document(name: str, text: str = "Invoice 42: 3 widgets, 99.00 EUR") -> str:
    client("s3").put_object(Bucket=BUCKET, Key=f"in/{name}", Body=text.encode())
    return f"s3://{BUCKET}/in/{name}"


def invoke(bda: Any, input_uri: str, **overrides: Any) -> str:
    request: dict[str, Any] = {
        "inputConfiguration": {"s3Uri": input_uri},
        "outputConfiguration": {"s3Uri": f"s3://{BUCKET}/out"},
        "dataAutomationConfiguration": {"dataAutomationProjectArn": PROJECT, "stage": "LIVE"},
        "dataAutomationProfileArn": PROFILE,
        "notificationConfiguration": {"eventBridgeConfiguration": {"eventBridgeEnabled": True}},
        **overrides,
    }
    return str(bda.invoke_data_automation_async(**request)["invocationArn"])


def status(bda: Any, arn: str) -> dict[str, Any]:
    return dict(bda.get_data_automation_status(invocationArn=arn))


def ended(bda: Any, arn: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        now = status(bda, arn)
        return now if now["status"] in TERMINAL else None

    return wait_for(probe, what=f"{arn} to end")


def read_json(uri: str) -> Any:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return json.loads(client("s3").get_object(Bucket=bucket, Key=key)["Body"].read())


def event_queue() -> str:
    return queue_for({"source": ["aws.bedrock"], "detail-type": [{"prefix": "Bedrock Data Automation Job"}]})


def test_job_goes_created_in_progress_success_and_writes_its_output_where_status_says(simulate: Any) -> None:
    # Given a document and a simulator slow enough to watch
    bda, _ = simulate(clock=Clock(5.0))
    uri = put_document("invoice.pdf")

    # When a job is invoked
    arn = invoke(bda, uri)

    # Then it has an invocation ARN, is Created, goes InProgress and ends Success
    job_id = arn.rpartition("/")[2]
    assert arn == f"arn:aws:bedrock:{REGION}:{ACCOUNT}:data-automation-invocation/{job_id}"
    assert status(bda, arn)["status"] == "Created"
    wait_for(lambda: status(bda, arn)["status"] == "InProgress", what="InProgress")
    done = ended(bda, arn)
    assert done["status"] == "Success" and "errorType" not in done
    assert done["jobCompletionTime"] > done["jobSubmissionTime"]

    # And the job metadata sits where the status points, naming the standard output, which holds the document's text
    assert done["outputConfiguration"]["s3Uri"] == f"s3://{BUCKET}/out/{job_id}/job_metadata.json"
    metadata = read_json(done["outputConfiguration"]["s3Uri"])
    assert metadata["job_id"] == job_id
    [segment] = metadata["output_metadata"][0]["segment_metadata"]
    assert segment["standard_output_path"] == f"s3://{BUCKET}/out/{job_id}/0/standard_output/0/result.json"
    result = read_json(segment["standard_output_path"])
    assert result["pages"][0]["representation"]["text"] == "Invoice 42: 3 widgets, 99.00 EUR"


def test_events_have_bdas_documented_shape_for_each_outcome(simulate: Any) -> None:
    # Given three documents steered to each outcome and a queue for BDA's events
    bda, _ = simulate()
    queue = event_queue()
    arns = {name: invoke(bda, put_document(name)) for name in ("ok.pdf", "fail-bad.pdf", "error-oops.pdf")}

    # When they end
    events = collect(queue, 6)

    # Then each job says Created, then its outcome, with the job id, the input object and the output location
    by_type: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        assert event["source"] == "aws.bedrock" and event["resources"] == []
        by_type.setdefault(event["detail-type"], []).append(event["detail"])
    assert {k: len(v) for k, v in by_type.items()} == {
        "Bedrock Data Automation Job Created": 3,
        "Bedrock Data Automation Job Succeeded": 1,
        "Bedrock Data Automation Job Failed With Client Error": 1,
        "Bedrock Data Automation Job Failed With Service Error": 1,
    }
    [succeeded] = by_type["Bedrock Data Automation Job Succeeded"]
    job_id = arns["ok.pdf"].rpartition("/")[2]
    assert succeeded["job_id"] == job_id and succeeded["job_status"] == "SUCCESS"
    assert succeeded["input_s3_object"] == {"s3_bucket": BUCKET, "name": "in/ok.pdf"}
    assert succeeded["output_s3_location"] == {"s3_bucket": BUCKET, "name": f"out/{job_id}/0"}
    assert isinstance(succeeded["job_duration_in_seconds"], int)
    [client_error] = by_type["Bedrock Data Automation Job Failed With Client Error"]
    assert client_error["job_status"] == "CLIENT_ERROR" and client_error["error_message"]
    assert by_type["Bedrock Data Automation Job Failed With Service Error"][0]["job_status"] == "SERVICE_ERROR"

    # And the status API agrees, with the error's type and message and no output
    failed = status(bda, arns["fail-bad.pdf"])
    assert failed["status"] == "ClientError" and failed["errorType"] == "ClientError" and failed["errorMessage"]
    assert "outputConfiguration" not in failed
    assert status(bda, arns["error-oops.pdf"])["status"] == "ServiceError"


def test_missing_input_ends_client_error_and_disabled_notifications_emit_nothing(simulate: Any) -> None:
    # Given a queue for BDA's events
    bda, simulator = simulate()
    queue = event_queue()

    # When a job on a missing object runs with EventBridge notifications off
    arn = invoke(
        bda,
        f"s3://{BUCKET}/in/missing.pdf",
        notificationConfiguration={"eventBridgeConfiguration": {"eventBridgeEnabled": False}},
    )

    # Then it ends ClientError, and no event was put
    assert ended(bda, arn)["status"] == "ClientError"
    simulator.settle()
    assert collect(queue, 0) == []


def test_same_client_token_answers_the_same_invocation_and_starts_nothing(simulate: Any) -> None:
    # Given a document
    bda, simulator = simulate()
    uri = put_document("invoice.pdf")

    # When the same call is made twice with one client token
    first = invoke(bda, uri, clientToken="extract-1-invoice")
    again = invoke(bda, uri, clientToken="extract-1-invoice")

    # Then both answer one invocation, and one job ran
    assert first == again
    assert len(simulator.jobs) == 1


def test_a_call_beyond_the_concurrent_job_quota_fails_with_service_quota_exceeded(aws: None) -> None:
    # Given a quota of 2 and jobs that end only when the clock is moved
    clock = ManualClock()
    simulator = BdaSimulator(REGION, delay_seconds=60, clock=clock, max_concurrent_jobs=2)
    register(simulator)
    bda = client("bedrock-data-automation-runtime")
    uris = [put_document(f"doc-{n}.pdf") for n in range(3)]
    running = [invoke(bda, uris[0]), invoke(bda, uris[1])]

    # When a third job is invoked while two run
    with pytest.raises(ClientError) as refused:
        invoke(bda, uris[2], clientToken="third")

    # Then it is refused with ServiceQuotaExceededException, nothing started, and the counters say so
    assert refused.value.response["Error"]["Code"] == "ServiceQuotaExceededException"
    assert (simulator.rejected, simulator.peak_jobs, len(simulator.jobs)) == (1, 2, 2)

    # And once a job has ended, the same call is accepted
    clock.advance(60)
    simulator.settle()
    assert {status(bda, arn)["status"] for arn in running} == {"Success"}
    assert invoke(bda, uris[2], clientToken="third").startswith("arn:aws:bedrock:")
    assert (simulator.rejected, simulator.peak_jobs) == (1, 2)


def test_per_document_durations_and_validation(simulate: Any) -> None:
    # Given durations chosen per input document
    bda, simulator = simulate(durations=lambda uri: 40.0 if uri.endswith("slow.pdf") else 2.0)
    quick, slow = invoke(bda, put_document("quick.pdf")), invoke(bda, put_document("slow.pdf"))

    # When the quick one has ended
    ended(bda, quick)

    # Then the slow one still runs
    assert status(bda, slow)["status"] in {"Created", "InProgress"}
    assert simulator.running_jobs == 1

    # And a malformed profile ARN or an unknown invocation are refused as the service does
    with pytest.raises(ClientError) as invalid:
        invoke(bda, put_document("x.pdf"), dataAutomationProfileArn="arn:aws:bedrock:us-east-1:1:profile/x")
    assert invalid.value.response["Error"]["Code"] == "ValidationException"
    with pytest.raises(ClientError) as unknown:
        status(bda, f"arn:aws:bedrock:{REGION}:{ACCOUNT}:data-automation-invocation/nope")
    assert unknown.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_a_profile_of_another_geography_is_refused(aws: None) -> None:
    # Given Bedrock Data Automation in eu-west-1, called there
    simulator = BdaSimulator("eu-west-1")
    register(simulator)
    bda, document = boto3.client("bedrock-data-automation-runtime", region_name="eu-west-1"), put_document("x.pdf")
    eu_profile = f"arn:aws:bedrock:eu-west-1:{ACCOUNT}:data-automation-profile/eu.data-automation-v1"

    # When a job is asked for on the US profile (a US Region's default), then on the EU one
    with pytest.raises(ClientError) as refused:
        invoke(bda, document, dataAutomationProfileArn=PROFILE)
    accepted = invoke(bda, document, dataAutomationProfileArn=eu_profile)

    # Then the US profile is refused as BDA refuses a profile it does not offer in the Region
    assert refused.value.response["Error"] == {
        "Code": "ValidationException",
        "Message": f"The data automation profile {PROFILE} is not of eu-west-1's geography: use its "
        "eu.data-automation-v1 profile.",
    }
    # And the EU profile's job is the only one started
    assert [job.arn for job in simulator.jobs.values()] == [accepted]
