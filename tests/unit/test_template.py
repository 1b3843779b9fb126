"""What template.yaml grants: task tokens resume only this stack's workflows, and no function gets broad access."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from localcloud.regions import DATA_AUTOMATION_GEOGRAPHIES, DURABLE_FUNCTIONS_REGIONS, service_regions
from tests.unit.support import REPO, template

CALLBACK_ACTIONS = {"states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"}


def statements() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every inline policy statement of every function and state machine, with its resource's logical id (a
    statement under a condition, `Fn::If: [Condition, statement, AWS::NoValue]`, as if its condition held)."""
    for logical_id, resource in template()["Resources"].items():
        if resource["Type"] not in {"AWS::Serverless::Function", "AWS::Serverless::StateMachine"}:
            continue
        for policy in resource["Properties"].get("Policies", []):
            if isinstance(policy, dict) and "Statement" in policy:
                for statement in policy["Statement"]:
                    yield logical_id, statement["Fn::If"][1] if "Fn::If" in statement else statement


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_callbacks_can_only_resume_this_stacks_state_machines() -> None:
    # Given every statement that lets a function call SendTaskSuccess / SendTaskFailure / SendTaskHeartbeat
    granting = [(f, s) for f, s in statements() if CALLBACK_ACTIONS & set(as_list(s["Action"]))]
    assert {f for f, _ in granting} >= {"RegisterTokenFunction", "ResumeJobFunction", "ReconcileJobsFunction"}
    # Then each is scoped to state machines named after this stack, never to "*" or another account's machines
    for function, statement in granting:
        for resource in as_list(statement["Resource"]):
            arn = resource["Fn::Sub"] if isinstance(resource, dict) else resource
            assert arn.startswith("arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:"), (
                function,
                arn,
            )
            assert ":stateMachine:${AWS::StackName}-" in arn, (function, arn)


@pytest.mark.parametrize("kind", ["managed policy", "action"])
def test_nothing_is_granted_full_access(kind: str) -> None:
    resources = template()["Resources"].values()
    if kind == "managed policy":
        # Then no function or state machine attaches an AWS managed *FullAccess policy
        names = [p for r in resources for p in r.get("Properties", {}).get("Policies", []) if isinstance(p, str)]
        assert not [n for n in names if n.endswith("FullAccess")]
    else:
        # Then no statement grants every action of a service
        assert not [(f, a) for f, s in statements() for a in as_list(s["Action"]) if str(a).endswith(":*")]


def resources(*types: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template()["Resources"].items() if r["Type"] in types}


def sub(value: Any) -> str:
    """The text of a `!Sub` (or a plain string) ARN."""
    return str(value["Fn::Sub"] if isinstance(value, dict) and "Fn::Sub" in value else value)


def alarms_on(metric: str) -> dict[str, dict[str, Any]]:
    """Alarm properties by the logical id their single dimension names (`!Ref X` or `!GetAtt X.QueueName`)."""
    found = {}
    for alarm in resources("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        if props["MetricName"] == metric:
            (dimension,) = props["Dimensions"]
            value = dimension["Value"]
            target = value["Ref"] if "Ref" in value else value["Fn::GetAtt"][0]
            found[target] = {**props, "Condition": alarm.get("Condition")}
    return found


def assert_alarms(metric: str, targets: dict[str, dict[str, Any]]) -> None:
    alarms = alarms_on(metric)
    assert set(alarms) >= set(targets), f"no {metric} alarm for {set(targets) - set(alarms)}"
    topic = {"Fn::If": ["CreateAlarmTopic", {"Ref": "AlarmTopic"}, {"Ref": "AlarmTopicArn"}]}
    for name, resource in targets.items():
        alarm = alarms[name]
        assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0), name
        assert alarm["AlarmActions"] == [topic], name
        assert alarm["Condition"] == resource.get("Condition"), f"{name}: the alarm must exist exactly when it does"


def test_no_function_or_state_machine_gets_a_whole_table_or_bucket() -> None:
    # Then the SAM policy templates that grant every item action of a table, or reading a whole bucket, are gone:
    # each grant names its actions, and S3 reads name a prefix
    broad = {"DynamoDBCrudPolicy", "DynamoDBReadPolicy", "DynamoDBWritePolicy", "S3ReadPolicy", "S3CrudPolicy"}
    used = [
        (logical_id, name)
        for logical_id, r in resources("AWS::Serverless::Function", "AWS::Serverless::StateMachine").items()
        for policy in r["Properties"].get("Policies", [])
        if isinstance(policy, dict)
        for name in policy
        if name in broad
    ]
    assert used == []
    # And the export bucket's objects are read under the prefix each reader needs (exports/, manifests/)
    export_reads = {
        (f, arn)
        for f, s in statements()
        if "s3:GetObject" in as_list(s["Action"])
        for arn in map(sub, as_list(s["Resource"]))
        if arn.startswith("${ExportBucket.Arn}")
    }
    assert export_reads == {
        ("PublishRecordsFunction", "${ExportBucket.Arn}/exports/*"),
        ("ExportWorkflow", "${ExportBucket.Arn}/manifests/*"),
        ("TallyExportRunFunction", "${ExportBucket.Arn}/manifests/*"),
    }


def test_grants_name_this_stacks_state_machines_exactly() -> None:
    # Then no grant or rule matches state machines by the stack's name as a prefix: `<stack>-*` would match another
    # stack named `<stack>-x`
    for function, statement in statements():
        for arn in map(sub, as_list(statement["Resource"])):
            assert not arn.endswith("${AWS::StackName}-*"), (function, arn)
    for logical_id, function in resources("AWS::Serverless::Function").items():
        for event in function["Properties"].get("Events", {}).values():
            pattern = event["Properties"].get("Pattern", {})
            arns = pattern.get("detail", {}).get("stateMachineArn", [])
            assert not [a for a in arns if isinstance(a, dict) and "prefix" in a], logical_id


def test_a_distributed_map_can_follow_and_stop_its_child_executions() -> None:
    # Given the state machines whose ASL has a Distributed Map (its items run as child executions, named
    # execution:<machine>/<map run label>:<id>)
    machines = {
        logical_id: r["Properties"]["Name"]["Fn::Sub"]
        for logical_id, r in resources("AWS::Serverless::StateMachine").items()
        if '"DISTRIBUTED"' in (REPO / r["Properties"]["DefinitionUri"]).read_text()
    }
    assert machines
    for logical_id, name in machines.items():
        granted = {
            arn
            for f, s in statements()
            if f == logical_id and {"states:DescribeExecution", "states:StopExecution"} <= set(as_list(s["Action"]))
            for arn in map(sub, as_list(s["Resource"]))
        }
        # Then its role may describe and stop them
        assert f"arn:${{AWS::Partition}}:states:${{AWS::Region}}:${{AWS::AccountId}}:execution:{name}/*" in granted


def test_every_function_and_state_machine_logs_to_a_declared_group_with_retention() -> None:
    log_groups = resources("AWS::Logs::LogGroup")
    assert all("RetentionInDays" in g["Properties"] for g in log_groups.values())
    for logical_id, function in resources("AWS::Serverless::Function").items():
        group = function["Properties"].get("LoggingConfig", {}).get("LogGroup", {}).get("Ref")
        assert group in log_groups, f"{logical_id} logs to a group the template does not declare"
        assert log_groups[group].get("Condition") == function.get("Condition"), logical_id
    for logical_id, machine in resources("AWS::Serverless::StateMachine").items():
        logging = machine["Properties"].get("Logging")
        assert logging and logging["IncludeExecutionData"] is False, logical_id
        (destination,) = logging["Destinations"]
        assert destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0] in log_groups, logical_id
        # And its role may set up that delivery (SAM does not add it; the state machine would not be created)
        granted = {a for f, s in statements() if f == logical_id for a in as_list(s["Action"])}
        assert {"logs:CreateLogDelivery", "logs:PutResourcePolicy", "logs:DescribeLogGroups"} <= granted, logical_id


def test_the_log_level_is_lambdas_application_log_level() -> None:
    # Then Lambda filters by the LogLevel parameter (JSON format ignores anything else) and nothing else sets it
    globals_ = template()["Globals"]["Function"]
    assert globals_["LoggingConfig"]["LogFormat"] == "JSON"
    assert globals_["LoggingConfig"]["ApplicationLogLevel"] == {"Ref": "LogLevel"}
    assert "POWERTOOLS_LOG_LEVEL" not in globals_["Environment"]["Variables"]
    assert set(template()["Parameters"]["LogLevel"]["AllowedValues"]) <= {"TRACE", "DEBUG", "INFO", "WARN", "ERROR"}


def test_every_dead_letter_queue_function_and_state_machine_has_an_alarm() -> None:
    functions = resources("AWS::Serverless::Function")
    assert_alarms(
        "ApproximateNumberOfMessagesVisible",
        {k: q for k, q in resources("AWS::SQS::Queue").items() if k.endswith("DeadLetterQueue")},
    )
    assert_alarms("Errors", functions)
    assert_alarms(
        "DestinationDeliveryFailures",
        {
            k: f
            for k, f in functions.items()
            if "OnFailure" in f["Properties"].get("EventInvokeConfig", {}).get("DestinationConfig", {})
        },
    )
    assert_alarms("ExecutionsFailed", resources("AWS::Serverless::StateMachine"))


def test_buckets_refuse_requests_without_tls() -> None:
    policies = resources("AWS::S3::BucketPolicy").values()
    for bucket in resources("AWS::S3::Bucket"):
        denies = [
            s
            for p in policies
            if p["Properties"]["Bucket"] == {"Ref": bucket}
            for s in p["Properties"]["PolicyDocument"]["Statement"]
            if s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        ]
        assert denies, f"{bucket} accepts plain HTTP"


def test_service_roles_trust_only_this_account() -> None:
    # Then a role a service assumes on our behalf (Translate, HealthLake) names the account it acts for
    for logical_id, role in resources("AWS::IAM::Role").items():
        for statement in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
            condition = statement.get("Condition", {})
            assert condition.get("StringEquals", {}).get("aws:SourceAccount") == {"Ref": "AWS::AccountId"}, logical_id
            assert "aws:SourceArn" in {**condition.get("ArnEquals", {}), **condition.get("ArnLike", {})}, logical_id


def test_the_healthlake_role_has_the_documented_export_permissions() -> None:
    (role,) = [r for r in resources("AWS::IAM::Role").values() if "healthlake" in str(r["Properties"])]
    granted = {
        a
        for p in role["Properties"]["Policies"]
        for s in p["PolicyDocument"]["Statement"]
        for a in as_list(s["Action"])
    }
    assert granted >= {
        "s3:PutObject",
        "s3:ListBucket",
        "s3:GetBucketPublicAccessBlock",
        "s3:GetEncryptionConfiguration",
        "kms:GenerateDataKey",
        "kms:DescribeKey",
    }


def test_translate_may_detect_the_source_language() -> None:
    # Given the documents workflow accepts sourceLanguage "auto" (Translate then calls Comprehend as the caller)
    assert '"auto"' in (REPO / "src/shared/tasks/types.py").read_text()
    # Then the role that starts the translation may detect the dominant language
    granted = {a for f, s in statements() if f == "DocumentsWorkflow" for a in as_list(s["Action"])}
    assert {"translate:StartTextTranslationJob", "comprehend:DetectDominantLanguage"} <= granted


def test_the_api_logs_access_and_throttles_its_default_route() -> None:
    api = template()["Resources"]["TaskHttpApi"]["Properties"]
    assert api["AccessLogSettings"]["DestinationArn"] == {"Fn::GetAtt": ["TaskApiAccessLogGroup", "Arn"]}
    assert "$context.requestId" in api["AccessLogSettings"]["Format"]
    assert {"ThrottlingRateLimit", "ThrottlingBurstLimit"} <= set(api["DefaultRouteSettings"])


def test_no_function_reserves_concurrency() -> None:
    # Then no function declares ReservedConcurrentExecutions: a new account (quota 10, unreserved minimum 10) refuses
    # any reservation at CreateFunction and the whole stack rolls back
    reserving = [
        logical_id
        for logical_id, function in resources("AWS::Serverless::Function", "AWS::Lambda::Function").items()
        if "ReservedConcurrentExecutions" in function.get("Properties", {})
    ]
    assert reserving == []
    assert "ReservedConcurrentExecutions" not in str(template()["Globals"])


def test_scheduled_functions_that_must_not_overlap_hold_a_lease() -> None:
    # Given the scheduled functions that must run one at a time (src/shared/lease.py)
    single_flight = {"ReconcileJobsFunction", "StartAdmittedFunction", "SweepPermitsFunction"}
    scheduled = {
        logical_id
        for logical_id, function in resources("AWS::Serverless::Function").items()
        if any(e["Type"] == "Schedule" for e in function["Properties"].get("Events", {}).values())
    }
    assert single_flight <= scheduled
    lease_table = {"Fn::GetAtt": ["LeaseTable", "Arn"]}
    for logical_id in single_flight:
        function = resources("AWS::Serverless::Function")[logical_id]["Properties"]
        # Then each is told its lease table, and may take, give back and read its lease there, and nothing more
        assert function["Environment"]["Variables"]["LEASE_TABLE"] == {"Ref": "LeaseTable"}, logical_id
        on_leases = [s for f, s in statements() if f == logical_id and lease_table in as_list(s["Resource"])]
        assert [set(as_list(s["Action"])) for s in on_leases] == [
            {"dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:GetItem"}
        ], logical_id
    # And the lease table is keyed by the lease's name, and its expired leases vanish (TTL on expiresAt)
    table = resources("AWS::DynamoDB::Table")["LeaseTable"]["Properties"]
    assert table["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    # And no other function touches it
    assert {f for f, s in statements() if lease_table in as_list(s["Resource"])} == single_flight


def test_extract_is_deployed_by_default_exactly_where_the_region_has_bedrock_data_automation() -> None:
    # Given the Regions the BDA profile mapping knows and the Regions the Extract condition deploys to by default
    mapping = template()["Mappings"]["DataAutomationRegions"]
    conditioned = {equals[1] for equals in _equals_of(template()["Conditions"]["RegionHasDataAutomation"])}
    # Then they are the same Regions: "auto" leaves extract out where its profile lookup would fail the deploy
    assert conditioned == set(mapping)
    # And each Region's profile is of its geography, as BDA (and the offline one) takes only that
    assert {region: p["Profile"].split(".")[0] for region, p in mapping.items()} == DATA_AUTOMATION_GEOGRAPHIES
    extract = resources("AWS::Serverless::StateMachine")
    assert (
        extract["ExtractWorkflow"]["Condition"] == extract["ExtractDocumentWorkflow"]["Condition"] == "ExtractEnabled"
    )


def test_documents_is_deployed_by_default_exactly_where_the_region_has_translate_and_macie() -> None:
    # Given the Regions botocore's endpoint data gives Amazon Translate and Amazon Macie, as the offline cloud has them
    both = service_regions("translate") & service_regions("macie2")
    # When the Documents condition's Regions are read
    conditioned = {equals[1] for equals in _equals_of(template()["Conditions"]["RegionHasDocuments"])}
    # Then they are the same: "auto" leaves documents out where CreateStateMachine would refuse its Translate task
    assert conditioned == both
    assert resources("AWS::Serverless::StateMachine")["DocumentsWorkflow"]["Condition"] == "DocumentsEnabled"


def test_the_durable_function_is_deployed_by_default_exactly_where_the_region_has_lambda_durable_functions() -> None:
    # Given the Regions the offline cloud gives Lambda durable functions, and those DurableFunctions=auto deploys to
    conditioned = {equals[1] for equals in _equals_of(template()["Conditions"]["RegionHasDurableFunctions"])}
    # Then they are the same: "auto" leaves the function out where CreateFunction would refuse its DurableConfig
    assert conditioned == DURABLE_FUNCTIONS_REGIONS
    # And the function, its log group and alarms are there only with it, and so is the API's documents-durable type
    declared = template()["Resources"]
    for logical_id in ("", "LogGroup", "ErrorsAlarm", "FailedAlarm"):
        assert declared[f"DocumentsDurableFunction{logical_id}"]["Condition"] == "DurableFunctionsEnabled"
    task_api = declared["TaskApiFunction"]["Properties"]["Environment"]["Variables"]["TASK_DURABLE_FUNCTIONS"]
    assert task_api["Fn::Sub"][1]["DocumentsDurable"]["Fn::If"][0] == "DurableFunctionsEnabled"
    # And so is every other function's grant on it
    grants = [
        statement
        for logical_id, resource in declared.items()
        if logical_id != "DocumentsDurableFunction"
        for policy in resource.get("Properties", {}).get("Policies", [])
        if isinstance(policy, dict) and "Statement" in policy
        for statement in policy["Statement"]
        if "-documents-durable:" in str(statement)
    ]
    assert len(grants) == 4 and all(s["Fn::If"][0] == "DurableFunctionsEnabled" for s in grants)


def _equals_of(condition: dict[str, Any]) -> list[list[Any]]:
    """The Fn::Equals of a condition that is one, an Fn::Or of them, or of such Fn::Or (at most 10 conditions each)."""
    if "Fn::Equals" in condition:
        return [condition["Fn::Equals"]]
    return [equals for term in condition["Fn::Or"] for equals in _equals_of(term)]
