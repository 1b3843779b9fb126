"""Bedrock Data Automation under its concurrent-job quota, on the offline cloud (docs/extract.md).

    python -m bench.extract      # or: make bench-extract

1. Quota: 200 documents in 4 extract batches started at once, quota 5, each job's duration drawn at random (seeded).
   The simulated BDA refuses any job over the quota, so its peak and its refusals show what kept the jobs under it.
   Reported: peak concurrent jobs, refused calls, documents ended (succeeded / failed / lost), and the throughput
   efficiency: the quota-bound ideal (sum of job durations / quota) over the elapsed time from the first job's
   submission to the last job's end, with the mean idle gap of a quota slot per job (what a hand-over costs).
2. Per document: state transitions and Lambda invocations of a document execution, callback (the stack's
   ExtractDocumentWorkflow) vs a polling variant made from it: its wait for the completion event replaced by
   Wait 30 s -> GetDataAutomationStatus -> Choice.
Results: .aws-sam/bench/extract.json, and the tables printed (copied into docs/extract.md by hand).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from bench.bench import history, invocations, wait_ended
from localcloud.client import route_logs
from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.regions import DATA_AUTOMATION_GEOGRAPHIES
from localcloud.simulators.bda import BdaSimulator

ROOT = Path(__file__).resolve().parents[1]
QUOTA = 5
POLL_SECONDS = 30


def put_documents(cloud: LocalCloud, prefix: str, count: int, failing: int = 0) -> list[str]:
    """`count` documents under `prefix`, the last `failing` of them ones BDA cannot read."""
    s3, bucket = cloud.client("s3"), cloud.stack.outputs["DocumentBucketName"]
    keys = [f"{prefix}{'fail-' if n >= count - failing else ''}doc-{n:03d}.pdf" for n in range(count)]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"Invoice: 3 widgets")
    return keys


def quota_run(cloud: LocalCloud, bda: BdaSimulator, batches: int, per_batch: int, speedup: float) -> dict[str, Any]:
    sfn, run = cloud.client("stepfunctions"), uuid.uuid4().hex[:8]
    expected: set[str] = set()
    for batch in range(batches):
        expected |= set(put_documents(cloud, f"bench-extract/{run}/{batch}/", per_batch, failing=1))
    started = time.monotonic()
    arns = [
        sfn.start_execution(
            stateMachineArn=cloud.stack.outputs["ExtractWorkflowArn"],
            name=f"bench-{run}-{batch}",
            input=json.dumps({"prefix": f"bench-extract/{run}/{batch}/"}),
        )["executionArn"]
        for batch in range(batches)
    ]
    ends = [wait_ended(cloud, arn, timeout=3600) for arn in arns]
    seconds = time.monotonic() - started
    documents = [d for end in ends if end["status"] == "SUCCEEDED" for d in json.loads(end["output"])["documents"]]
    listed = [d["document"] for d in documents]
    jobs = [job for job in bda.jobs.values() if job.end is not None]
    elapsed = (max(j.end for j in jobs if j.end) - min(j.submitted for j in jobs)).total_seconds()
    busy = sum(j.duration for j in jobs)
    return {
        "batches": batches,
        "documents": batches * per_batch,
        "quota": QUOTA,
        "speedup": speedup,
        "batch_statuses": sorted({end["status"] for end in ends}),
        "succeeded": sum(d["status"] == "SUCCEEDED" for d in documents),
        "failed": sum(d["status"] == "FAILED" for d in documents),
        "errors": dict(Counter(d["error"] for d in documents if d["status"] == "FAILED")),
        "lost": len(expected - set(listed)),
        "listed_twice": len(listed) - len(set(listed)),
        "bda_jobs": len(bda.jobs),
        "bda_peak_jobs": bda.peak_jobs,
        "bda_refused": bda.rejected,
        "ideal_simulated_s": round(busy / QUOTA, 1),
        "elapsed_simulated_s": round(elapsed, 1),
        "efficiency": round(busy / QUOTA / elapsed, 3),
        "slot_gap_per_job_simulated_s": round((QUOTA * elapsed - busy) / len(jobs), 2),
        "slot_gap_per_job_real_ms": round((QUOTA * elapsed - busy) / len(jobs) / speedup * 1000),
        "wall_s": round(seconds, 1),
    }


def document_machine(cloud: LocalCloud) -> str:
    [machine] = [r.physical_id for r in cloud.stack.resources if r.logical_id == "ExtractDocumentWorkflow"]
    return machine


def polling_variant(cloud: LocalCloud) -> str:
    """ExtractDocumentWorkflow as deployed, its WaitForExtraction (register the token, wait for the event) replaced
    by a polling loop on GetDataAutomationStatus."""
    sfn = cloud.client("stepfunctions")
    deployed = sfn.describe_state_machine(stateMachineArn=document_machine(cloud))
    definition = json.loads(deployed["definition"])
    states = definition["States"]
    waited = states.pop("WaitForExtraction")
    states["WaitForExtraction"] = {"Type": "Wait", "Seconds": POLL_SECONDS, "Next": "PollStatus"}
    states["PollStatus"] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::aws-sdk:bedrockdataautomationruntime:getDataAutomationStatus",
        "Parameters": {"InvocationArn.$": "$.job.invocationArn"},
        "ResultSelector": {"status.$": "$.Status"},
        "ResultPath": "$.poll",
        "Catch": waited["Catch"][1:],
        "Next": "Finished?",
    }
    states["Finished?"] = {
        "Type": "Choice",
        "Choices": [
            {"Variable": "$.poll.status", "StringEquals": "Success", "Next": waited["Next"]},
            {
                "Or": [
                    {"Variable": "$.poll.status", "StringEquals": "ClientError"},
                    {"Variable": "$.poll.status", "StringEquals": "ServiceError"},
                ],
                "Next": "PollFailed",
            },
        ],
        "Default": "WaitForExtraction",
    }
    states["PollFailed"] = {
        "Type": "Pass",
        "Parameters": {"Error": "BedrockDataAutomation.ClientError", "Cause": "The job failed."},
        "ResultPath": "$.error",
        "Next": "GiveUpPermit",
    }
    created = sfn.create_state_machine(
        name=f"bench-extract-document-polling-{uuid.uuid4().hex[:6]}",
        definition=json.dumps(definition),
        roleArn=deployed["roleArn"],
    )
    return str(created["stateMachineArn"])


def per_document(cloud: LocalCloud, machine: str, documents: int) -> dict[str, Any]:
    """Run `documents` document executions of `machine` at once; their transitions and the Lambda invocations."""
    sfn, run = cloud.client("stepfunctions"), uuid.uuid4().hex[:8]
    keys = put_documents(cloud, f"bench-extract/{run}/", documents)
    before = invocations(cloud)
    arns = [
        sfn.start_execution(
            stateMachineArn=machine,
            name=f"doc-{run}-{n}",
            input=json.dumps(
                {
                    "document": key,
                    "outputPrefix": f"extract/{run}",
                    "projectArn": f"arn:aws:bedrock:{cloud.config.region}:aws:data-automation-project/public-default",
                    "profileArn": f"arn:aws:bedrock:{cloud.config.region}:123456789012:data-automation-profile/"
                    f"{DATA_AUTOMATION_GEOGRAPHIES[cloud.config.region]}.data-automation-v1",
                }
            ),
        )["executionArn"]
        for n, key in enumerate(keys)
    ]
    ends = [wait_ended(cloud, arn, timeout=3600) for arn in arns]
    assert all(end["status"] == "SUCCEEDED" for end in ends), [end["status"] for end in ends]
    transitions = [sum(e["type"].endswith("StateEntered") for e in history(cloud, arn)) for arn in arns]
    return {
        "documents": documents,
        "transitions_per_document": round(statistics.mean(transitions), 1),
        "lambda_invocations_per_document": round((invocations(cloud) - before) / documents, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.extract", description=__doc__)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--per-batch", type=int, default=50)
    parser.add_argument("--minutes", type=float, nargs=2, default=(1.0, 3.0), help="job durations, simulated")
    parser.add_argument("--speedup", type=float, default=20.0, help="simulated seconds per real second")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)
    out = ROOT / ".aws-sam" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    route_logs(out / "extract-functions.log")
    config = CloudConfig(
        template=ROOT / "template.yaml",
        stack_name="bench-extract",
        aws_port=0,
        http_port=0,
        speedup=args.speedup,
        # A batch waits for the quota as long as its documents take: 200 x 2 min / 5 = 80 min, over the default hour.
        parameters={
            "LogLevel": "WARNING",
            "DataAutomationMaxConcurrentJobs": str(QUOTA),
            "SemaphoreWaitSeconds": "86400",
        },
        function_log=out / "extract-functions.log",
    )
    rng, durations = random.Random(args.seed), dict[str, float]()

    def duration(uri: str) -> float:
        return durations.setdefault(uri, rng.uniform(args.minutes[0] * 60, args.minutes[1] * 60))

    results: dict[str, Any] = {"minutes": list(args.minutes), "seed": args.seed}
    with LocalCloud(config) as cloud:
        bda = BdaSimulator(config.region, clock=cloud.clock, max_concurrent_jobs=QUOTA, durations=duration)
        cloud.add_simulator(bda)
        quota = quota_run(cloud, bda, args.batches, args.per_batch, args.speedup)
        results["quota"] = quota
        print(json.dumps(quota), flush=True)
        results["per_document"] = {
            "callback": per_document(cloud, document_machine(cloud), 10),
            "polling": per_document(cloud, polling_variant(cloud), 10),
        }
        print(json.dumps(results["per_document"]), flush=True)
        bda.stop()
    (out / "extract.json").write_text(json.dumps(results, indent=2))
    q = results["quota"]
    return int(q["bda_peak_jobs"] > QUOTA or q["bda_refused"] > 0 or q["lost"] > 0 or q["listed_twice"] > 0)


if __name__ == "__main__":
    raise SystemExit(main())
