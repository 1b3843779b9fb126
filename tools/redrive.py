"""Replay a stack's dead letters: `make redrive STACK=callback-kit-dev`.

Every dead-letter queue of the stack (each output named `...DeadLetterQueueUrl`) holds up to three kinds of message:

- a Lambda on-failure destination record, left by an asynchronous invocation that failed every retry: its
  `requestContext.functionArn` is the function and its `requestPayload` the original event;
- an event EventBridge (or EventBridge Scheduler) could not deliver to its target, or whose target failed: the event
  itself, with the target in the `TARGET_ARN` message attribute;
- a message its source queue gave up on after maxReceiveCount (a redrive policy).

A function's event is replayed by invoking the function again with it, synchronously; a queue's message is sent back
to its source queue. A message is deleted only once its replay succeeded. One that fails again stays in the queue, as
does one this script cannot replay (another kind of target), which it reports; both are visible again when it ends.

`aws sqs start-message-move-task` is no substitute: it moves every message to the DLQ's source queue, and a
destination record or an undeliverable event has none (it would go nowhere, and the job it was to resume would stay
RUNNING).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config

# Long enough for the longest function (900 s); no retry: a replay that times out is not deleted, and runs again later.
LAMBDA_CONFIG = Config(read_timeout=910, retries={"total_max_attempts": 1})
VISIBILITY_SECONDS = 960  # a received message stays invisible while the run lasts, so each is replayed once

Client = Callable[[str], Any]


@dataclass
class Counts:
    replayed: int = 0
    failed: int = 0
    left: list[str] = field(default_factory=list)  # why each message nobody could replay was left

    def __str__(self) -> str:
        return f"replayed {self.replayed}, failed again {self.failed}, left {len(self.left)}"


def dead_letter_queues(client: Client, stack_name: str) -> dict[str, str]:
    """The stack's dead-letter queue URLs by output name."""
    (stack,) = client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    outputs = stack.get("Outputs", [])
    return {o["OutputKey"]: o["OutputValue"] for o in outputs if o["OutputKey"].endswith("DeadLetterQueueUrl")}


def redrive(client: Client, stack_name: str) -> dict[str, Counts]:
    """Replay every dead letter of the stack; the counts per queue (output name)."""
    return {name: redrive_queue(client, url) for name, url in dead_letter_queues(client, stack_name).items()}


def redrive_queue(client: Client, queue_url: str) -> Counts:
    sqs = client("sqs")
    sources = sqs.list_dead_letter_source_queues(QueueUrl=queue_url).get("queueUrls", [])
    counts = Counts()
    kept = []
    for message in _messages(sqs, queue_url):
        replay, why_not = _replay_of(client, message, sources)
        if replay is not None and replay():
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            counts.replayed += 1
            continue
        if replay is None:
            counts.left.append(why_not)
        else:
            counts.failed += 1
        kept.append(message["ReceiptHandle"])
    for receipt in kept:  # back in the queue for the next run (or for a look by hand)
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=receipt, VisibilityTimeout=0)
    return counts


def _messages(sqs: Any, queue_url: str) -> Iterator[dict[str, Any]]:
    """Each message once: received ones stay invisible for the rest of the run, so the queue runs dry."""
    while True:
        batch = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=VISIBILITY_SECONDS,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not batch:
            return
        yield from batch


def _replay_of(client: Client, message: dict[str, Any], sources: list[str]) -> tuple[Callable[[], bool] | None, str]:
    """How to replay a message (None and why, when it cannot be)."""
    attributes = {k: v.get("StringValue", "") for k, v in message.get("MessageAttributes", {}).items()}
    try:
        body = json.loads(message["Body"])
    except json.JSONDecodeError:
        body = None
    if isinstance(body, dict) and "requestPayload" in body and "functionArn" in body.get("requestContext", {}):
        function = _unqualified(body["requestContext"]["functionArn"])
        return (lambda: _invoke(client, function, body["requestPayload"])), ""
    if "TARGET_ARN" in attributes:
        target = attributes["TARGET_ARN"]
        if target.split(":")[2] != "lambda":
            return None, f"{message['MessageId']}: target {target} is not a function; replay it by hand"
        return (lambda: _invoke(client, target, body)), ""
    if len(sources) == 1:
        return (lambda: _send_back(client, sources[0], message)), ""
    return None, f"{message['MessageId']}: no function, target or single source queue to replay it to"


def _unqualified(function_arn: str) -> str:
    """arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>] without the qualifier ($LATEST): replays run
    the function's current code."""
    return ":".join(function_arn.split(":")[:7])


def _invoke(client: Client, function: str, event: Any) -> bool:
    response = client("lambda").invoke(
        FunctionName=function, InvocationType="RequestResponse", Payload=json.dumps(event)
    )
    response["Payload"].read()
    return "FunctionError" not in response


def _send_back(client: Client, queue_url: str, message: dict[str, Any]) -> bool:
    system = message.get("Attributes", {})
    fifo = {"MessageGroupId": system["MessageGroupId"]} if "MessageGroupId" in system else {}
    if "MessageDeduplicationId" in system:  # the original id: a request queued twice still starts once
        fifo["MessageDeduplicationId"] = system["MessageDeduplicationId"]
    client("sqs").send_message(
        QueueUrl=queue_url,
        MessageBody=message["Body"],
        MessageAttributes=message.get("MessageAttributes", {}),
        **fifo,
    )
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--stack-name", required=True)
    args = parser.parse_args()

    def client(service: str) -> Any:
        return boto3.client(service, config=LAMBDA_CONFIG) if service == "lambda" else boto3.client(service)

    total = Counts()
    for name, counts in redrive(client, args.stack_name).items():
        print(f"{name}: {counts}")
        for why in counts.left:
            print(f"  left {why}")
        total.replayed, total.failed = total.replayed + counts.replayed, total.failed + counts.failed
        total.left += counts.left
    print(f"total: {total}")
    if total.failed or total.left:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
