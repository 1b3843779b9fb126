"""`make demo` (`python -m tools.demo`): run every workflow of template.yaml end to end on the offline cloud, showing
each step, then a summary; a non-zero exit if one failed. The app's demo, not the emulator's: its flows and sample
documents belong to this template (`make local` seeds the documents: `python -m localcloud serve --seed
tools.demo.sample_documents`).

Each flow drives a workflow through its public surface (S3, StartExecution) with the simulated services it needs,
prints the states as the execution passes them, checks the result a user would check, and reports PASS/FAIL. The
functions' logs, moto's, werkzeug's and warnings go to a log file of the demo's own (emptied first, apart from a
`make local`'s), whose path it prints.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import requests

from localcloud import simulators
from localcloud.__main__ import banner, cloud_arguments, serving_config, simulated_services
from localcloud.client import SignedClient, durable_history, route_logs, wait_for_execution
from localcloud.cloud import LocalCloud, log_path
from localcloud.simulators.bda import HIGH_QUOTA_REGIONS, BdaSimulator
from localcloud.simulators.healthlake import HealthLakeSimulator
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator
from localcloud.usage import Parser, prog, run

PROG = prog("tools.demo")

DOCUMENTS = {
    "welcome.txt": "Welcome to callback-kit.",
    "contact.txt": "Questions? Write to jane.doe@example.com or call 555-0100.",
    "notes.txt": "No polling was harmed.",
}
# Where `make local` puts DOCUMENTS, so that the README's documents task has something to translate.
SAMPLE_PREFIX = "docs/in/"


def seed_documents(cloud: LocalCloud, prefix: str = SAMPLE_PREFIX) -> str:
    """Put the sample DOCUMENTS into the stack's document bucket under `prefix` (again: idempotent); return the
    S3 URI of that prefix."""
    bucket, s3 = cloud.stack.outputs["DocumentBucketName"], cloud.client("s3")
    for name, text in DOCUMENTS.items():
        s3.put_object(Bucket=bucket, Key=f"{prefix}{name}", Body=text.encode())
    return f"s3://{bucket}/{prefix}"


def sample_documents(cloud: LocalCloud) -> str:
    """`make local`'s seed (`python -m localcloud serve --seed`): the sample DOCUMENTS where the README's documents
    task reads them, and the line under the banner that says so."""
    return f"sample documents {seed_documents(cloud)}{{{','.join(DOCUMENTS)}}}   (the README's documents task)"


def _documents_run(cloud: LocalCloud, folder: str, expect: str = "SUCCEEDED") -> dict[str, Any]:
    """Upload the demo documents under `folder`, run the documents workflow over them, return DescribeExecution
    (an AssertionError unless the execution ended `expect`)."""
    seed_documents(cloud, f"{folder}/input/")
    request = {
        "inputPrefix": f"{folder}/input/",
        "outputPrefix": f"{folder}/output/",
        "sourceLanguage": "en",
        "targetLanguages": ["es", "fr"],
    }
    print(f"    start DocumentsWorkflow {json.dumps(request)}")
    execution = cloud.client("stepfunctions").start_execution(
        stateMachineArn=cloud.stack.outputs["DocumentsWorkflowArn"], input=json.dumps(request)
    )
    described = wait_for_execution(cloud, execution["executionArn"])
    if described["status"] != expect:
        raise AssertionError(f"execution ended {described['status']}: {described.get('error')}")
    return described


def macie_off_flow(cloud: LocalCloud) -> str:
    """Macie off in the account (a new account's default): the documents workflow is refused before it starts a
    job. The stack turned Macie on (EnableMacie=true); the flow turns it off, runs, and turns it on again."""
    region = cloud.config.region
    translate = TranslateSimulator(region, delay_seconds=120, clock=cloud.clock)
    cloud.add_simulator(translate)
    cloud.add_simulator(MacieSimulator(region, delay_seconds=180, clock=cloud.clock))
    macie = cloud.client("macie2")
    macie.disable_macie()
    print("    aws macie2 disable-macie")
    try:
        described = _documents_run(cloud, "demo-macie-off", expect="FAILED")
    finally:
        macie.enable_macie()
    if described.get("error") != "Macie.NotEnabled" or translate.jobs:
        raise AssertionError(f"ended {described.get('error')} with {len(translate.jobs)} Translate jobs started")
    print(f"    {described['error']}: {described.get('cause')}")
    return "refused with Macie.NotEnabled, no job started"


def documents_flow(cloud: LocalCloud) -> str:
    """Translate and classify three documents in parallel; tag them and their translations pii=true|false."""
    region = cloud.config.region
    cloud.add_simulator(TranslateSimulator(region, delay_seconds=120, clock=cloud.clock))
    cloud.add_simulator(MacieSimulator(region, delay_seconds=180, clock=cloud.clock))
    print("    simulated jobs: Translate 2 minutes, Macie 3 minutes (at the demo's speed-up)")
    described = _documents_run(cloud, "demo")
    bucket, s3 = cloud.stack.outputs["DocumentBucketName"], cloud.client("s3")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="demo/").get("Contents", [])
    documents = sorted(o["Key"] for o in listed if "/details/" not in o["Key"])
    days = {
        rule["Filter"]["Tag"]["Value"]: rule["Expiration"]["Days"]
        for rule in s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    }
    for key in documents:
        pii = {t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]}.get("pii")
        print(f"    {key:<40} pii={pii:<5} expires after {days[str(pii)]} days")
    tagged = json.loads(described["output"])["tagged"]
    if tagged != {"documents": 3, "translations": 6, "withPii": 1}:
        raise AssertionError(f"unexpected tagging result {tagged}")
    counts = f"{tagged['documents']} documents and {tagged['translations']} translations tagged"
    return f"{counts}, {tagged['withPii']} with PII"


def lost_events_flow(cloud: LocalCloud) -> str:
    """Both jobs finish but their completion events are lost; the scheduled reconciler resumes the workflow."""
    region = cloud.config.region
    cloud.add_simulator(TranslateSimulator(region, delay_seconds=60, clock=cloud.clock, drop_events=True))
    cloud.add_simulator(MacieSimulator(region, delay_seconds=60, clock=cloud.clock, drop_logs=True))
    print("    simulated jobs finish after 1 minute; Translate's event and Macie's log line are dropped")
    started = time.monotonic()
    described = _documents_run(cloud, "demo-lost")
    output = json.loads(described["output"])
    return (
        f"resumed by the reconciler after {time.monotonic() - started:.1f}s: translation "
        f"{output['translation']['status']}, classification {output['classification']['status']}"
    )


def export_flow(cloud: LocalCloud) -> str:
    """Follow the next scheduled HealthLake export run: lock, FHIR $export, SQS-delay checks, manifest, fan-out of
    every record onto the export bus (counted through an SQS queue subscribed to the bus)."""
    sqs, events, sfn = cloud.client("sqs"), cloud.client("events"), cloud.client("stepfunctions")
    bus = cloud.stack.outputs["ExportBusName"]
    queue = sqs.create_queue(QueueName="demo-export-records")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="demo-export-records", EventBusName=bus, EventPattern='{"source": ["callback-kit.export"]}')
    events.put_targets(Rule="demo-export-records", EventBusName=bus, Targets=[{"Id": "queue", "Arn": queue_arn}])
    healthlake = simulators.active("healthlake")
    if not isinstance(healthlake, HealthLakeSimulator):
        raise AssertionError("no simulated HealthLake: start the demo with `make demo`")
    datastore = cloud.config.parameters["HealthLakeDatastoreId"]
    fresh = [{"resourceType": "Observation", "status": "final", "code": {"text": f"demo {i}"}} for i in range(25)]
    healthlake.add_resources(datastore, fresh)
    print(f"    25 new Observations in data store {datastore}; waiting for the next scheduled run (every 5 minutes)")
    machine = cloud.stack.outputs["ExportWorkflowArn"]
    after = time.time()
    deadline = time.monotonic() + 30
    while not (
        runs := [
            e for e in sfn.list_executions(stateMachineArn=machine)["executions"] if e["startDate"].timestamp() > after
        ]
    ):
        if time.monotonic() > deadline:
            raise AssertionError("the schedule started no export")
        time.sleep(0.2)
    first = min(runs, key=lambda e: e["startDate"])
    described = wait_for_execution(cloud, first["executionArn"])
    if described["status"] != "SUCCEEDED":
        raise AssertionError(f"execution ended {described['status']}: {described.get('error')}")
    output = json.loads(described["output"])
    if output["status"] != "COMPLETED":
        raise AssertionError(f"the scheduled run did not export: {output}")
    records = []
    while batch := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", []):
        records += [json.loads(m["Body"])["detail"] for m in batch]
        sqs.delete_message_batch(
            QueueUrl=queue, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)]
        )
    kinds = sorted({r["resourceType"] for r in records})
    print(
        f"    manifest {output['manifest']}: {output['fileCount']} files; {len(records)} records on bus {bus}: {kinds}"
    )
    if len(records) < len(fresh):
        raise AssertionError(f"expected the {len(fresh)} new records on the export bus, got {len(records)}")
    return f"{len(records)} records from {output['fileCount']} files published (since {output['since'] or 'the start'})"


def semaphore_flow(cloud: LocalCloud, contenders: int = 30) -> str:
    """30 executions of the bounded workflow contend for one resource's 3 permits (the callback semaphore): print
    the holders and the waiters as they change, then check the limit held and the permits went in arrival order."""
    sfn, dynamodb = cloud.client("stepfunctions"), cloud.client("dynamodb")
    machine, table = cloud.stack.outputs["BoundedWorkflowArn"], cloud.stack.outputs["PermitTableName"]
    limit = int(cloud.config.parameters.get("SemaphorePermits", "3"))
    resource = f"demo-partner-api-{int(time.time())}"

    def table_now() -> tuple[list[int], int]:
        items = dynamodb.query(
            TableName=table,
            KeyConditionExpression="#r = :r",
            ExpressionAttributeNames={"#r": "resource"},
            ExpressionAttributeValues={":r": {"S": resource}},
            ConsistentRead=True,
        )["Items"]
        held = sorted(number[i["executionArn"]["S"]] for i in items if i["entry"]["S"].startswith("holder#"))
        return held, sum(i["entry"]["S"].startswith("waiter#") for i in items)

    print(f"    {contenders} executions, {limit} permits of {resource}; each holds it 10-60 simulated seconds")
    number: dict[str, int] = {}
    for n in range(1, contenders + 1):  # each one in the table before the next starts: arrival order is known
        arn = sfn.start_execution(
            stateMachineArn=machine,
            name=f"contender-{n:02d}-{int(time.time() * 1000)}",
            input=json.dumps({"resource": resource, "seconds": 10 + (n * 7) % 51}),
        )["executionArn"]
        number[arn] = n
        while n not in table_now()[0] and not _ended(sfn, arn):
            time.sleep(0.01)
    most, last = 0, None
    while (now := table_now()) != ([], 0):
        if now != last:
            print(f"    holders {' '.join(f'#{n}' for n in now[0]):<12} waiting {now[1]}")
            most, last = max(most, len(now[0])), now
        time.sleep(0.05)
    ends = [wait_for_execution(cloud, arn, show=False) for arn in number]
    if any(end["status"] != "SUCCEEDED" for end in ends):
        raise AssertionError(f"not every contender succeeded: {[end['status'] for end in ends]}")
    if most > limit:
        raise AssertionError(f"{most} holders at once, over the limit of {limit}")
    granted = sorted(number, key=lambda arn: _granted_at(sfn, arn))
    order = [number[arn] for arn in granted]
    print(f"    admitted in this order: {' '.join(map(str, order))}")
    if order != sorted(order):
        raise AssertionError("permits were not granted in arrival order")
    return f"{contenders} contenders, at most {most} holders at once, admitted in arrival order"


def call(api: SignedClient, method: str, path: str, body: Any = None) -> requests.Response:
    """One call of the task API as an AWS SDK makes one: a throttled or failed answer (429 or 5xx; in a new account
    the API's function shares ten concurrent executions with every other function, and API Gateway answers 500 when
    Lambda throttles it) is tried again with backoff. A POST carries an Idempotency-Key, so a retried one starts its
    task once."""
    headers = {"Idempotency-Key": f"demo-{uuid.uuid4()}"} if method == "POST" else None
    for attempt in range(8):
        answer = api.request(method, path, body, headers)
        if answer.status_code != 429 and answer.status_code < 500:
            return answer
        time.sleep(min(2.0, 0.1 * 2**attempt))
    return answer


def _ended(sfn: Any, arn: str) -> bool:
    return bool(sfn.describe_execution(executionArn=arn)["status"] != "RUNNING")


def _granted_at(sfn: Any, arn: str) -> str:
    """When the execution's permit was granted (its AcquirePermit task's output)."""
    for event in sfn.get_execution_history(executionArn=arn)["events"]:
        output = event.get("taskSucceededEventDetails", {}).get("output", "")
        if "grantedAt" in output:
            return str(json.loads(output)["grantedAt"])
    raise AssertionError(f"{arn} was never granted a permit")


def extract_flow(cloud: LocalCloud, batches: int = 2, per_batch: int = 20) -> str:
    """Two extract tasks over the API, 20 documents each, at once: Bedrock Data Automation (simulated, refusing any
    job over its quota; 2 simulated minutes a job) runs them together under the Region's quota; print each task's
    documents done as it goes."""
    region = cloud.config.region
    quota = int(cloud.config.parameters.get("DataAutomationMaxConcurrentJobs", "0")) or (
        25 if region in HIGH_QUOTA_REGIONS else 5
    )
    bda = BdaSimulator(region, delay_seconds=120, clock=cloud.clock, max_concurrent_jobs=quota)
    cloud.add_simulator(bda)
    assert cloud.http is not None, "template.yaml declares no HTTP API"
    api = SignedClient(cloud.http.url, cloud.config.credentials[0], region)
    s3, bucket = cloud.client("s3"), cloud.stack.outputs["DocumentBucketName"]
    run = time.time_ns()
    locations = []
    for batch in range(batches):
        prefix = f"demo-extract/{run}/batch-{batch}/"
        for n in range(per_batch):
            s3.put_object(Bucket=bucket, Key=f"{prefix}invoice-{n:02d}.pdf", Body=f"Invoice {n}: 3 widgets".encode())
        submitted = call(api, "POST", "/task", {"type": "extract", "input": {"prefix": prefix}})
        print(f"    POST /task extract {prefix} -> {submitted.status_code} {submitted.headers.get('Location')}")
        if submitted.status_code != 202:
            raise AssertionError(f"POST /task answered {submitted.status_code}: {submitted.text}")
        locations.append(submitted.headers["Location"])
    print(f"    Bedrock Data Automation quota: {quota} jobs at once")
    shown, deadline = "", time.monotonic() + 120
    while True:
        tasks = [call(api, "GET", location).json() for location in locations]
        line = "  ".join(
            f"{t['status']} {t['detail']['done']}/{per_batch}" if "done" in t["detail"] else t["status"] for t in tasks
        )
        if line != shown:
            print(f"    {line}   BDA running {bda.running_jobs}", flush=True)
            shown = line
        if all(t["status"] in ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "CANCELLED") for t in tasks):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"tasks not done after 120 s: {line}")
        time.sleep(0.2)
    if any(t["status"] != "SUCCEEDED" for t in tasks):
        raise AssertionError(f"tasks ended {[t['status'] for t in tasks]}")
    extracted = sum(
        d["status"] == "SUCCEEDED" for t in tasks for d in call(api, "GET", t["resultUrl"]).json()["documents"]
    )
    print(f"    BDA: {len(bda.jobs)} jobs, at most {bda.peak_jobs} at once, {bda.rejected} refused over the quota")
    if (bda.peak_jobs > quota) or bda.rejected or extracted != batches * per_batch:
        raise AssertionError(f"peak {bda.peak_jobs}, refused {bda.rejected}, extracted {extracted}")
    return f"{extracted} documents in {batches} batches, at most {bda.peak_jobs} BDA jobs at once (quota {quota})"


FLOWS: list[tuple[str, Callable[[LocalCloud], str]]] = [
    ("Translate || Macie, resumed by their completion events, then pii tags", documents_flow),
    ("Macie off in the account: the documents workflow refused before any job starts", macie_off_flow),
    ("Lost completion events, recovered by the reconciler", lost_events_flow),
    ("Scheduled HealthLake export, fanned out as events", export_flow),
    ("Async API: POST /task over SigV4, poll the status, fetch the result", lambda cloud: api_flow(cloud)),
    ("Durable function: the same task as code, its lost event recovered by the reconciler", lambda c: durable_flow(c)),
    ("Callback semaphore: 30 contenders, 3 permits, no polling", semaphore_flow),
    ("Bedrock Data Automation: two extract tasks share the Region's job quota", extract_flow),
]


def run_all(cloud: LocalCloud) -> int:
    """Run every flow; print a summary; return the process exit code (non-zero if any flow failed)."""
    results = []
    for name, flow in FLOWS:
        print(f"\n== {name}", flush=True)
        started = time.monotonic()
        try:
            summary, ok = flow(cloud), True
        except Exception as exc:  # noqa: BLE001 - every failure is reported in the summary
            traceback.print_exc()
            summary, ok = f"{type(exc).__name__}: {exc}", False
        results.append((name, ok, summary, time.monotonic() - started))
    print("\n== Summary")
    for name, ok, summary, seconds in results:
        print(f"  {'PASS' if ok else 'FAIL'}  {name} ({seconds:.1f}s): {summary}")
    failed = sum(1 for _, ok, _, _ in results if not ok)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


# ---- Async request/reply API ---------------------------------------------------------------------------------------
def api_flow(cloud: LocalCloud) -> str:
    """Submit a documents task over HTTP (SigV4), follow its status until the result is linked, fetch it."""
    region = cloud.config.region
    cloud.add_simulator(TranslateSimulator(region, delay_seconds=60, clock=cloud.clock))
    cloud.add_simulator(MacieSimulator(region, delay_seconds=90, clock=cloud.clock))
    api, location = _submitted(cloud, "documents", "demo-api")
    task = _task_ended(api, location)
    result = call(api, "GET", task["resultUrl"])
    print(f"    GET {task['resultUrl']} -> {result.status_code} {result.text}")
    history = call(api, "GET", f"{location}/history").json()["entries"]
    print(f"    history: {' -> '.join(entry['status'] for entry in history)}")
    return f"task {task['id']} {task['status']}: {result.json()['tagged']}"


def _submitted(cloud: LocalCloud, task_type: str, folder: str) -> tuple[SignedClient, str]:
    """POST /task (SigV4) a documents task of `task_type` over the sample documents put under `folder`/input/: the
    signed client and the task's Location."""
    assert cloud.http is not None, "template.yaml declares no HTTP API"
    api = SignedClient(cloud.http.url, cloud.config.credentials[0], cloud.config.region)
    seed_documents(cloud, f"{folder}/input/")
    request = {
        "type": task_type,
        "input": {
            "inputPrefix": f"{folder}/input/",
            "outputPrefix": f"{folder}/output/",
            "sourceLanguage": "en",
            "targetLanguages": ["de"],
        },
    }
    submitted = call(api, "POST", "/task", request)
    print(f"    POST /task -> {submitted.status_code} {submitted.text}  Location: {submitted.headers.get('Location')}")
    if submitted.status_code != 202:
        raise AssertionError(f"POST /task answered {submitted.status_code}")
    return api, submitted.headers["Location"]


def _task_ended(api: SignedClient, location: str, timeout: float = 60) -> dict[str, Any]:
    """GET the task until it has ended, printing each status it shows; the ended task (an AssertionError unless it
    SUCCEEDED)."""
    shown, deadline = "", time.monotonic() + timeout
    while True:
        task: dict[str, Any] = call(api, "GET", location).json()
        if task["status"] != shown:
            shown = task["status"]
            print(f"    GET {location} -> {shown}", flush=True)
        if task["status"] not in ("SUBMITTED", "RUNNING") and not task["status"].startswith(("WAITING", "TAGGING")):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"task still {shown} after {timeout:g} s")
        time.sleep(0.2)
    if task["status"] != "SUCCEEDED":
        raise AssertionError(f"task ended {task['status']}: {task.get('error')} {task.get('cause')}")
    return task


def durable_flow(cloud: LocalCloud) -> str:
    """POST /task documents-durable: the documents workflow as a Lambda durable function. Its waits are callback
    ids in the same token store; Macie's completion comes through the same resume function, Translate's event is lost
    and the reconciler resumes that wait."""
    region = cloud.config.region
    cloud.add_simulator(TranslateSimulator(region, delay_seconds=60, clock=cloud.clock, drop_events=True))
    cloud.add_simulator(MacieSimulator(region, delay_seconds=90, clock=cloud.clock))
    print("    simulated jobs: Translate 1 minute (its event is dropped), Macie 1.5 minutes")
    api, location = _submitted(cloud, "documents-durable", "demo-durable")
    task = _task_ended(api, location)
    history = call(api, "GET", f"{location}/history").json()["entries"]
    arn = next(entry["detail"]["executionArn"] for entry in history if entry["status"] == "RUNNING")
    for event in durable_history(cloud, arn):
        if event["EventType"].startswith(("Callback", "Step", "Execution")):
            print(f"    {event['EventType']:<20} {event.get('Name') or ''}")
    tagged = call(api, "GET", task["resultUrl"]).json()["tagged"]
    return f"task {task['id']} {task['status']} as a durable execution: {tagged}"


def main(argv: list[str] | None = None) -> int:
    return run(_main, sys.argv[1:] if argv is None else argv, PROG)


def _main(argv: list[str]) -> int:
    parser = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cloud_arguments(parser)
    parser.add_argument("--verbose", action="store_true", help="the offline cloud's logs; tracebacks")
    args = parser.parse_args(argv)
    # Beside a `make local` that may hold the default ports, at 60x. The handlers' INFO logs stay out of the
    # walkthrough; the reconciler looks at jobs at once; exports are re-checked every two seconds; BDA has the quota of
    # most Regions (5, not us-east-1's 25), so that the extract flow's 40 documents wait for it.
    parameters = {
        "LogLevel": "WARN",
        "ReconcileAfterSeconds": "0",
        "ExportRecheckDelaySeconds": "2",
        "DataAutomationMaxConcurrentJobs": "5",
    }
    config, clock = serving_config(PROG, args, aws_port=0, http_port=0, speedup=60.0, parameters=parameters)
    log_file = config.function_log or log_path(config.template, f"{config.stack_name}-demo")
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.write_text("")
    config, simulated = simulated_services(replace(config, function_log=log_file), clock)
    route_logs(log_file)
    with LocalCloud(config, clock) as cloud:
        for simulator in simulated:
            cloud.add_simulator(simulator)
        print(banner(cloud), flush=True)
        code = run_all(cloud)
    print(f"Logs: {log_file}")
    return code


if __name__ == "__main__":
    sys.exit(main())
