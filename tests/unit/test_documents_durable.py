"""The documents workflow as a Lambda durable function (DocumentsDurableFunction), run in memory by AWS's testing SDK
(DurableFunctionTestRunner: its checkpoints, replays, parallel branches and callbacks), on moto's DynamoDB and S3.

Translate and Macie answer through botocore Stubber. Each job's wait is closed through the real resume path, as its
completion event would close it: `callbacks().resume(outcome)` finds the callback id the function's submitter
registered, and sends SendDurableExecutionCallbackSuccess/Failure on the functions' Lambda client, which here
delivers to the runner (each call validated against Lambda's model first).
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_durable_execution_sdk_python.lambda_service import ErrorObject
from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestResult, DurableFunctionTestRunner
from botocore.stub import Stubber
from botocore.validate import validate_parameters

from tests.unit.payloads import macie_finding, macie_job, translate_job, translation_output
from tests.unit.support import ACCOUNT, EVENTS, REGION, STACK, Aws, empty_bucket, tags_of
from tests.unit.waiting import wait_until

SAMPLES = sorted(EVENTS.glob("documents_durable.*.json"))
REQUEST = json.loads((EVENTS / "documents_durable.documents.json").read_text())
TRANSLATION_JOB = "b7e4c1d2a9f80a3c5e6d7f8091a2b3c4"
CLASSIFICATION_JOB = "85a55dc0fa6ed0be5939d0408f2e1c7b"
CLASSIFICATION_JOB_ARN = f"arn:aws:macie2:{REGION}:{ACCOUNT}:classification-job/{CLASSIFICATION_JOB}"
DOCUMENTS = ("contract.txt", "letter.txt", "notes/minutes.txt")
WAIT_S = 30  # the execution's end once its waits are closed (replays, steps and tagging in memory)


class Captured:
    """A Stubber expected parameter that takes any value and keeps it (`.value`), to be checked once it is known."""

    value: Any = None

    def __eq__(self, other: object) -> bool:
        self.value = other
        return True

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = object.__hash__


class DurableCallbacks:
    """The functions' Lambda client as far as shared.waits uses it: each durable callback call, its parameters
    validated against Lambda's model, is delivered to the runner's execution."""

    def __init__(self, runner: DurableFunctionTestRunner) -> None:
        self.runner = runner
        self.model = boto3.client("lambda", region_name=REGION).meta.service_model

    def _validated(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        validate_parameters(params, self.model.operation_model(operation).input_shape)
        return params

    def send_durable_execution_callback_success(self, **params: Any) -> dict[str, Any]:
        self._validated("SendDurableExecutionCallbackSuccess", params)
        self.runner.send_callback_success(params["CallbackId"], params.get("Result"))
        return {}

    def send_durable_execution_callback_failure(self, **params: Any) -> dict[str, Any]:
        self._validated("SendDurableExecutionCallbackFailure", params)
        self.runner.send_callback_failure(params["CallbackId"], ErrorObject.from_dict(params["Error"]))
        return {}


@dataclass
class DurableDocuments:
    """The durable function under the runner, the document bucket, and the services' stubs."""

    aws: Aws
    runner: DurableFunctionTestRunner
    s3: Any
    translate: Stubber
    macie: Stubber
    names: dict[str, Captured]  # what each job start was named (the execution's name) and its client token

    @property
    def bucket(self) -> str:
        return self.aws.environment["DOCUMENT_BUCKET"]

    def start(self, request: dict[str, Any]) -> str:
        return self.runner.run_async(
            input=json.dumps(request), function_name=f"{STACK}-documents-durable", account_id=ACCOUNT
        )

    def started_as(self, execution_arn: str) -> None:
        """Both jobs were named `<stack>.<execution>` and their client token is the execution's: a replayed start is
        the same request. (The runner's execution ARN is `<execution>/<invocation>`; Lambda's names the execution
        after `/durable-execution/`.)"""
        name = execution_arn.split("/durable-execution/")[-1].split("/")[0]
        token = hashlib.sha256(name.encode()).hexdigest()
        assert {key: captured.value for key, captured in self.names.items()} == {
            "JobName": f"{STACK}.{name}",
            "ClientToken": token,
            "name": f"{STACK}.{name}",
            "clientToken": token,
        }

    def registered(self) -> dict[str, str]:
        """Wait until both jobs' callback ids are registered; job key -> callback id."""

        def both() -> dict[str, str]:
            items = [item for item in self.aws.items() if item.get("waiterKind") == "callbackId"]
            return {str(item["jobKey"]): str(item["token"]) for item in items} if len(items) == 2 else {}

        return dict(wait_until(both, "registration of both callback ids"))

    def resume(self, service: str, job_id: str, status: str, detail: dict[str, Any]) -> str:
        """The job's end, through the resume path its completion event takes."""
        outcome = importlib.import_module("shared.callback.adapters").adapter(service).described(job_id, status, detail)
        return str(importlib.import_module("shared.callback.service").callbacks().resume(outcome).value)

    def result(self, execution_arn: str) -> DurableFunctionTestResult:
        return self.runner.wait_for_result(execution_arn, timeout=WAIT_S)


@pytest.fixture
def durable(aws: Aws, stubbed: Callable[[str], Stubber], monkeypatch: pytest.MonkeyPatch) -> Iterator[DurableDocuments]:
    handler = importlib.import_module("handlers.documents_durable").handler
    waits = importlib.import_module("shared.waits")
    real_client = waits.client
    s3 = boto3.client("s3", region_name=REGION)
    with DurableFunctionTestRunner(handler, region=REGION) as runner:
        callbacks = DurableCallbacks(runner)
        monkeypatch.setattr(waits, "client", lambda service: callbacks if service == "lambda" else real_client(service))
        try:
            names = {name: Captured() for name in ("JobName", "ClientToken", "name", "clientToken")}
            yield DurableDocuments(aws, runner, s3, stubbed("translate"), stubbed("macie2"), names)
        finally:
            empty_bucket(s3, aws.environment["DOCUMENT_BUCKET"])


def jobs_start(durable: DurableDocuments, request: dict[str, Any]) -> None:
    """Macie is on; StartTextTranslationJob and CreateClassificationJob (their names and client tokens captured)."""
    bucket, names = durable.bucket, durable.names
    durable.macie.add_response("get_macie_session", {"status": "ENABLED"}, {})
    durable.translate.add_response(
        "start_text_translation_job",
        {"JobId": TRANSLATION_JOB, "JobStatus": "SUBMITTED"},
        {
            "JobName": names["JobName"],
            "ClientToken": names["ClientToken"],
            "InputDataConfig": {"S3Uri": f"s3://{bucket}/{request['inputPrefix']}", "ContentType": "text/plain"},
            "OutputDataConfig": {"S3Uri": f"s3://{bucket}/{request['outputPrefix']}"},
            "DataAccessRoleArn": durable.aws.environment["TRANSLATE_DATA_ACCESS_ROLE_ARN"],
            "SourceLanguageCode": request["sourceLanguage"],
            "TargetLanguageCodes": request["targetLanguages"],
        },
    )
    scope = {"comparator": "STARTS_WITH", "key": "OBJECT_KEY", "values": [request["inputPrefix"]]}
    durable.macie.add_response(
        "create_classification_job",
        {"jobId": CLASSIFICATION_JOB, "jobArn": CLASSIFICATION_JOB_ARN},
        {
            "name": names["name"],
            "clientToken": names["clientToken"],
            "jobType": "ONE_TIME",
            "s3JobDefinition": {
                "bucketDefinitions": [{"accountId": ACCOUNT, "buckets": [bucket]}],
                "scoping": {"includes": {"and": [{"simpleScopeTerm": scope}]}},
            },
        },
    )


def failure(result: DurableFunctionTestResult) -> tuple[str, str]:
    """(error type, message) of an execution that FAILED."""
    assert result.status.value == "FAILED", result.status
    assert result.error is not None
    return result.error.type or "", result.error.message or ""


def translation(status: str, message: str | None = None) -> dict[str, Any]:
    return dict(translate_job(TRANSLATION_JOB, status, message)["TextTranslationJobProperties"])


# ----------------------------------------------------------------------------------------------------------------
# The sample request, end to end
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sample", SAMPLES, ids=lambda sample: sample.name)
def test_the_sample_request_translates_classifies_and_tags_the_documents(
    sample: Path, durable: DurableDocuments
) -> None:
    # Given the sample's documents, Macie on, and the two jobs the function starts
    request = json.loads(sample.read_text())
    bucket, input_prefix = durable.bucket, request["inputPrefix"]
    for name in DOCUMENTS:
        durable.s3.put_object(Bucket=bucket, Key=input_prefix + name, Body=b"...")
    jobs_start(durable, request)

    # When the function runs with the sample, and its jobs end: both complete (their events reach the resume
    # function), the translations written and Macie's finding in one document
    execution_arn = durable.start(request)
    registered = durable.registered()
    assert set(registered) == {f"translate#{TRANSLATION_JOB}", f"macie#{CLASSIFICATION_JOB}"}
    translated = translation_output(
        durable.s3, bucket, input_prefix, request["outputPrefix"], TRANSLATION_JOB, request["targetLanguages"]
    )
    with_pii = input_prefix + "letter.txt"
    finding = macie_finding(bucket, with_pii, CLASSIFICATION_JOB)
    criteria = {"criterion": {"classificationDetails.jobId": {"eq": [CLASSIFICATION_JOB]}}}
    durable.macie.add_response("list_findings", {"findingIds": [finding["id"]]}, {"findingCriteria": criteria})
    durable.macie.add_response("get_findings", {"findings": [finding]}, {"findingIds": [finding["id"]]})
    assert durable.resume("translate", TRANSLATION_JOB, "COMPLETED", translation("COMPLETED")) == "RESUMED"
    macie = macie_job(CLASSIFICATION_JOB, "COMPLETE")
    assert durable.resume("macie", CLASSIFICATION_JOB, "JOB_COMPLETED", macie) == "RESUMED"

    # Then the execution succeeds with both jobs and the tally of tags, each document and its translations tagged
    # pii=true exactly where Macie found personal data, and the token table holds nothing more
    result = durable.result(execution_arn)
    assert result.status.value == "SUCCEEDED", result.error
    assert json.loads(result.result or "null") == {
        "translation": {
            "jobId": TRANSLATION_JOB,
            "status": "COMPLETED",
            "output": f"s3://{bucket}/{request['outputPrefix']}",
        },
        "classification": {"jobId": CLASSIFICATION_JOB, "status": "JOB_COMPLETED"},
        "tagged": {"documents": 3, "translations": 3 * len(request["targetLanguages"]), "withPii": 1},
    }
    for source, targets in translated.items():
        for key in (source, *targets):
            assert tags_of(durable.s3, bucket, key) == {"pii": str(source == with_pii).lower()}, key
    durable.started_as(execution_arn)
    durable.translate.assert_no_pending_responses()
    durable.macie.assert_no_pending_responses()
    assert durable.aws.items() == []


# ----------------------------------------------------------------------------------------------------------------
# A job that fails, Macie off
# ----------------------------------------------------------------------------------------------------------------
def test_a_failed_translation_fails_the_execution_with_the_error_a_task_would_fail_with(
    durable: DurableDocuments,
) -> None:
    # Given the function waiting for its two jobs
    jobs_start(durable, REQUEST)
    execution_arn = durable.start(REQUEST)
    durable.registered()

    # When the translation fails (its reason from the job) and the classification completes
    failed = translation("FAILED", "Unable to read the input.")
    assert durable.resume("translate", TRANSLATION_JOB, "FAILED", failed) == "RESUMED"
    macie = macie_job(CLASSIFICATION_JOB, "COMPLETE")
    assert durable.resume("macie", CLASSIFICATION_JOB, "JOB_COMPLETED", macie) == "RESUMED"

    # Then the execution fails with JobFailedError, its message opening with the Step Functions workflow's error
    # and then the job's cause; nothing is tagged (no findings are asked for)
    result = durable.result(execution_arn)
    error, message = failure(result)
    assert error.endswith("JobFailedError")
    assert message.startswith("Translate.FAILED: ")
    assert "Unable to read the input." in message
    durable.macie.assert_no_pending_responses()
    assert durable.aws.items() == []


def test_macie_not_enabled_fails_the_execution_before_any_job_starts(durable: DurableDocuments) -> None:
    # Given an account where Macie was never enabled (GetMacieSession answers AccessDenied)
    durable.macie.add_client_error(
        "get_macie_session", "AccessDeniedException", "Macie is not enabled.", 403, expected_params={}
    )

    # When the function runs
    result = durable.result(durable.start(REQUEST))

    # Then it fails with MacieNotEnabledError, and no job was started nor registered (any start would have failed
    # the test: nothing else is stubbed)
    error, message = failure(result)
    assert error.endswith("MacieNotEnabledError")
    assert message.startswith("Macie.NotEnabled: ")
    durable.macie.assert_no_pending_responses()
    assert durable.aws.items() == []


def test_a_job_that_ended_before_its_registration_is_delivered_by_the_submitter(durable: DurableDocuments) -> None:
    # Given a translation whose end was recorded before the function registered its callback (the early race)
    ended = translation("FAILED", "Unable to read the input.") | {"JobName": f"{STACK}.documents"}
    durable.translate.add_response(
        "describe_text_translation_job", {"TextTranslationJobProperties": ended}, {"JobId": TRANSLATION_JOB}
    )
    assert durable.resume("translate", TRANSLATION_JOB, "FAILED", ended) == "RECORDED"
    jobs_start(durable, REQUEST)

    # When the function runs, and the classification completes
    execution_arn = durable.start(REQUEST)
    wait_until(lambda: durable.aws.item(f"macie#{CLASSIFICATION_JOB}"), "the classification's registration")
    macie = macie_job(CLASSIFICATION_JOB, "COMPLETE")
    assert durable.resume("macie", CLASSIFICATION_JOB, "JOB_COMPLETED", macie) == "RESUMED"

    # Then the translation's submitter closed its callback with the recorded failure at registration
    result = durable.result(execution_arn)
    assert failure(result)[1].startswith("Translate.FAILED: ")
    assert durable.aws.items() == []


def test_a_job_that_cannot_be_started_fails_the_execution_before_the_next_starts(durable: DurableDocuments) -> None:
    # Given Translate refuses the job (an invalid request: not retried)
    durable.macie.add_response("get_macie_session", {"status": "ENABLED"}, {})
    durable.translate.add_client_error("start_text_translation_job", "InvalidRequestException", "Bad input.", 400)

    # When the function runs
    result = durable.result(durable.start(REQUEST))

    # Then it fails with the translation's start, named as the workflow's; no Macie job was started (nothing else is
    # stubbed: a start would have failed the test) and nothing is left waiting
    error, message = failure(result)
    assert error.endswith("JobFailedError")
    assert message.startswith("Translate.NotStarted: ")
    assert "Bad input." in message
    durable.macie.assert_no_pending_responses()
    assert durable.aws.items() == []
