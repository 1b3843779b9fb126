"""The simulated AWS HealthLake (localcloud.simulators.healthlake): boto3 on plain moto, and its SigV4 FHIR endpoint."""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from localcloud.account import Credential
from localcloud.clock import Clock
from localcloud.simulators import register
from localcloud.simulators.healthlake import HealthLakeSimulator
from tests.localcloud.simulated import ACCOUNT, REGION, client, collect, offline_account, wait_for
from tests.localcloud.simulated import event_queue as queue_for

BUCKET = "exports"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/healthlake-export"
KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/d330e7fc-b56c-4216-a250-f4c43ef46e83"
DELAY, SPEEDUP = 2.0, 20.0  # IN_PROGRESS after 0.05 s, terminal after 0.1 s of real time
TERMINAL = {"COMPLETED", "COMPLETED_WITH_ERRORS", "FAILED"}
FHIR_HEADERS = {"Content-Type": "application/fhir+json", "Prefer": "respond-async"}
FILE_NAME = re.compile(r"(?P<type>[A-Za-z]+)/(?P=type)-\d{19}-(?P<n>\d+)-0\.ndjson")


@pytest.fixture
def aws() -> Iterator[None]:
    with offline_account(BUCKET):
        yield


@pytest.fixture
def simulate(aws: None) -> Callable[..., HealthLakeSimulator]:
    """Register a HealthLakeSimulator with the given knobs (stopped by unregister_all)."""

    def make(**knobs: Any) -> HealthLakeSimulator:
        simulator = HealthLakeSimulator(REGION, **{"delay_seconds": DELAY, "clock": Clock(SPEEDUP), **knobs})
        register(simulator)
        return simulator

    return make


# --- helpers ------------------------------------------------------------------------------------------------------


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, {k.lower(): v for k, v in headers.items()}, body

    def json(self) -> Any:
        return json.loads(self.body)


def send(
    method: str,
    url: str,
    *,
    params: dict[str, str] | None = None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    sign: bool = True,
    service: str = "healthlake",
    region: str = REGION,
    credentials: Credentials | None = None,
    tamper: Callable[[AWSRequest], None] | None = None,
) -> Answer:
    """Send a request the way a Lambda would: botocore SigV4Auth over plain HTTP (urllib, which moto leaves alone)."""
    request = AWSRequest(method=method, url=url, params=params or {}, data=body, headers=dict(headers or {}))
    if sign:
        SigV4Auth(credentials or boto3.Session().get_credentials(), service, region).add_auth(request)
    if tamper is not None:
        tamper(request)
    prepared = request.prepare()
    url = str(prepared.url)
    assert url.startswith("http://127.0.0.1:")
    outgoing = urllib.request.Request(url, data=prepared.body, headers=dict(prepared.headers), method=method)  # noqa: S310
    try:
        with urllib.request.urlopen(outgoing, timeout=5) as response:  # noqa: S310 (a local http URL, checked above)
            return Answer(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as error:
        return Answer(error.code, dict(error.headers), error.read())


def export_body(name: str | None = "export-1", s3_uri: str = f"s3://{BUCKET}/out/", **overrides: Any) -> bytes:
    body: dict[str, Any] = {
        "OutputDataConfig": {"S3Configuration": {"S3Uri": s3_uri, "KmsKeyId": KEY}},
        "DataAccessRoleArn": ROLE,
        **overrides,
    }
    if name is not None:
        body["JobName"] = name
    return json.dumps(body).encode()


def kick_off(endpoint: str, since: datetime | None = None, body: bytes | None = None, **params: str) -> Answer:
    """POST {endpoint}$export as HealthLake documents it, with `_since` as a FHIR instant."""
    query = dict(params)
    if since is not None:
        query["_since"] = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    query.setdefault("_outputFormat", "application/fhir+ndjson")
    return send("POST", f"{endpoint}$export", params=query, body=body or export_body(), headers=FHIR_HEADERS)


def started(endpoint: str, since: datetime | None = None, body: bytes | None = None, **params: str) -> str:
    answer = kick_off(endpoint, since, body, **params)
    assert answer.status == 202, answer.body
    return str(answer.json()["jobId"])


def endpoint_of(datastore_id: str) -> str:
    props = client("healthlake").describe_fhir_datastore(DatastoreId=datastore_id)["DatastoreProperties"]
    return str(props["DatastoreEndpoint"])


def describe(datastore_id: str, job_id: str) -> dict[str, Any]:
    response = client("healthlake").describe_fhir_export_job(DatastoreId=datastore_id, JobId=job_id)
    return dict(response["ExportJobProperties"])


def terminal(datastore_id: str, job_id: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        props = describe(datastore_id, job_id)
        return props if props["JobStatus"] in TERMINAL else None

    return wait_for(probe, what=f"job {job_id} to end")


def output_keys(prefix: str = "out/") -> list[str]:
    contents = client("s3").list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return sorted(o["Key"] for o in contents)


def ndjson(key: str) -> list[dict[str, Any]]:
    data = client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
    assert data.endswith("\n")
    return [json.loads(line) for line in data.splitlines()]


def event_queue() -> str:
    """An SQS queue that receives every HealthLake event on the default bus."""
    return queue_for({"source": ["aws.healthlake"]})


# --- data stores --------------------------------------------------------------------------------------------------


def test_data_stores_are_active_at_once_and_describe_their_fhir_endpoint(simulate: Any) -> None:
    # Given a simulator
    simulator = simulate()
    healthlake = client("healthlake")

    # When a data store is created through the API, and one through the convenience method
    created = healthlake.create_fhir_datastore(DatastoreName="records", DatastoreTypeVersion="R4")
    other = simulator.create_datastore("other")

    # Then it is ACTIVE, with an ARN and a FHIR endpoint on the simulator's port
    datastore_id = created["DatastoreId"]
    assert re.fullmatch(r"[0-9a-f]{32}", datastore_id) and created["DatastoreStatus"] == "ACTIVE"
    assert created["DatastoreArn"] == f"arn:aws:healthlake:{REGION}:{ACCOUNT}:datastore/fhir/{datastore_id}"
    props = healthlake.describe_fhir_datastore(DatastoreId=datastore_id)["DatastoreProperties"]
    assert props["DatastoreEndpoint"] == f"http://127.0.0.1:{simulator.port}/datastore/{datastore_id}/r4/"
    assert props["DatastoreEndpoint"] == created["DatastoreEndpoint"] == simulator.endpoint(datastore_id)
    assert props["DatastoreName"] == "records" and props["DatastoreStatus"] == "ACTIVE"
    assert props["DatastoreTypeVersion"] == "R4" and isinstance(props["CreatedAt"], datetime)
    assert props["IdentityProviderConfiguration"]["AuthorizationStrategy"] == "AWS_AUTH"
    listed = healthlake.list_fhir_datastores()["DatastorePropertiesList"]
    assert sorted(d["DatastoreId"] for d in listed) == sorted([datastore_id, other])
    named = healthlake.list_fhir_datastores(Filter={"DatastoreName": "other"})["DatastorePropertiesList"]
    assert [d["DatastoreId"] for d in named] == [other]

    # And unknown data stores and bad requests are refused as HealthLake does
    with pytest.raises(ClientError) as missing:
        healthlake.describe_fhir_datastore(DatastoreId="0" * 32)
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as invalid:
        healthlake.describe_fhir_datastore(DatastoreId="x" * 33)
    assert invalid.value.response["Error"]["Code"] == "ValidationException"


# --- the FHIR REST kick-off ---------------------------------------------------------------------------------------


def test_signed_kick_off_starts_a_job_that_writes_healthlake_style_ndjson(simulate: Any) -> None:
    # Given the default seed (Patient and Observation, 5 each, last updated 5..1 days ago), slow enough to watch
    simulator = simulate(clock=Clock(5.0))  # IN_PROGRESS at 0.2 s, terminal at 0.4 s
    datastore_id = simulator.create_datastore()
    endpoint = endpoint_of(datastore_id)
    since = simulator.now() - timedelta(days=2, hours=12)

    # When a Lambda kicks off an export of what changed since 2.5 days ago
    answer = kick_off(endpoint, since)

    # Then HealthLake's 202 names the job in Content-Location (its last path segment) and in the body
    assert answer.status == 202
    job_id = answer.json()["jobId"]
    assert answer.headers["content-location"] == f"{endpoint}export/{job_id}"
    assert answer.headers["content-location"].rsplit("/", 1)[1] == job_id
    assert answer.json() == {"datastoreId": datastore_id, "jobStatus": "SUBMITTED", "jobId": job_id}
    assert re.fullmatch(r"[0-9a-f]{32}", job_id)

    # And the job goes SUBMITTED -> IN_PROGRESS -> COMPLETED, described in DescribeFHIRExportJob's shapes
    assert describe(datastore_id, job_id)["JobStatus"] == "SUBMITTED"
    wait_for(lambda: describe(datastore_id, job_id)["JobStatus"] == "IN_PROGRESS", what="IN_PROGRESS")
    props = terminal(datastore_id, job_id)
    folder = f"out/{datastore_id}-FHIR_EXPORT-{job_id}/"
    assert props["JobStatus"] == "COMPLETED" and props["JobName"] == "export-1"
    assert props["DatastoreId"] == datastore_id and props["DataAccessRoleArn"] == ROLE
    assert props["OutputDataConfig"] == {"S3Configuration": {"S3Uri": f"s3://{BUCKET}/{folder}", "KmsKeyId": KEY}}
    assert props["EndTime"] > props["SubmitTime"] and "Message" not in props

    # And one NDJSON file per resource type sits in HealthLake's layout, holding only what changed since _since
    keys = output_keys()
    assert [FILE_NAME.fullmatch(k.removeprefix(folder)) is not None for k in keys] == [True, True]
    assert [k.removeprefix(folder).split("/")[0] for k in keys] == ["Observation", "Patient"]
    for key in keys:
        resources = ndjson(key)
        assert len(resources) == 2
        assert all(datetime.fromisoformat(r["meta"]["lastUpdated"]) > since for r in resources)
        assert {r["resourceType"] for r in resources} == {key.removeprefix(folder).split("/")[0]}
        head = client("s3").head_object(Bucket=BUCKET, Key=key)
        assert head["ServerSideEncryption"] == "aws:kms" and head["SSEKMSKeyId"] == KEY

    # And the FHIR status endpoint (Content-Location) lists the files, in HealthLake's spelling
    status = send("GET", answer.headers["content-location"])
    assert status.status == 200
    body = status.json()
    assert body["exportJobProperties"]["jobStatus"] == "COMPLETED"
    assert body["exportJobProperties"]["outputDataConfig"]["s3Configuration"]["s3Uri"] == f"s3://{BUCKET}/{folder}"
    assert re.fullmatch(
        r"[A-Z][a-z]{2} \d{1,2}, \d{4} \d{1,2}:\d{2}:\d{2} [AP]M", body["exportJobProperties"]["endTime"]
    )
    assert sorted(o["url"] for o in body["output"]) == [f"s3://{BUCKET}/{k}" for k in keys]
    assert body["error"] == [] and body["requiresAccessToken"] is False
    assert body["request"].startswith(f"{endpoint}$export?")


def test_query_written_into_the_url_must_be_percent_encoded_as_sigv4_canonicalises_it(simulate: Any) -> None:
    # Given a data store
    simulator = simulate()
    endpoint = endpoint_of(simulator.create_datastore())
    headers = FHIR_HEADERS

    # When the query is written into the signed URL percent-encoded, and when it is left raw
    encoded = send(
        "POST",
        f"{endpoint}$export?_since=2020-01-01T00%3A00%3A00.000Z&_outputFormat=application%2Ffhir%2Bndjson",
        body=export_body(),
        headers=headers,
    )
    raw = send("POST", f"{endpoint}$export?_outputFormat=application/fhir+ndjson", body=export_body(), headers=headers)

    # Then the encoded one is accepted and the raw one refused: AWS signs the canonical (encoded) form only
    assert encoded.status == 202 and encoded.json()["jobId"]
    assert raw.status == 403 and "signature we calculated does not match" in raw.json()["issue"][0]["diagnostics"]


def _wrong_secret(request: AWSRequest) -> None:
    SigV4Auth(Credentials("FOOBARKEY", "not-the-secret"), "healthlake", REGION).add_auth(request)


def _tampered_body(request: AWSRequest) -> None:
    request.data = export_body(name="another-name")


@pytest.mark.parametrize(
    ("case", "kwargs", "reason"),
    [
        ("unsigned", {"sign": False}, "Missing Authentication Token"),
        ("wrong secret", {"tamper": _wrong_secret}, "signature we calculated does not match"),
        ("body changed after signing", {"tamper": _tampered_body}, "signature we calculated does not match"),
        ("unknown key", {"credentials": Credentials("AKIAUNKNOWN", "secret")}, "security token"),
        ("signed for execute-api", {"service": "execute-api"}, "correct service: 'healthlake'"),
        ("signed for another region", {"region": "eu-west-1"}, "valid region"),
    ],
)
def test_requests_not_signed_by_a_known_key_for_healthlake_are_refused(
    simulate: Any, case: str, kwargs: dict[str, Any], reason: str
) -> None:
    # Given a data store
    simulator = simulate()
    datastore_id = simulator.create_datastore()
    endpoint = endpoint_of(datastore_id)

    # When a kick-off arrives that is not properly signed
    answer = send("POST", f"{endpoint}$export", body=export_body(), headers=FHIR_HEADERS, **kwargs)

    # Then it answers 403 with a FHIR OperationOutcome, and no job starts
    assert answer.status == 403, case
    outcome = answer.json()
    assert outcome["resourceType"] == "OperationOutcome" and outcome["issue"][0]["code"] == "security"
    assert reason in outcome["issue"][0]["diagnostics"]
    assert client("healthlake").list_fhir_export_jobs(DatastoreId=datastore_id)["ExportJobPropertiesList"] == []


def test_extra_credentials_are_accepted(simulate: Any) -> None:
    # Given a simulator that also knows a second key
    extra = Credential("AKIAEXTRAKEY", "extra-secret", f"arn:aws:iam::{ACCOUNT}:user/x", "AIDAX", ACCOUNT)
    simulator = simulate(credentials=[extra])
    endpoint = endpoint_of(simulator.create_datastore())

    # When a kick-off is signed with it
    answer = send(
        "POST",
        f"{endpoint}$export",
        body=export_body(),
        headers=FHIR_HEADERS,
        credentials=Credentials("AKIAEXTRAKEY", "extra-secret"),
    )

    # Then it is accepted
    assert answer.status == 202


NO_KMS_KEY = json.dumps(
    {"OutputDataConfig": {"S3Configuration": {"S3Uri": f"s3://{BUCKET}/out"}}, "DataAccessRoleArn": ROLE}
).encode()
NO_ROLE = json.dumps(
    {"OutputDataConfig": {"S3Configuration": {"S3Uri": f"s3://{BUCKET}/out", "KmsKeyId": KEY}}}
).encode()
JSON_ONLY = {"Content-Type": "application/fhir+json"}


@pytest.mark.parametrize(
    ("method", "params", "body", "headers", "status", "code"),
    [
        pytest.param("GET", {}, None, {}, 405, "not-supported", id="GET is not documented for system exports"),
        pytest.param("POST", {}, export_body(), JSON_ONLY, 400, "invalid", id="no Prefer respond-async"),
        pytest.param(
            "POST", {"_since": "2024-01-01T00:00:00"}, export_body(), FHIR_HEADERS, 400, "invalid", id="_since no zone"
        ),
        pytest.param("POST", {"_since": "2024-01-01"}, export_body(), FHIR_HEADERS, 400, "invalid", id="_since a date"),
        pytest.param(
            "POST", {"_outputFormat": "text/csv"}, export_body(), FHIR_HEADERS, 400, "invalid", id="another format"
        ),
        pytest.param(
            "POST", {"since": "2024-01-01T00:00:00Z"}, export_body(), FHIR_HEADERS, 400, "not-supported", id="unknown"
        ),
        pytest.param("POST", {}, None, FHIR_HEADERS, 400, "required", id="no body"),
        pytest.param("POST", {}, NO_KMS_KEY, FHIR_HEADERS, 400, "invalid", id="no KMS key"),
        pytest.param("POST", {}, NO_ROLE, FHIR_HEADERS, 400, "invalid", id="no role"),
        pytest.param(
            "POST", {}, export_body(s3_uri="https://exports/out"), FHIR_HEADERS, 400, "invalid", id="bad S3 URI"
        ),
    ],
)
def test_malformed_kick_offs_are_refused_with_an_operation_outcome(
    simulate: Any,
    method: str,
    params: dict[str, str],
    body: bytes | None,
    headers: dict[str, str],
    status: int,
    code: str,
) -> None:
    # Given a data store
    simulator = simulate()
    datastore_id = simulator.create_datastore()
    endpoint = endpoint_of(datastore_id)

    # When a signed but malformed kick-off arrives
    answer = send(method, f"{endpoint}$export", params=params, body=body, headers=headers)

    # Then it is refused with the documented status and a FHIR OperationOutcome, and no job starts
    assert (answer.status, answer.json()["issue"][0]["code"]) == (status, code)
    assert answer.headers["content-type"] == "application/fhir+json"
    if status == 405:
        assert answer.headers["allow"] == "POST"
    assert client("healthlake").list_fhir_export_jobs(DatastoreId=datastore_id)["ExportJobPropertiesList"] == []


def test_unknown_data_stores_and_jobs_answer_404(simulate: Any) -> None:
    # Given a data store
    simulator = simulate()
    endpoint = endpoint_of(simulator.create_datastore())
    base = endpoint.rsplit("/datastore/", 1)[0]

    # When a kick-off names another data store, or the status of an unknown job is asked
    wrong_store = kick_off(f"{base}/datastore/{'0' * 32}/r4/")
    wrong_job = send("GET", f"{endpoint}export/{'1' * 32}")

    # Then both answer 404 not-found
    assert (wrong_store.status, wrong_store.json()["issue"][0]["code"]) == (404, "not-found")
    assert (wrong_job.status, wrong_job.json()["issue"][0]["code"]) == (404, "not-found")


# --- data and files -----------------------------------------------------------------------------------------------


def test_since_exports_only_resources_updated_after_it(simulate: Any) -> None:
    # Given an empty data store holding resources updated around a cut-off
    simulator = simulate()
    datastore_id = simulator.create_datastore(seed=False)
    cutoff = simulator.now() - timedelta(days=1)

    def at(moment: datetime, kind: str = "Observation") -> dict[str, Any]:
        stamp = moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return {"resourceType": kind, "id": str(uuid.uuid4()), "meta": {"lastUpdated": stamp}}

    before, exactly, after = at(cutoff - timedelta(minutes=1)), at(cutoff), at(cutoff + timedelta(minutes=1))
    patient = at(cutoff + timedelta(hours=1), "Patient")
    simulator.add_resources(datastore_id, [before, exactly, after, patient])

    # When an export runs with _since at the cut-off
    job_id = started(endpoint_of(datastore_id), cutoff)

    # Then only the resources updated strictly after it are exported
    assert terminal(datastore_id, job_id)["JobStatus"] == "COMPLETED"
    exported = {r["id"] for key in output_keys() for r in ndjson(key)}
    assert exported == {after["id"], patient["id"]}

    # And resources updated after the kick-off (its transactionTime) wait for the next export
    late = simulator.add_resources(datastore_id, [{"resourceType": "Observation"}])[0]
    second = started(endpoint_of(datastore_id), cutoff)
    assert terminal(datastore_id, second)["JobStatus"] == "COMPLETED"
    assert late["id"] in {
        r["id"] for key in output_keys(f"out/{datastore_id}-FHIR_EXPORT-{second}/") for r in ndjson(key)
    }


def test_without_since_everything_is_exported_and_type_narrows_it(simulate: Any) -> None:
    # Given the default seed of three types
    simulator = simulate(file_count=3)
    datastore_id = simulator.create_datastore()
    endpoint = endpoint_of(datastore_id)

    # When everything is exported, and then only Encounters
    everything = started(endpoint)
    terminal(datastore_id, everything)
    encounters = started(endpoint, _type="Encounter")
    terminal(datastore_id, encounters)

    # Then the first job holds all 15 resources in 3 files, the second the 5 Encounters only
    full = output_keys(f"out/{datastore_id}-FHIR_EXPORT-{everything}/")
    assert [k.split("/")[2] for k in full] == ["Encounter", "Observation", "Patient"]
    assert sum(len(ndjson(k)) for k in full) == 15
    narrowed = output_keys(f"out/{datastore_id}-FHIR_EXPORT-{encounters}/")
    assert [k.split("/")[2] for k in narrowed] == ["Encounter"] and len(ndjson(narrowed[0])) == 5


def test_record_bytes_makes_large_files_of_exact_line_sizes(simulate: Any) -> None:
    # Given padded records, 5 per file, of two types
    simulator = simulate(file_count=2, records_per_file=5, record_bytes=60_000)
    datastore_id = simulator.create_datastore()

    # When everything is exported
    job_id = started(endpoint_of(datastore_id))

    # Then there are two files of five 60,000-byte lines each, well above 256 KB
    assert terminal(datastore_id, job_id)["JobStatus"] == "COMPLETED"
    keys = output_keys()
    assert len(keys) == 2
    for key in keys:
        data = client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read()
        assert len(data) == 5 * 60_001 > 256 * 1024
        assert [len(line) for line in data.split(b"\n")[:-1]] == [60_000] * 5
        assert all(json.loads(line)["meta"]["lastUpdated"] for line in data.split(b"\n")[:-1])


def test_records_per_file_caps_the_lines_of_each_file(simulate: Any) -> None:
    # Given a data store with 5 Observations more than the seed, and at most 4 resources per file
    simulator = simulate(file_count=1, records_per_file=4)
    datastore_id = simulator.create_datastore()
    simulator.add_resources(datastore_id, [{"resourceType": "Observation"} for _ in range(5)])

    # When everything is exported
    job_id = started(endpoint_of(datastore_id))

    # Then the 4 Patients fill one file and the 5 Observations two (4 + 1), numbered from 1
    assert terminal(datastore_id, job_id)["JobStatus"] == "COMPLETED"
    folder = f"out/{datastore_id}-FHIR_EXPORT-{job_id}/"
    names = [FILE_NAME.fullmatch(k.removeprefix(folder)) for k in output_keys()]
    assert [(m["type"], m["n"]) for m in names if m] == [("Observation", "1"), ("Observation", "2"), ("Patient", "1")]
    assert [len(ndjson(k)) for k in output_keys()] == [4, 1, 4]


# --- outcomes and events ------------------------------------------------------------------------------------------


def test_completed_job_emits_submitted_in_progress_and_completed_events(simulate: Any) -> None:
    # Given a queue for every HealthLake event
    simulator = simulate()
    datastore_id = simulator.create_datastore()
    queue = event_queue()

    # When an export completes
    job_id = started(endpoint_of(datastore_id))
    props = terminal(datastore_id, job_id)

    # Then three events arrive, with HealthLake's source, detail-types, detail and the data store as resource
    events = collect(queue, 3)
    assert sorted(e["detail-type"] for e in events) == [
        "Export Job Completed",
        "Export Job In Progress",
        "Export Job Submitted",
    ]
    for event in events:
        assert event["source"] == "aws.healthlake" and event["region"] == REGION
        assert event["resources"] == [f"arn:aws:healthlake:{REGION}:{ACCOUNT}:datastore/fhir/{datastore_id}"]
        assert event["detail"] == {
            "datastoreId": datastore_id,
            "jobId": job_id,
            "submitTime": props["SubmitTime"].astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "outputDataConfig": {"s3Uri": props["OutputDataConfig"]["S3Configuration"]["S3Uri"]},
        }


def test_completed_with_errors_writes_the_other_types_and_an_error_file(simulate: Any) -> None:
    # Given a simulator whose jobs complete with errors, and a queue for HealthLake events
    simulator = simulate(outcome="COMPLETED_WITH_ERRORS", file_count=2)
    datastore_id = simulator.create_datastore()
    queue = event_queue()

    # When everything is exported
    answer = kick_off(endpoint_of(datastore_id))
    job_id = answer.json()["jobId"]
    props = terminal(datastore_id, job_id)

    # Then the Patients (the type that sorts last) failed: Observations were written, the failures listed
    folder = f"out/{datastore_id}-FHIR_EXPORT-{job_id}/"
    assert props["JobStatus"] == "COMPLETED_WITH_ERRORS"
    assert props["Message"].startswith("5 of 10 resources could not be exported")
    keys = output_keys()
    assert [k.removeprefix(folder).split("/")[0] for k in keys] == ["Observation", "OperationOutcome"]
    errors = ndjson(keys[1])
    assert len(errors) == 5 and {e["resourceType"] for e in errors} == {"OperationOutcome"}
    status = send("GET", answer.headers["content-location"]).json()
    assert [e["type"] for e in status["error"]] == ["OperationOutcome"] and len(status["output"]) == 1
    assert "Export Job Completed With Errors" in [e["detail-type"] for e in collect(queue, 3)]


@pytest.mark.parametrize("knob", ["outcome", "job name"])
def test_failed_job_writes_nothing_and_says_why(simulate: Any, knob: str) -> None:
    # Given a simulator (or a job name) that fails exports, and a queue for HealthLake events
    simulator = simulate(outcome="FAILED") if knob == "outcome" else simulate()
    datastore_id = simulator.create_datastore()
    queue = event_queue()

    # When an export runs
    job_id = started(endpoint_of(datastore_id), body=export_body(name="fail-now" if knob == "job name" else "x"))

    # Then it ends FAILED with a Message, writes nothing, and says so on the bus
    props = terminal(datastore_id, job_id)
    assert props["JobStatus"] == "FAILED" and props["Message"] and "EndTime" in props
    assert output_keys() == []
    assert sorted(e["detail-type"] for e in collect(queue, 3)) == [
        "Export Job Failed",
        "Export Job In Progress",
        "Export Job Submitted",
    ]


def test_missing_output_bucket_fails_the_job(simulate: Any) -> None:
    # Given a data store and an output location in a bucket that does not exist
    simulator = simulate()
    datastore_id = simulator.create_datastore()

    # When an export is started there
    job_id = started(endpoint_of(datastore_id), body=export_body(s3_uri="s3://no-such-bucket/out/"))

    # Then the kick-off is accepted but the job ends FAILED, as on AWS
    props = terminal(datastore_id, job_id)
    assert props["JobStatus"] == "FAILED" and "no-such-bucket" in props["Message"]


def test_stuck_job_stays_in_progress(simulate: Any) -> None:
    # Given a simulator whose jobs never end, and a queue for HealthLake events
    simulator = simulate(outcome="STUCK")
    datastore_id = simulator.create_datastore()
    queue = event_queue()

    # When an export starts and far more than the delay passes
    job_id = started(endpoint_of(datastore_id))
    wait_for(lambda: describe(datastore_id, job_id)["JobStatus"] == "IN_PROGRESS", what="IN_PROGRESS")
    simulator.settle()  # every step the job has scheduled, its end included, has run

    # Then it is still IN_PROGRESS, wrote nothing, and only the Submitted and In Progress events were sent
    props = describe(datastore_id, job_id)
    assert props["JobStatus"] == "IN_PROGRESS" and "EndTime" not in props
    assert output_keys() == []
    # (a job of an earlier test that was finishing as its simulator stopped may still announce itself: not this one)
    mine = [e["detail-type"] for e in collect(queue, 2) if e["detail"]["jobId"] == job_id]
    assert sorted(mine) == ["Export Job In Progress", "Export Job Submitted"]


# --- one running export -------------------------------------------------------------------------------------------


def test_one_running_export_refuses_a_second_until_the_first_ends(simulate: Any) -> None:
    # Given a running export (a slow clock keeps it running)
    simulator = simulate(clock=Clock(2.0))  # terminal after 1 s
    datastore_id = simulator.create_datastore()
    endpoint = endpoint_of(datastore_id)
    first = started(endpoint)

    # When another export is kicked off over FHIR REST, and one through StartFHIRExportJob
    second = kick_off(endpoint)
    no_retries = boto3.client("healthlake", region_name=REGION, config=Config(retries={"total_max_attempts": 1}))
    with pytest.raises(ClientError) as refused:  # (botocore retries ThrottlingException by default)
        no_retries.start_fhir_export_job(
            DatastoreId=datastore_id,
            OutputDataConfig={"S3Configuration": {"S3Uri": f"s3://{BUCKET}/out/", "KmsKeyId": KEY}},
            DataAccessRoleArn=ROLE,
        )

    # Then the REST kick-off answers 429 throttled with Retry-After, and the API raises ThrottlingException
    assert second.status == 429 and second.headers["retry-after"]
    assert second.json()["issue"][0]["code"] == "throttled"
    assert refused.value.response["Error"]["Code"] == "ThrottlingException"

    # And once the first has ended, a new export is accepted
    assert terminal(datastore_id, first)["JobStatus"] == "COMPLETED"
    assert kick_off(endpoint).status == 202


def test_stuck_export_blocks_every_later_one(simulate: Any) -> None:
    # Given an export stuck IN_PROGRESS
    simulator = simulate()
    datastore_id = simulator.create_datastore()
    endpoint = endpoint_of(datastore_id)
    stuck = started(endpoint, body=export_body(name="stuck-1"))
    simulator.settle()  # past its end, which never comes

    # When another export is kicked off, even on another data store
    other = kick_off(endpoint_of(simulator.create_datastore()))

    # Then it is refused
    assert describe(datastore_id, stuck)["JobStatus"] == "IN_PROGRESS"
    assert other.status == 429


def test_concurrent_exports_run_when_allowed(simulate: Any) -> None:
    # Given a simulator without the one-export quota
    simulator = simulate(one_running_export=False)
    datastore_id = simulator.create_datastore()
    endpoint = endpoint_of(datastore_id)

    # When two exports are kicked off at once
    first, second = started(endpoint), started(endpoint)

    # Then both run to completion
    assert terminal(datastore_id, first)["JobStatus"] == terminal(datastore_id, second)["JobStatus"] == "COMPLETED"


# --- the API's own export operations ------------------------------------------------------------------------------


def test_start_fhir_export_job_runs_the_same_jobs_and_is_idempotent(simulate: Any) -> None:
    # Given a data store
    simulator = simulate()
    datastore_id = simulator.create_datastore()
    healthlake = client("healthlake")
    request: dict[str, Any] = {
        "JobName": "sdk-export",
        "DatastoreId": datastore_id,
        "OutputDataConfig": {"S3Configuration": {"S3Uri": f"s3://{BUCKET}/out", "KmsKeyId": KEY}},
        "DataAccessRoleArn": ROLE,
        "ClientToken": "token-1",
    }

    # When StartFHIRExportJob is called, and retried with the same ClientToken
    response = healthlake.start_fhir_export_job(**request)
    retried = healthlake.start_fhir_export_job(**request)

    # Then one job runs (no _since: everything) and the retry names the same job
    job_id = response["JobId"]
    assert response["JobStatus"] == "SUBMITTED" and response["DatastoreId"] == datastore_id
    assert retried["JobId"] == job_id
    props = terminal(datastore_id, job_id)
    assert props["JobStatus"] == "COMPLETED" and props["JobName"] == "sdk-export"
    folder = f"out/{datastore_id}-FHIR_EXPORT-{job_id}/"
    assert props["OutputDataConfig"]["S3Configuration"]["S3Uri"] == f"s3://{BUCKET}/{folder}"
    assert sum(len(ndjson(k)) for k in output_keys(folder)) == 10

    # And ListFHIRExportJobs finds it by name and status
    listed = healthlake.list_fhir_export_jobs(DatastoreId=datastore_id, JobName="sdk-export", JobStatus="COMPLETED")
    assert [j["JobId"] for j in listed["ExportJobPropertiesList"]] == [job_id]
    none = healthlake.list_fhir_export_jobs(DatastoreId=datastore_id, JobStatus="FAILED")
    assert none["ExportJobPropertiesList"] == []


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"DatastoreId": "0" * 32}, "ResourceNotFoundException"),
        ({"OutputDataConfig": {"S3Configuration": {"S3Uri": "bucket/out", "KmsKeyId": KEY}}}, "ValidationException"),
        ({"DataAccessRoleArn": "arn:aws:iam::123456789012:user/someone"}, "ValidationException"),
        (
            {"OutputDataConfig": {"S3Configuration": {"S3Uri": f"s3://{BUCKET}/o", "KmsKeyId": "bad!"}}},
            "ValidationException",
        ),
    ],
)
def test_start_fhir_export_job_validates_like_healthlake(simulate: Any, overrides: dict[str, Any], code: str) -> None:
    # Given a data store
    simulator = simulate()
    datastore_id = simulator.create_datastore()
    request: dict[str, Any] = {
        "DatastoreId": datastore_id,
        "OutputDataConfig": {"S3Configuration": {"S3Uri": f"s3://{BUCKET}/out", "KmsKeyId": KEY}},
        "DataAccessRoleArn": ROLE,
        **overrides,
    }

    # When StartFHIRExportJob is called with a bad request
    with pytest.raises(ClientError) as refused:
        client("healthlake").start_fhir_export_job(**request)

    # Then it raises HealthLake's error
    assert refused.value.response["Error"]["Code"] == code


def test_describe_fhir_export_job_needs_the_jobs_own_data_store(simulate: Any) -> None:
    # Given a job on one data store
    simulator = simulate()
    datastore_id, other = simulator.create_datastore(), simulator.create_datastore()
    job_id = started(endpoint_of(datastore_id))

    # When it is described under another data store
    with pytest.raises(ClientError) as missing:
        describe(other, job_id)

    # Then it is not found there
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"


# --- lifecycle of the simulator -----------------------------------------------------------------------------------


def test_stop_closes_the_fhir_endpoint(aws: None) -> None:
    # Given a simulator serving its FHIR endpoint
    simulator = HealthLakeSimulator(REGION)
    port = simulator.port
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        pass

    # When it is stopped (twice: stop is idempotent)
    simulator.stop()
    simulator.stop()

    # Then nothing listens on its port any more
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


def test_knobs_are_checked(aws: None) -> None:
    for knobs in ({"outcome": "DONE"}, {"file_count": 11}, {"records_per_file": 0}):
        with pytest.raises(ValueError):
            HealthLakeSimulator(REGION, **knobs)
