"""`make preflight` (tools/preflight.py) checks the REAL template.yaml against the offline cloud's accounts
(localcloud.account): a new one, where a first deploy meets a quota of 10 and Macie off, and an established one, where
Macie is on and its job log group exists. preflight reaches the cloud through its endpoint (AWS_ENDPOINT_URL), as it
would reach `make local`.

Step Functions' ValidateStateMachineDefinition is the offline cloud's (localcloud.simulators.stepfunctions): moto does
not serve it."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

import pytest

from localcloud.account import MACIE_LOG_GROUP
from localcloud.cloud import CloudConfig, LocalCloud
from tools.preflight import main

ROOT = Path(__file__).parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "account" / "template.yaml"  # what the account holds before the deploy
DATASTORE = "0123456789abcdef0123456789abcdef"  # a HealthLake data store id (nothing reads the data store itself)


@contextmanager
def offline_account(
    profile: str, template: Path = FIXTURE, stack_name: str = "", **parameters: str
) -> Iterator[LocalCloud]:
    """An offline cloud of the account profile, holding one stack: the fixture's (one function, nothing reserved) unless
    another template is given, and every new boto3 client sent to its endpoint. (In-process, moto's stubber answers
    every call after any simulator, and raises for an operation it lacks.)"""
    config = CloudConfig(
        template=template,
        stack_name=stack_name or f"preflight-{profile}",
        aws_port=0,
        http_port=0,
        account=profile,
        parameters=parameters,
    )
    with LocalCloud(config) as cloud, mock.patch.dict(os.environ, {"AWS_ENDPOINT_URL": cloud.aws_endpoint}):
        yield cloud


def preflight(*args: str, region: str = "us-east-1") -> tuple[int, list[str], list[str]]:
    """Run `python -m tools.preflight --config-env dev` on the real template: its exit code, stdout and stderr lines."""
    argv = ["--template", str(ROOT / "template.yaml"), "--config-file", str(ROOT / "samconfig.toml")]
    argv += ["--config-env", "dev", "--region", region, *args]
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(argv)
            code = 0
        except SystemExit as exited:
            code = int(exited.code or 0)
    return code, out.getvalue().splitlines(), err.getvalue().splitlines()


def test_a_new_account_with_the_defaults_needs_macie_and_warns_of_its_quota() -> None:
    # Given a new account: Lambda quota 10, Macie off, no Macie log group
    with offline_account("new"):
        # When preflight checks a deploy with the default parameters
        code, out, err = preflight()
    # Then the quota is a warning, Macie's absence blocks the documents tasks, and the run exits 1
    assert err == []
    assert out[0].startswith(
        "WARNING: Lambda's concurrency quota in us-east-1 is 10: functions will be throttled under load; request an "
        "increase: Service Quotas, Lambda 'Concurrent executions' L-B99A9384"
    )
    assert out[1] == (
        "BLOCKS DOCUMENTS: Macie is not enabled in us-east-1: documents tasks will fail Macie.NotEnabled; fix: deploy "
        "with EnableMacie=true (Macie bills while on) or run aws macie2 enable-macie"
    )
    assert out[2:] == [
        "preflight callback-kit-dev in 123456789012/us-east-1: 8 checks; blocking 1, warnings 1",
    ]
    assert code == 1


def test_a_new_account_deploying_with_enable_macie_has_nothing_blocking() -> None:
    # Given a new account
    with offline_account("new"):
        # When the stack is to enable Macie itself
        code, out, _ = preflight("--parameter-overrides", "EnableMacie=true")
    # Then only the quota warning is left, and the run exits 0
    assert [line.split(":")[0] for line in out[:-1]] == ["WARNING"]
    assert code == 0


def test_a_new_account_deploying_without_the_documents_feature_needs_no_macie() -> None:
    # Given a new account: Macie off, no Macie log group
    with offline_account("new"):
        # When the stack leaves the documents feature out
        code, out, _ = preflight("--parameter-overrides", "Documents=false")
    # Then Macie is not its concern: only the quota warning is left, and the run exits 0
    assert [line.split(":")[0] for line in out[:-1]] == ["WARNING"]
    assert code == 0


def test_an_established_account_refuses_a_second_macie_session() -> None:
    # Given an established account, where Macie is on
    with offline_account("established"):
        # When the stack is to enable Macie too
        code, out, _ = preflight("--parameter-overrides", "EnableMacie=true")
    # Then its MacieSession would conflict
    assert out[:-1] == [
        "BLOCKS DEPLOY: Macie is already enabled in us-east-1 (ENABLED): the stack's MacieSession would fail "
        "(ConflictException) and the stack roll back; fix: set EnableMacie=false",
    ]
    assert code == 1


def test_an_established_account_finds_nothing_with_the_default_parameters() -> None:
    # Given an established account: Macie on, its job log group there (the stack subscribes to it as it is), no other
    # stack of the template (the fixture's is none)
    with offline_account("established"):
        # When preflight checks a deploy with the default parameters (EnableMacie=false)
        code, out, err = preflight()
    # Then no check finds anything (every state machine's definition validates in us-east-1), and the run exits 0
    assert err == []
    assert out == [
        "preflight callback-kit-dev in 123456789012/us-east-1: 8 checks; blocking 0, warnings 0",
    ]
    assert code == 0


def test_another_stack_of_the_template_is_named_and_one_exporting_the_same_data_store_is_warned_of() -> None:
    # Given an established account holding prod, a stack of the template that exports a HealthLake data store
    with offline_account("established", ROOT / "template.yaml", "callback-kit-prod", HealthLakeDatastoreId=DATASTORE):
        # When preflight checks dev beside it: with the default parameters (no export), with the same data store, and
        # prod itself (an update of it)
        code, out, err = preflight()
        exporting_code, exporting, _ = preflight("--parameter-overrides", f"HealthLakeDatastoreId={DATASTORE}")
        _, itself, _ = preflight(
            "--stack-name", "callback-kit-prod", "--parameter-overrides", f"HealthLakeDatastoreId={DATASTORE}"
        )
    # Then dev is warned of prod and of what each does with the other's jobs, and nothing blocks
    other_stacks = (
        "WARNING: other callback-kit stacks in us-east-1: callback-kit-prod: each stack acts on its own jobs only (a "
        "Macie or Bedrock Data Automation completion reaches only its stack's rules, by the job's name or the bucket "
        "it wrote to); another stack's Translate completion reaches this stack's resume function too, costs one "
        "invocation and one DescribeTextTranslationJob, and is acknowledged FOREIGN with nothing stored; nothing to fix"
    )
    assert err == []
    assert out == [
        other_stacks,
        "preflight callback-kit-dev in 123456789012/us-east-1: 8 checks; blocking 0, warnings 1",
    ]
    assert code == 0
    # And exporting prod's data store too, dev is warned that the two stacks' export completions are not told apart
    assert exporting[:-1] == [
        other_stacks,
        f"WARNING: the HealthLake data store {DATASTORE} is exported by callback-kit-prod too: the stacks' export "
        "completions are not told apart (an export's events carry the data store and the job id, no stack's name), so "
        "each stack keeps the other's as early completions until TaskTimeoutSeconds + TokenTtlMarginSeconds have "
        "passed, and their runs wait for each other (HealthLake runs one export at a time per data store); fix: give "
        "each stack its own data store, or set HealthLakeDatastoreId in one of them only",
    ]
    assert exporting_code == 0
    # And a stack is no other stack of its own
    assert itself == ["preflight callback-kit-prod in 123456789012/us-east-1: 8 checks; blocking 0, warnings 0"]


def test_a_log_group_with_two_subscription_filters_takes_no_third() -> None:
    # Given Macie's log group, which two other subscribers use already
    with offline_account("established") as cloud:
        function_arn = cloud.client("lambda").list_functions()["Functions"][0]["FunctionArn"]
        for name in ("audit-export", "siem-forwarder"):
            cloud.client("logs").put_subscription_filter(
                logGroupName=MACIE_LOG_GROUP, filterName=name, filterPattern="", destinationArn=function_arn
            )
        # When preflight checks a deploy that subscribes to it
        code, out, _ = preflight()
    # Then the stack's subscription would be the third, and the finding names the two there are
    assert out[0] == (
        f"BLOCKS DEPLOY: log group {MACIE_LOG_GROUP} has 2 subscription filters already (audit-export, "
        "siem-forwarder): a group takes two, this stack's would be the third (LimitExceededException); fix: set "
        "MacieJobEvents=reconciler (the reconciler resumes this stack's Macie jobs), or remove one, e.g. aws logs "
        f"delete-subscription-filter --log-group-name {MACIE_LOG_GROUP} --filter-name audit-export"
    )
    assert code == 1


def test_a_long_stack_name_makes_a_state_machine_name_too_long() -> None:
    # Given a stack name of 64 characters: ExtractDocumentWorkflow's name, <stack>-extract-document, is 81
    stack = "callback-kit-" + "x" * 51
    with offline_account("established"):
        # When preflight checks it
        code, out, _ = preflight("--stack-name", stack)
    # Then one finding names every name over its limit, the longest, and the longest stack name that fits
    (finding,) = [line for line in out if line.startswith("BLOCKS")]
    assert finding == (
        f"BLOCKS DEPLOY: stack name '{stack}' (64 characters) makes 2 names too long (AdmissionDeadLetterQueue "
        f"83 > 80, ExtractDocumentWorkflow 81 > 80); the longest, AdmissionDeadLetterQueue's: "
        f"'{stack}-admission-dlq.fifo'; fix: a stack name of at most 61 characters (--stack-name, samconfig stack_name)"
    )
    assert code == 1


def test_a_region_without_bedrock_data_automation_leaves_extract_out_unless_it_is_asked_for() -> None:
    # Given an established account checked in sa-east-1, a Region the template's DataAutomationRegions lacks (the
    # cloud runs in us-east-1: it cannot start elsewhere, but answers every Region's calls)
    with offline_account("established"):
        # When preflight checks a deploy there, with the default parameters (Extract=auto), and with Extract=true
        auto_code, auto_out, _ = preflight(region="sa-east-1")
        true_code, true_out, _ = preflight("--parameter-overrides", "Extract=true", region="sa-east-1")
    # Then by default extract is left out, which it says, and nothing blocks
    assert "WARNING: Bedrock Data Automation is not in sa-east-1: the extract feature is left out (Extract=auto)" in (
        "\n".join(auto_out)
    )
    assert [line for line in auto_out if line.startswith("BLOCKS")] == []
    assert auto_code == 0
    # And asked for, extract blocks the deploy: its state machines would fail
    blocking = [line for line in true_out if line.startswith("BLOCKS")]
    assert any("Bedrock Data Automation is not in sa-east-1, and Extract=true" in line for line in blocking)
    assert true_code == 1


def test_a_profile_of_another_geography_blocks_extract() -> None:
    # Given an established account in us-east-1
    with offline_account("established"):
        # When the stack is to run its jobs on the EU profile
        code, out, _ = preflight("--parameter-overrides", "DataAutomationProfile=eu.data-automation-v1")
    # Then BDA would refuse them
    assert [line for line in out if line.startswith("BLOCKS")] == [
        "BLOCKS EXTRACT: DataAutomationProfile=eu.data-automation-v1 is not of us-east-1's geography (us.): BDA "
        "refuses its jobs; fix: set DataAutomationProfile=us.data-automation-v1, or leave it empty"
    ]
    assert code == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config-env", "staging"], "preflight: no config env 'staging' in "),
        (["--parameter-overrides", "EnableMacie"], "preflight: parameter override 'EnableMacie' is not Key=Value"),
        (["--parameter-overrides", "Macie=true"], "preflight: parameter override 'Macie=true': the template has no "),
        (["--template", "missing.yaml"], "preflight: cannot read the template missing.yaml: No such file"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(args: list[str], message: str) -> None:
    # Given no cloud at all: bad input is refused before any AWS call
    # When preflight runs with it (a later --config-env / --template replaces preflight()'s)
    code, out, err = preflight(*args)
    # Then one line on stderr says what is wrong, and nothing else is printed
    assert (code, out, len(err)) == (2, [], 1)
    assert err[0].startswith(message)


def test_no_credentials_is_one_line_on_stderr_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given no credentials anywhere in the default chain
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    # When preflight runs
    code, out, err = preflight()
    # Then it says so in one line, without a traceback
    assert (code, out, err) == (2, [], ["preflight: Unable to locate credentials"])


def test_a_region_without_translate_leaves_documents_out_unless_it_is_asked_for() -> None:
    # Given an established account checked in sa-east-1, which has Macie but not Amazon Translate
    with offline_account("established"):
        # When preflight checks a deploy there with Documents=true (auto leaves documents out there)
        code, out, _ = preflight("--parameter-overrides", "Documents=true", region="sa-east-1")
    # Then Step Functions' validation there refuses the documents state machine, where it starts a Translate job
    assert [line for line in out if line.startswith("BLOCKS")] == [
        "BLOCKS DEPLOY: state machine DocumentsWorkflow (statemachines/documents.asl.json) is invalid in sa-east-1: "
        "SCHEMA_VALIDATION_FAILED: The resource provided arn:aws:states:::aws-sdk:translate:startTextTranslationJob is "
        "not recognized. The value is not a valid resource ARN, or the resource is not available in this region. at "
        "/States/TranslateAndClassify/Branches/0/States/StartTranslation/Resource; fix: change "
        "statemachines/documents.asl.json, or deploy in a Region that offers what it uses"
    ]
    assert code == 1


def test_a_reservation_a_new_account_cannot_give_blocks_the_deploy(tmp_path: Path) -> None:
    # Given a stack that reserves one execution for a function, to go into a new account (quota 10, all of it kept)
    config = tmp_path / "samconfig.toml"
    config.write_text(
        'version = 0.1\n[dev.deploy.parameters]\nstack_name = "reserving"\nparameter_overrides = "Reserved=1"\n'
    )
    argv = ["--template", str(FIXTURE), "--config-file", str(config), "--config-env", "dev", "--region", "us-east-1"]
    out = io.StringIO()
    with offline_account("new"), redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main(argv)
    # Then preflight says CreateFunction would fail with Lambda's words, and what to do
    (finding,) = [line for line in out.getvalue().splitlines() if line.startswith("BLOCKS DEPLOY")]
    assert finding.startswith(
        "BLOCKS DEPLOY: the stack's functions reserve 1 concurrent executions, the account has 10"
    )
    assert "below its minimum value of [10]." in finding
    assert exited.value.code == 1


def test_a_region_without_durable_functions_leaves_the_durable_engine_out() -> None:
    # Given an established account checked in eu-west-1, which has Translate and Macie (the documents feature) but is
    # not among the template's Regions with Lambda durable functions
    with offline_account("established"):
        # When preflight checks a deploy there with the default parameters, and with DurableFunctions=true
        auto_code, auto_out, _ = preflight(region="eu-west-1")
        true_code, true_out, _ = preflight("--parameter-overrides", "DurableFunctions=true", region="eu-west-1")
    # Then it says the durable engine is left out, and what forcing it risks; neither blocks
    assert any(
        line.startswith("WARNING: Lambda durable functions are not known to be in eu-west-1") for line in auto_out
    )
    assert any(line.startswith("WARNING: DurableFunctions=true, but Lambda durable") for line in true_out)
    assert (auto_code, true_code) == (0, 0)
