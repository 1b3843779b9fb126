"""template.yaml deploys offline with its default parameters, as `sam deploy` would: HealthLakeDatastoreId empty
leaves the export workflow's conditional resources (functions, their rules and permissions) out of the stack. (The
workflow tests deploy it with a data store, i.e. with the export.)"""

from __future__ import annotations

import json
from pathlib import Path

from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.lambdas import FunctionSpec

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


def test_the_default_template_deploys_without_the_export_workflow() -> None:
    # Given the project's template with every parameter at its default (no HealthLake data store)
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
        # And the task API knows no extract type
        (api,) = [f for f in cloud.stack.of_type("AWS::Lambda::Function") if f.logical_id == "TaskApiFunction"]
        task_types = json.loads(api.properties["Environment"]["Variables"]["TASK_STATE_MACHINES"])
        assert set(task_types) == {"documents", "bounded"}


def test_the_default_template_deploys_in_a_region_without_bedrock_data_automation() -> None:
    # Given the template with its defaults (Extract=auto), in sa-east-1, a Region without Bedrock Data Automation
    config = CloudConfig(template=TEMPLATE, stack_name="sao-paulo", region="sa-east-1", aws_port=0, http_port=0)
    # When it is deployed offline
    with LocalCloud(config) as cloud:
        machines = {r.logical_id for r in cloud.stack.of_type("AWS::StepFunctions::StateMachine")}
        # Then it deploys, without the extract feature, whose profile and SDK integration the Region lacks
        assert "DocumentsWorkflow" in machines
        assert not {"ExtractWorkflow", "ExtractDocumentWorkflow"} & machines
        assert cloud.stack.outputs["DocumentsWorkflowArn"].startswith("arn:aws:states:sa-east-1:")
