"""template.yaml deploys offline with its default parameters, as `sam deploy` would: HealthLakeDatastoreId empty
leaves the export workflow's conditional resources (functions, their rules and permissions) out of the stack, and a
Region without a feature's service leaves the feature out. (The workflow tests deploy it with a data store, i.e. with
the export.)"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from localcloud.account import ACCOUNT_ID
from localcloud.client import SignedClient
from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.deploy import StackRolledBackError
from localcloud.runtime.lambdas import FunctionSpec

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


def test_the_default_template_deploys_without_the_export_workflow() -> None:
    # Given the project's template with every parameter at its default (no HealthLake data store), in us-east-1, the
    # offline cloud's Region, which has Lambda durable functions (localcloud/regions.py)
    config = CloudConfig(template=TEMPLATE, stack_name="defaults", aws_port=0, http_port=0)
    # When it is deployed offline
    with LocalCloud(config) as cloud:
        functions = {r.logical_id for r in cloud.stack.of_type("AWS::Lambda::Function")}
        rules = {r.logical_id for r in cloud.stack.of_type("AWS::Events::Rule")}
        outputs = cloud.stack.outputs
        # Then the callback and API parts are there and the export's conditional resources are not
        assert {"RegisterTokenFunction", "ResumeJobFunction", "TaskApiFunction"} <= functions
        assert not {"TakeExportLockFunction", "ReleaseExportLockFunction", "ExportJobFunction"} & functions
        assert not any(rule.startswith("ReleaseExportLockFunction") for rule in rules)
        assert "DocumentsWorkflowArn" in outputs and "ExportWorkflowArn" not in outputs
        # And the documents workflow is there on both engines (DurableFunctions=auto), and the task API offers both
        (durable,) = [r for r in cloud.stack.of_type("AWS::Lambda::Function") if "DurableConfig" in r.properties]
        assert durable.logical_id == "DocumentsDurableFunction"
        assert durable.physical_id in cloud.runtime.durable_configs
        assert offered_types(cloud) == "bounded, documents, documents-durable, extract"
        # And a function's worker gets the log group and application log level of its LoggingConfig, as on Lambda
        (register,) = [
            f for f in cloud.stack.of_type("AWS::Lambda::Function") if f.logical_id == "RegisterTokenFunction"
        ]
        spec = FunctionSpec.of(
            cloud.runtime.function(register.physical_id),
            TEMPLATE.parent,
            cloud.runtime.logging_configs[register.physical_id],
        )
        environment = spec.lambda_environment(cloud.aws_endpoint, cloud.config.region)
        assert environment["AWS_LAMBDA_LOG_GROUP_NAME"] == "/aws/lambda/defaults/RegisterTokenFunction"
        assert (environment["AWS_LAMBDA_LOG_FORMAT"], environment["AWS_LAMBDA_LOG_LEVEL"]) == ("JSON", "INFO")
        # And its functions run from their packages
        assert cloud.invoke_function("RegisterTokenFunction", {"service": "translate"})[0]["errorType"] == (
            "ValidationError"
        )


def offered_types(cloud: LocalCloud) -> str:
    """The task types POST /task offers, as its 422 for an unknown type names them."""
    api = SignedClient(cloud.http.url, cloud.config.credentials[0], cloud.config.region)
    answer = api.request("POST", "/task", {"type": "no-such-type", "input": {}})
    assert answer.status_code == 422, answer.text
    return str(answer.json()["message"]).split("allowed types: ")[1]


def test_the_extract_feature_can_be_left_out_and_the_api_then_offers_no_extract_task() -> None:
    # Given the template with Extract=false (what "auto" gives in a Region without Bedrock Data Automation)
    config = CloudConfig(
        template=TEMPLATE, stack_name="no-extract", aws_port=0, http_port=0, parameters={"Extract": "false"}
    )
    # When it is deployed offline
    with LocalCloud(config) as cloud:
        machines = {r.logical_id for r in cloud.stack.of_type("AWS::StepFunctions::StateMachine")}
        # Then its state machines, alarms and output are left out, and the rest is there
        assert not {"ExtractWorkflow", "ExtractDocumentWorkflow"} & machines
        assert {"DocumentsWorkflow", "BoundedWorkflow"} <= machines
        assert "ExtractWorkflowArn" not in cloud.stack.outputs
        # And the task API offers no extract type
        assert offered_types(cloud) == "bounded, documents, documents-durable"


def test_documents_and_the_concurrency_samples_can_be_left_out_and_extract_keeps_what_it_uses() -> None:
    # Given the template with the documents feature and the concurrency samples left out (extract stays: us-east-1)
    parameters = {"Documents": "false", "ConcurrencySamples": "false"}
    config = CloudConfig(template=TEMPLATE, stack_name="extract-only", aws_port=0, http_port=0, parameters=parameters)
    # When it is deployed offline, in a new account (Macie off)
    with LocalCloud(config) as cloud:
        logical_ids = {r.logical_id for r in cloud.stack.resources}
        # Then nothing of documents or the samples is there: no workflow, function, role, alarm or Macie resource
        left_out = {"DocumentsWorkflow", "TagDocumentsFunction", "TranslateDataAccessRole", "MacieLogGroup"}
        left_out |= {"ForwardMacieLogsFunction", "DocumentsWorkflowFailedAlarm", "TagDocumentsFunctionLogGroup"}
        left_out |= {"BoundedWorkflow", "AdmittedWorkflow", "GatedWorkflow", "AdmissionQueue", "PassGateFunction"}
        left_out |= {"BoundedJsonataWorkflow"}
        assert not left_out & logical_ids
        outputs = {"DocumentsWorkflowArn", "BoundedWorkflowArn", "BoundedJsonataWorkflowArn", "AdmissionQueueUrl"}
        assert not outputs & set(cloud.stack.outputs)
        # And what extract uses stays: the document bucket and the callback semaphore
        assert {"ExtractWorkflow", "DocumentBucket", "PermitTable", "AcquirePermitFunction"} <= logical_ids
        # And the task API offers extract alone
        assert offered_types(cloud) == "extract"


def test_with_every_feature_left_out_the_callback_core_and_the_api_deploy_alone() -> None:
    # Given the template with every feature left out
    parameters = {"Documents": "false", "ConcurrencySamples": "false", "Extract": "false"}
    config = CloudConfig(template=TEMPLATE, stack_name="core-only", aws_port=0, http_port=0, parameters=parameters)
    # When it is deployed offline
    with LocalCloud(config) as cloud:
        # Then it holds no state machine, no bucket but the API's results, and the core's and the API's functions
        assert list(cloud.stack.of_type("AWS::StepFunctions::StateMachine")) == []
        assert {r.logical_id for r in cloud.stack.of_type("AWS::S3::Bucket")} == {"TaskResultBucket"}
        functions = {r.logical_id for r in cloud.stack.of_type("AWS::Lambda::Function")}
        assert functions == {
            "RegisterTokenFunction",
            "ResumeJobFunction",
            "ReconcileJobsFunction",
            "TaskApiFunction",
            "RecordTaskStatusFunction",
        }
        # And the task API answers, offering no type
        assert offered_types(cloud) == "none (every feature is left out)"


def test_the_default_template_deploys_in_a_region_without_translate_or_bedrock_data_automation() -> None:
    # Given the template with its defaults (Documents=auto, Extract=auto), in sa-east-1, which has Step Functions and
    # Macie but neither Amazon Translate nor Bedrock Data Automation
    config = CloudConfig(template=TEMPLATE, stack_name="sao-paulo", region="sa-east-1", aws_port=0, http_port=0)
    # When it is deployed offline
    with LocalCloud(config) as cloud:
        machines = {r.logical_id for r in cloud.stack.of_type("AWS::StepFunctions::StateMachine")}
        # Then it deploys without the features whose SDK integrations the Region lacks, and with the rest
        assert not {"DocumentsWorkflow", "ExtractWorkflow", "ExtractDocumentWorkflow"} & machines
        assert cloud.stack.outputs["BoundedWorkflowArn"].startswith("arn:aws:states:sa-east-1:")
        assert offered_types(cloud) == "bounded"


def test_a_feature_asked_for_where_the_region_lacks_its_service_rolls_the_stack_back() -> None:
    # Given the template with Documents=true, in sa-east-1, which has no Amazon Translate
    parameters = {"Documents": "true"}
    config = CloudConfig(
        template=TEMPLATE,
        stack_name="sao-paulo-docs",
        region="sa-east-1",
        aws_port=0,
        http_port=0,
        parameters=parameters,
    )
    # When it is deployed offline
    # Then CreateStateMachine refuses the documents workflow, which starts a Translate job, and the stack rolls back
    with pytest.raises(StackRolledBackError) as refused, LocalCloud(config):
        pass
    assert str(refused.value) == (
        'stack sao-paulo-docs ended ROLLBACK_COMPLETE: DocumentsWorkflow: Resource handler returned message: "Invalid '
        "State Machine Definition: 'SCHEMA_VALIDATION_FAILED: The resource provided "
        "arn:aws:states:::aws-sdk:translate:startTextTranslationJob is not recognized. The value is not a valid "
        "resource ARN, or the resource is not available in this region. at "
        "/States/TranslateAndClassify/Branches/0/States/StartTranslation/Resource'\" (InvalidDefinition)"
    )
    # And the cloud that could not start left nothing behind: the stack deploys again, without documents
    with LocalCloud(replace(config, parameters={"Documents": "false"})) as cloud:
        assert cloud.stack.outputs["BoundedWorkflowArn"].startswith("arn:aws:states:sa-east-1:")


def test_the_default_template_deploys_without_the_durable_function_where_the_region_lacks_durable_functions() -> None:
    # Given the template with its defaults (DurableFunctions=auto), in eu-west-1, which has Translate, Macie and
    # Bedrock Data Automation but no Lambda durable functions (localcloud/regions.py)
    config = CloudConfig(template=TEMPLATE, stack_name="dublin", region="eu-west-1", aws_port=0, http_port=0)
    # When it is deployed offline
    with LocalCloud(config) as cloud:
        functions = {r.logical_id for r in cloud.stack.of_type("AWS::Lambda::Function")}
        machines = {r.logical_id for r in cloud.stack.of_type("AWS::StepFunctions::StateMachine")}
        # Then the documents workflow is there as a state machine only: no durable function, its log group or its
        # grants, and the task API offers no documents-durable type
        assert "DocumentsWorkflow" in machines and "DocumentsDurableFunction" not in functions
        assert "DocumentsDurableFunctionLogGroup" not in {r.logical_id for r in cloud.stack.resources}
        assert "-documents-durable" not in str([r.properties for r in cloud.stack.of_type("AWS::IAM::Role")])
        assert offered_types(cloud) == "bounded, documents, extract"


def test_durable_functions_asked_for_where_the_region_lacks_them_roll_the_stack_back() -> None:
    # Given the template with DurableFunctions=true, in eu-west-1, which has no Lambda durable functions (the other
    # features but documents left out: the function is what is refused)
    parameters = {"DurableFunctions": "true", "Extract": "false", "ConcurrencySamples": "false"}
    config = CloudConfig(
        template=TEMPLATE, stack_name="durable-here", region="eu-west-1", aws_port=0, http_port=0, parameters=parameters
    )
    # When it is deployed offline
    # Then CreateFunction refuses the durable function's DurableConfig, and the stack rolls back
    with pytest.raises(StackRolledBackError) as refused, LocalCloud(config):
        pass
    assert str(refused.value) == (
        "stack durable-here ended ROLLBACK_COMPLETE: DocumentsDurableFunction: Resource handler returned message: "
        '"Lambda durable functions (DurableConfig) are not available in eu-west-1." (InvalidParameterValueException)'
    )


def test_in_an_eu_region_extract_runs_its_jobs_on_the_eu_data_automation_profile() -> None:
    # Given the template with extract alone, in eu-west-1, whose Bedrock Data Automation geography is the EU's
    parameters = {"Documents": "false", "ConcurrencySamples": "false"}
    config = CloudConfig(
        template=TEMPLATE, stack_name="ireland", region="eu-west-1", aws_port=0, http_port=0, parameters=parameters
    )
    # When it is deployed offline
    with LocalCloud(config) as cloud:
        machines = {r.logical_id: r for r in cloud.stack.of_type("AWS::StepFunctions::StateMachine")}
        roles = [r.properties for r in cloud.stack.of_type("AWS::IAM::Role")]
    # Then the extract workflow passes the EU profile to its document executions, and their role may use it
    profile = f"arn:aws:bedrock:eu-west-1:{ACCOUNT_ID}:data-automation-profile/eu.data-automation-v1"
    assert machines["ExtractWorkflow"].properties["DefinitionSubstitutions"]["DataAutomationProfileArn"] == profile
    granted = [
        statement["Resource"]
        for role in roles
        for policy in role.get("Policies", [])
        for statement in policy["PolicyDocument"]["Statement"]
        if "bedrock:InvokeDataAutomationAsync" in statement["Action"]
    ]
    assert granted == [["arn:aws:bedrock:eu-west-1:aws:data-automation-project/public-default", profile]]
