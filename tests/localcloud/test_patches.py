"""The patch registry: every change the offline cloud makes to moto is installed together and taken out again."""

from __future__ import annotations

import gc
import io
import itertools
import json
import threading
import time
import zipfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import moto.core.responses
import moto.core.routing
import moto.core.utils
import pytest
from botocore.parsers import ResponseParserError
from moto import mock_aws
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.core.request import Request
from moto.core.routing import RestRouter
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import Table
from moto.events.models import EventsBackend, Rule
from moto.sqs.models import Message

from localcloud.account import Account
from localcloud.clock import Clock
from localcloud.fixes import patches
from localcloud.runtime.lambdas import LambdaRuntime


def _attributes(installed: patches.Patches) -> dict[tuple[int, str], Any]:
    """What each patched attribute is now, read from its owner's own dictionary (None where it is inherited)."""
    return {(id(p.owner), p.name): vars(p.owner).get(p.name) for p in installed.patches}


@pytest.fixture
def offline_patches(tmp_path: Any) -> patches.Patches:
    runtime = LambdaRuntime(tmp_path, "us-east-1", Account())
    return patches.offline_cloud(runtime, lambda arn, payload: None, lambda arn, payload, attributes: None, Clock())


def test_every_patch_cites_a_gap_of_the_catalogue_or_speed(offline_patches: patches.Patches) -> None:
    catalogue = (Path(__file__).resolve().parents[2] / "docs" / "offline-cloud.md").read_text(encoding="utf-8")
    for patch in offline_patches.patches:
        gaps = [] if patch.why == "speed" else patch.why.removeprefix("gaps ").removeprefix("gap ").split(", ")
        assert patch.why == "speed" or (gaps and all(f"| {gap} |" in catalogue for gap in gaps)), patch


def test_uninstall_gives_moto_back_exactly_as_it_was(offline_patches: patches.Patches) -> None:
    # Given moto as imported
    before = _attributes(offline_patches)
    moto_invoke, moto_put_item = LambdaSimpleBackend.invoke, DynamoDBBackend.put_item
    # When the offline cloud's patches are installed
    with offline_patches:
        # Then moto runs the offline cloud's replacements
        assert LambdaSimpleBackend.invoke is not moto_invoke
        assert DynamoDBBackend.put_item is not moto_put_item
        assert getattr(Rule.send_to_targets, "all_targets", None) is not None
    # And once uninstalled, every attribute is moto's own again (inherited ones inherited again)
    assert _attributes(offline_patches) == before
    assert LambdaSimpleBackend.invoke is moto_invoke
    assert DynamoDBBackend.put_item is moto_put_item


def test_a_nested_set_restores_the_outer_one(offline_patches: patches.Patches, tmp_path: Any) -> None:
    inner = patches.Patches(patches.event_delivery(lambda arn, payload: None, lambda arn, payload, attributes: None))
    with offline_patches:
        outer_delivery = Rule.send_to_targets
        with inner:
            assert Rule.send_to_targets is not outer_delivery
        assert Rule.send_to_targets is outer_delivery
        assert EventsBackend.put_events is patches.events.put_events


def test_a_set_with_an_attribute_moto_no_longer_has_is_refused_whole() -> None:
    moto_put_events = EventsBackend.put_events
    broken = patches.Patches(
        [
            patches.Patch(EventsBackend, "put_events", patches.events.put_events, "gap 12"),
            patches.Patch(Rule, "send_to_every_target", lambda: None, "gap 15"),
        ]
    )
    with pytest.raises(AttributeError, match=r"send_to_every_target to patch \(gap 15\): has moto changed"):
        broken.install()
    # And nothing of it stays installed
    assert EventsBackend.put_events is moto_put_events
    assert not hasattr(Rule, "send_to_every_target")


# --- speed: a service's model and request router built once -----------------------------------------------------------
def _route_first_requests_at_once(patched: bool, requests: int = 16) -> tuple[list[str], int, int]:
    """`requests` Lambda Invoke requests routed at once, each the first since moto's caches were emptied, with moto's
    model loading slowed so that they overlap: each one's operation, how many times Lambda's model was loaded and how
    many REST routers were built."""
    loads, routers = Counter[str](), Counter[str]()
    load, rest_router_init = moto.core.utils._load_service_model, RestRouter.__init__

    def slow_load(service: str, model: str) -> Any:
        loads[f"{service}/{model}"] += 1
        time.sleep(0.05)
        return load(service, model)

    def counted_router(router: RestRouter, service_model: Any) -> None:
        routers[service_model.service_name] += 1
        rest_router_init(router, service_model)

    request = Request.from_primitives(
        "POST", "http://localhost:4566/2015-03-31/functions/fn/invocations", {"Content-Type": "application/json"}, b"{}"
    )
    start = threading.Barrier(requests)

    def route(_: int) -> str:
        start.wait()
        operation, _ = moto.core.responses.get_service_router("lambda").match(request)
        return str(operation.name)

    for cached in (moto.core.utils.get_service_model, moto.core.routing.get_service_router):
        cached.cache_clear()  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as mp, patches.Patches(patches.routing_atomic() if patched else []):
        mp.setattr(moto.core.utils, "_load_service_model", slow_load)
        mp.setattr(RestRouter, "__init__", counted_router)
        with ThreadPoolExecutor(requests) as pool:
            operations = list(pool.map(route, range(requests)))
    return operations, loads["lambda/service-2"], routers["lambda"]


def test_moto_alone_builds_a_services_model_and_router_once_per_first_request() -> None:
    operations, model_loads, router_builds = _route_first_requests_at_once(patched=False)
    assert operations == ["Invoke"] * 16
    assert model_loads > 1 and router_builds > 1


def test_a_burst_of_first_requests_builds_the_services_model_and_router_once() -> None:
    # Given moto with nothing of Lambda's routing built yet
    # When 16 requests to Lambda are routed at once
    operations, model_loads, router_builds = _route_first_requests_at_once(patched=True)
    # Then every one is routed, on a model loaded once and a router built once
    assert operations == ["Invoke"] * 16
    assert (model_loads, router_builds) == (1, 1)


# --- speed: a table's query reads one partition ----------------------------------------------------------------------
QUERIES: list[dict[str, Any]] = [
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "task-7"}}},
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "task-99"}}},  # no such task
    {
        "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
        "ExpressionAttributeValues": {":p": {"S": "task-3"}, ":a": {"N": "1"}, ":b": {"N": "3"}},
        "ScanIndexForward": False,
    },
    {
        "KeyConditionExpression": "pk = :p",
        "FilterExpression": "#s = :s",
        "ProjectionExpression": "sk, #s",
        "ExpressionAttributeNames": {"#s": "status"},
        "ExpressionAttributeValues": {":p": {"S": "task-5"}, ":s": {"S": "RUNNING"}},
    },
    {
        "IndexName": "by-status",
        "KeyConditionExpression": "#s = :s",
        "ExpressionAttributeNames": {"#s": "status"},
        "ExpressionAttributeValues": {":s": {"S": "SUBMITTED"}},
    },
]


def _query_everything(listed: list[int]) -> list[list[dict[str, Any]]]:
    """Every query of QUERIES on a log of 40 tasks of 5 entries, each followed page by page (Limit 2); how many items
    each listing of the table held goes to `listed`."""
    moto_all_items = Table.all_items

    def counted(table: Table) -> Any:
        items = moto_all_items(table)
        listed.append(len(items))
        return items

    with mock_aws(), pytest.MonkeyPatch.context() as mp:
        mp.setattr(Table, "all_items", counted)
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName="log",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": name, "AttributeType": kind}
                for name, kind in (("pk", "S"), ("sk", "N"), ("status", "S"))
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by-status",
                    "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        for task in range(40):
            for seq, status in enumerate(("SUBMITTED", "RUNNING", "RUNNING", "TAGGING", "SUCCEEDED")):
                item = {"pk": {"S": f"task-{task}"}, "sk": {"N": str(seq)}, "status": {"S": status}}
                dynamodb.put_item(TableName="log", Item=item)
        listed.clear()
        answers = []
        for query in QUERIES:
            pages = dynamodb.get_paginator("query").paginate(TableName="log", PaginationConfig={"PageSize": 2}, **query)
            answers.append([item for page in pages for item in page["Items"]])
        return answers


def test_a_query_of_a_table_lists_only_its_partition_and_answers_as_moto_does() -> None:
    # Given the answers and listings of moto as it is
    moto_listed: list[int] = []
    moto_answers = _query_everything(moto_listed)
    # When the same queries run with the offline cloud's speed patches
    listed: list[int] = []
    with patches.Patches(patches.SPEED):
        answers = _query_everything(listed)
    # Then every answer, page by page, is moto's
    assert answers == moto_answers
    assert [len(answer) for answer in answers] == [5, 0, 3, 2, 40]
    # And moto listed all 200 items for every page, where a page of the table itself lists its 5 at most; an index
    # query is still moto's own
    assert set(moto_listed) == {200}
    assert max(listed[:-20]) <= 5 and set(listed[-20:]) == {200}


def _queue_everything(asked: Counter[str]) -> list[Any]:
    """40 messages sent (every fourth delayed), 10 received and held, the queue's counts read, the rest drained; how
    often a message was asked whether it is visible or delayed goes to `asked`."""
    with mock_aws(), pytest.MonkeyPatch.context() as mp:
        for name in ("visible", "delayed"):
            ask = getattr(Message, name).fget
            counted = property(lambda message, ask=ask, name=name: asked.update([name]) or ask(message))
            mp.setattr(Message, name, counted)
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="ends")["QueueUrl"]
        for n in range(40):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{n}", DelaySeconds=900 if n % 4 == 0 else 0)
        held = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)["Messages"]
        counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        drained: list[str] = []
        while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            drained += [message["Body"] for message in batch]
        return [
            sorted(message["Body"] for message in held),
            {name: value for name, value in counts.items() if name.startswith("ApproximateNumber")},
            sorted(drained),
        ]


def test_a_queue_answers_as_moto_does_without_asking_every_message_at_every_call() -> None:
    # Given the answers of moto as it is, and how often it asked a message whether it is visible or delayed
    moto_asked: Counter[str] = Counter()
    moto_answers = _queue_everything(moto_asked)
    # When the same calls run with the offline cloud's speed patches
    asked: Counter[str] = Counter()
    with patches.Patches(patches.SPEED):
        answers = _queue_everything(asked)
    # Then every answer is moto's
    assert answers == moto_answers
    assert answers[1] == {
        "ApproximateNumberOfMessages": "20",
        "ApproximateNumberOfMessagesDelayed": "10",
        "ApproximateNumberOfMessagesNotVisible": "10",
    }
    assert len(answers[0]) == 10 and len(answers[2]) == 20
    # And moto asked every message at every send and for every message received (thousands of times for 40
    # messages), where the patched queue asks each message it hands out once
    assert sum(moto_asked.values()) > 2_000
    assert sum(asked.values()) <= 30


# --- gap 25: DynamoDB keeps no copy of what it wrote or answered -----------------------------------------------------
def _alive_after_reads(installed: patches.Patches) -> tuple[int, int]:
    """How many more DynamoDB Item and Table objects are alive after 20 queries of a 10-item table (each answering 5
    items) than before them, with `installed`."""

    def alive() -> tuple[int, int]:
        gc.collect()
        objects = gc.get_objects()
        return sum(isinstance(o, Item) for o in objects), sum(isinstance(o, Table) for o in objects)

    with mock_aws(), installed:
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName="log",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "N"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        for task, seq in itertools.product(range(2), range(5)):
            dynamodb.put_item(TableName="log", Item={"pk": {"S": f"task-{task}"}, "sk": {"N": str(seq)}})
        before = alive()
        for n in range(20):
            key = {":p": {"S": f"task-{n % 2}"}}
            answer = dynamodb.query(TableName="log", KeyConditionExpression="pk = :p", ExpressionAttributeValues=key)
            assert len(answer["Items"]) == 5
        after = alive()
        return after[0] - before[0], after[1] - before[1]


def test_moto_alone_keeps_every_item_a_read_answered_with() -> None:
    # When a table is queried 20 times on moto as it is (with the one-partition query)
    items, tables = _alive_after_reads(patches.Patches(patches.SPEED))
    # Then every copy the queries made is still alive: the 5 items each answered with, and its Table view
    assert (items, tables) == (20 * 5, 20)


def test_a_read_leaves_nothing_alive_once_answered() -> None:
    # When a table is queried 20 times on the offline cloud
    items, tables = _alive_after_reads(patches.Patches([*patches.SPEED, *patches.DYNAMODB_UNTRACKED]))
    # Then no copy outlives its request: the cloud's memory does not grow with its reads
    assert (items, tables) == (0, 0)


def test_gap_26_moto_alone_answers_a_failed_resource_unreadably_and_keeps_the_stack() -> None:
    # Given moto without the offline cloud's patches, and a log group that exists
    template = {"Resources": {"Group": {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": "/taken"}}}}
    with mock_aws():
        boto3.client("logs", region_name="us-east-1").create_log_group(logGroupName="/taken")
        cfn = boto3.client("cloudformation", region_name="us-east-1")
        # When a stack creates a group of that name
        with pytest.raises(ResponseParserError):
            cfn.create_stack(StackName="taken", TemplateBody=json.dumps(template))
        # Then moto answered Logs' error in Logs' protocol, and kept the half-made stack (AWS rolls it back)
        assert [s["StackName"] for s in cfn.describe_stacks()["Stacks"]] == ["taken"]


def _custom_resource_stack(fixes: list[patches.Patch]) -> str:
    """Create a stack with one custom resource on moto with `fixes` installed; its status once CreateStack returned."""
    template = {"Resources": {"Thing": {"Type": "Custom::Thing", "Properties": {"ServiceToken": "", "Size": "1"}}}}
    with mock_aws(config={"lambda": {"use_docker": False}}), patches.Patches(fixes):
        role = boto3.client("iam").create_role(RoleName="fn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as files:
            files.writestr("index.py", "def handler(event, context):\n    return None\n")
        function = boto3.client("lambda", region_name="us-east-1").create_function(
            FunctionName="fn",
            Runtime="python3.13",
            Role=role,
            Handler="index.handler",
            Code={"ZipFile": archive.getvalue()},
        )
        template["Resources"]["Thing"]["Properties"]["ServiceToken"] = function["FunctionArn"]
        cfn = boto3.client("cloudformation", region_name="us-east-1")
        cfn.create_stack(StackName="custom", TemplateBody=json.dumps(template))
        return str(cfn.describe_stacks()["Stacks"][0]["StackStatus"])


def test_gap_27_moto_alone_never_runs_a_custom_resources_function() -> None:
    # Given moto as it is
    # When a stack with a custom resource is created
    status = _custom_resource_stack([])
    # Then the function never ran (moto's Docker path), so the stack waits for an answer that never comes
    assert status == "CREATE_IN_PROGRESS"


def test_gap_27_a_custom_resource_request_reaches_its_function_with_a_response_url() -> None:
    # Given the offline cloud's custom-resource fix, with an invoker that records the requests
    requests: list[tuple[str, dict[str, Any]]] = []
    fixes = patches.custom_resources(lambda token, request: requests.append((token, request)), lambda: "http://cloud")
    # When a stack with a custom resource is created
    status = _custom_resource_stack(fixes)
    # Then its function gets CloudFormation's Create request, answerable on the offline endpoint
    ((token, request),) = requests
    assert token.endswith(":function:fn")
    assert (request["RequestType"], request["LogicalResourceId"], request["ResourceType"]) == (
        "Create",
        "Thing",
        "Custom::Thing",
    )
    assert request["ResponseURL"].startswith("http://cloud/cloudformation_us-east-1/cfnresponse?stack=")
    assert request["ResourceProperties"]["Size"] == "1"
    # And the stack waits for the answer, as CloudFormation does
    assert status == "CREATE_IN_PROGRESS"
