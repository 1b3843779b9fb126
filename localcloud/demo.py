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


def translate_flow(cloud: LocalCloud) -> str:
    """Translate two documents; the workflow waits for Translate's completion event, then shows the output."""
    cloud.add_simulator(TranslateSimulator(cloud.config.region, delay_seconds=120, speedup=cloud.config.speedup))
    bucket = cloud.stack.outputs["DocumentBucketName"]
    s3 = cloud.client("s3")
    for name, text in {"welcome.txt": "Welcome to callback-kit.", "notes.txt": "No polling was harmed."}.items():
        s3.put_object(Bucket=bucket, Key=f"demo/input/{name}", Body=text.encode())
    request = {
        "inputPrefix": "demo/input/",
        "outputPrefix": "demo/output/",
        "sourceLanguage": "en",
        "targetLanguages": ["es", "fr"],
    }
    print(f"    start TranslateWorkflow {json.dumps(request)}  (simulated job: 2 minutes at the demo's speed-up)")
    execution = cloud.client("stepfunctions").start_execution(
        stateMachineArn=cloud.stack.outputs["TranslateWorkflowArn"], input=json.dumps(request)
    )
    described = wait_for_execution(cloud, execution["executionArn"])
    if described["status"] != "SUCCEEDED":
        raise AssertionError(f"execution ended {described['status']}: {described.get('error')}")
    output = json.loads(described["output"])
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="demo/output/").get("Contents", [])]
    translated = [k for k in keys if "/details/" not in k]
    if len(translated) != 4:
        raise AssertionError(f"expected 4 translated documents, found {translated}")
    for key in translated:
        print(f"    {key}: {s3.get_object(Bucket=bucket, Key=key)['Body'].read().decode()!r}")
    return f"job {output['jobId']} {output['status']}, {len(translated)} translated documents"


FLOWS: list[tuple[str, Callable[[LocalCloud], str]]] = [
    ("Translate batch job resumed by its completion event", translate_flow),
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
