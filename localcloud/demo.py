"""`make demo`: run every workflow of template.yaml end to end on the offline cloud, showing each step.

Each flow drives a workflow through its public surface (S3, StartExecution) with the simulated services it needs,
prints the states as the execution passes them, checks the result a user would check, and reports PASS/FAIL.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from typing import Any

from localcloud.cloud import LocalCloud
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator


def wait_for_execution(
    cloud: LocalCloud, execution_arn: str, timeout: float = 60.0, show: bool = True
) -> dict[str, Any]:
    """Poll an execution until it ends, printing each state it enters; return DescribeExecution."""
    sfn = cloud.client("stepfunctions")
    seen = 0
    deadline = time.monotonic() + timeout
    while True:
        described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
        events = sfn.get_execution_history(executionArn=execution_arn)["events"]
        for event in events[seen:]:
            if show and event["type"].endswith("StateEntered"):
                print(f"    -> {event['stateEnteredEventDetails']['name']}", flush=True)
        seen = len(events)
        if described["status"] != "RUNNING":
            return described
        if time.monotonic() > deadline:
            raise TimeoutError(f"{execution_arn} still RUNNING after {timeout:.0f}s")
        time.sleep(0.2)


DOCUMENTS = {
    "welcome.txt": "Welcome to callback-kit.",
    "contact.txt": "Questions? Write to jane.doe@example.com or call 555-0100.",
    "notes.txt": "No polling was harmed.",
}


def _documents_run(cloud: LocalCloud, folder: str) -> dict[str, Any]:
    """Upload the demo documents under `folder`, run the documents workflow over them, return DescribeExecution."""
    bucket = cloud.stack.outputs["DocumentBucketName"]
    for name, text in DOCUMENTS.items():
        cloud.client("s3").put_object(Bucket=bucket, Key=f"{folder}/input/{name}", Body=text.encode())
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
    if described["status"] != "SUCCEEDED":
        raise AssertionError(f"execution ended {described['status']}: {described.get('error')}")
    return described


def documents_flow(cloud: LocalCloud) -> str:
    """Translate and classify three documents in parallel; tag them and their translations pii=true|false."""
    region, speedup = cloud.config.region, cloud.config.speedup
    cloud.add_simulator(TranslateSimulator(region, delay_seconds=120, speedup=speedup))
    cloud.add_simulator(MacieSimulator(region, delay_seconds=180, speedup=speedup))
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
    region, speedup = cloud.config.region, cloud.config.speedup
    cloud.add_simulator(TranslateSimulator(region, delay_seconds=60, speedup=speedup, drop_events=True))
    cloud.add_simulator(MacieSimulator(region, delay_seconds=60, speedup=speedup, drop_logs=True))
    print("    simulated jobs finish after 1 minute; Translate's event and Macie's log line are dropped")
    started = time.monotonic()
    described = _documents_run(cloud, "demo-lost")
    output = json.loads(described["output"])
    return (
        f"resumed by the reconciler after {time.monotonic() - started:.1f}s: translation "
        f"{output['translation']['status']}, classification {output['classification']['status']}"
    )


FLOWS: list[tuple[str, Callable[[LocalCloud], str]]] = [
    ("Translate || Macie, resumed by their completion events, then pii tags", documents_flow),
    ("Lost completion events, recovered by the reconciler", lost_events_flow),
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
