"""The offline cloud is an account with AWS's rules (localcloud.account): a new one by default, where a first
`sam deploy` meets a small Lambda concurrency quota and Macie off. Each rule here refuses what AWS refuses, in AWS's
words, and rolls the stack back; without the rule the same deploy succeeds offline and fails on AWS. A stack's delete
leaves what AWS's leaves: a retained resource, its fixed name taken; and Macie off where the stack had turned it on."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.account import ESTABLISHED, MACIE_LOG_GROUP, NEW, Account, LambdaAccountSettings
from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.deploy import Stack, StackRolledBackError, delete, deploy

REGION = "us-east-1"
TEMPLATE = Path(__file__).parent / "fixtures" / "account" / "template.yaml"


_deployed: list[Stack] = []  # the stacks a test deployed, deleted when it ends


@pytest.fixture(autouse=True)
def each_test_its_own_stacks() -> Iterator[None]:
    """What a test's stacks reserve or subscribe to is gone when it ends: the module's tests share one account."""
    yield
    while _deployed:
        delete(_deployed.pop(), REGION)


def deploy_fixture(account: Account, **parameters: str) -> str:
    """Deploy the fixture with `parameters` into `account`; the stack's name."""
    name = f"account-{uuid.uuid4().hex[:8]}"
    _deployed.append(deploy(TEMPLATE, name, parameters, REGION, f"{name}-artifacts", account))
    return name


def stack_names(cloud: LocalCloud) -> set[str]:
    return {s["StackName"] for s in cloud.client("cloudformation").describe_stacks()["Stacks"]}


def test_a_new_account_refuses_any_reserved_concurrency_and_rolls_the_stack_back(cloud: LocalCloud) -> None:
    # Given a new account: quota 10, the whole of it kept unreserved
    settings = cloud.client("lambda").get_account_settings()["AccountLimit"]
    assert settings["ConcurrentExecutions"] == 10
    # When a stack reserves one execution for a function
    with pytest.raises(StackRolledBackError) as raised:
        deploy_fixture(Account(NEW), Reserved="1")
    # Then it rolls back with Lambda's own message, and leaves no stack behind
    assert str(raised.value).endswith(
        'Worker: Resource handler returned message: "Specified ReservedConcurrentExecutions for function decreases '
        "account's UnreservedConcurrentExecution below its minimum value of [10].\" (InvalidParameterValueException)"
    )
    assert not any(name.startswith("account-") for name in stack_names(cloud))


def test_an_established_account_grants_a_reservation_and_reports_what_is_left(cloud: LocalCloud) -> None:
    # Given an established account (quota 1,000, 100 kept unreserved)
    account = Account(ESTABLISHED)
    # When a stack reserves 900, and another one more
    deploy_fixture(account, Reserved="900")
    # Then the first fits and the second does not (1,000 - 900 - 1 < 100)
    with pytest.raises(StackRolledBackError, match=r"minimum value of \[100\]"):
        deploy_fixture(account, Reserved="901")


def test_what_other_stacks_reserve_counts_against_the_next_one(cloud: LocalCloud) -> None:
    # Given an established account where one stack reserves 500 (each alone fits: 1,000 - 500 >= 100)
    account = Account(ESTABLISHED)
    deploy_fixture(account, Reserved="500")
    # When a second stack reserves 500 too
    # Then Lambda refuses it: 1,000 - 500 - 500 leaves less than the 100 kept unreserved
    with pytest.raises(StackRolledBackError, match=r"minimum value of \[100\]"):
        deploy_fixture(account, Reserved="500")


def test_a_rolled_back_stack_leaves_macie_as_it_was(cloud: LocalCloud) -> None:
    # Given a new account (Macie off) and a stack that would turn Macie on but whose subscription fails
    with pytest.raises(StackRolledBackError, match=r"Subscription: .*does not exist"):
        deploy_fixture(cloud.account, EnableMacie="true", SubscribedLogGroup="/jobs/never-made")
    # Then Macie is still off, as CloudFormation's rollback deletes the session it made
    assert not cloud.account.macie_enabled(REGION)


def test_get_account_settings_answers_the_quota_and_what_is_unreserved(cloud: LocalCloud) -> None:
    # Given the reservations the Region's functions hold
    lambda_ = cloud.client("lambda")
    functions = [f["FunctionName"] for f in lambda_.list_functions()["Functions"]]
    reserved = sum(
        lambda_.get_function_concurrency(FunctionName=f).get("ReservedConcurrentExecutions", 0) for f in functions
    )
    # When GetAccountSettings is asked in a new and in an established account
    new = lambda_.get_account_settings()["AccountLimit"]
    established = LambdaAccountSettings(Account(ESTABLISHED), REGION).GetAccountSettings({})["AccountLimit"]
    # Then each answers its quota, less what is reserved
    assert (new["ConcurrentExecutions"], new["UnreservedConcurrentExecutions"]) == (10, 10 - reserved)
    assert (established["ConcurrentExecutions"], established["UnreservedConcurrentExecutions"]) == (
        1000,
        1000 - reserved,
    )


def test_a_macie_session_enables_macie_in_a_new_account_and_fails_where_it_is_on(cloud: LocalCloud) -> None:
    # Given a new account, where Macie refuses every call
    macie = cloud.client("macie2")
    with pytest.raises(macie.exceptions.AccessDeniedException, match="Macie is not enabled"):
        macie.get_macie_session()
    # When a stack with AWS::Macie::Session is deployed into it
    deploy_fixture(cloud.account, EnableMacie="true")
    # Then Macie is on
    assert macie.get_macie_session()["status"] == "ENABLED"
    # And a second stack with a session fails, as it does where Macie is on already
    with pytest.raises(StackRolledBackError, match=r"MacieSession: .*already enabled.*\(ConflictException\)"):
        deploy_fixture(cloud.account, EnableMacie="true")
    macie.disable_macie()


def test_a_log_group_with_a_fixed_name_that_exists_fails_the_stack(cloud: LocalCloud) -> None:
    # Given an account where Macie's job log group exists (Macie ran a job, or a deleted stack retained it)
    cloud.client("logs").create_log_group(logGroupName=MACIE_LOG_GROUP)
    try:
        # When a stack creates a log group of that name
        with pytest.raises(StackRolledBackError) as raised:
            deploy_fixture(cloud.account, CreatedLogGroup=MACIE_LOG_GROUP)
        # Then it fails as CloudFormation says it
        assert str(raised.value).endswith(
            f"FixedLogGroup: Resource of type 'AWS::Logs::LogGroup' with identifier '{MACIE_LOG_GROUP}' already exists."
        )
    finally:
        cloud.client("logs").delete_log_group(logGroupName=MACIE_LOG_GROUP)


def test_a_subscription_needs_its_log_group_and_a_group_takes_two(cloud: LocalCloud) -> None:
    # Given no log group /jobs/missing
    # When a stack subscribes to it
    with pytest.raises(StackRolledBackError, match=r"Subscription: .*does not exist.*ResourceNotFoundException"):
        deploy_fixture(cloud.account, SubscribedLogGroup="/jobs/missing")
    # And given a group two stacks subscribe to
    cloud.client("logs").create_log_group(logGroupName="/jobs/shared")
    deploy_fixture(cloud.account, SubscribedLogGroup="/jobs/shared")
    deploy_fixture(cloud.account, SubscribedLogGroup="/jobs/shared")
    # Then a third stack's subscription fails: Logs allows two per group
    with pytest.raises(StackRolledBackError, match=r"Subscription: .*LimitExceededException"):
        deploy_fixture(cloud.account, SubscribedLogGroup="/jobs/shared")


def test_a_deleted_stack_keeps_what_it_retains_and_its_fixed_name_fails_the_stack_created_again(
    cloud: LocalCloud,
) -> None:
    # Given a stack with a log group of a fixed name and DeletionPolicy Retain
    name, group = f"account-{uuid.uuid4().hex[:8]}", f"/jobs/retained-{uuid.uuid4().hex[:8]}"
    stack = deploy(TEMPLATE, name, {"RetainedLogGroup": group}, REGION, f"{name}-artifacts", cloud.account)
    logs = cloud.client("logs")
    try:
        # When the stack is deleted
        delete(stack, REGION)
        # Then the log group stays behind
        groups = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
        assert [g["logGroupName"] for g in groups] == [group]
        # And the stack created again fails on it, as CloudFormation says it
        with pytest.raises(StackRolledBackError) as raised:
            deploy(TEMPLATE, name, {"RetainedLogGroup": group}, REGION, f"{name}-artifacts", cloud.account)
        assert str(raised.value).endswith(
            f"KeptLogGroup: Resource of type 'AWS::Logs::LogGroup' with identifier '{group}' already exists."
        )
    finally:
        with contextlib.suppress(logs.exceptions.ResourceNotFoundException):  # gone with the stack, without Retain
            logs.delete_log_group(logGroupName=group)


def test_deleting_the_stack_that_enabled_macie_turns_macie_off() -> None:
    # Given a new account (Macie off) whose stack turned Macie on (EnableMacie: AWS::Macie::Session): a cloud of its
    # own, as deleting a stack is the cloud's (after the tests that use the module cloud's Lambda and Macie answers: a
    # cloud started inside another replaces them)
    config = CloudConfig(
        template=TEMPLATE, stack_name="account-macie", aws_port=0, http_port=0, parameters={"EnableMacie": "true"}
    )
    with LocalCloud(config) as own:
        macie = own.client("macie2")
        assert macie.get_macie_session()["status"] == "ENABLED"
        # When the stack is deleted
        own.delete_stack(own.stack)
        # Then Macie is off again, as CloudFormation deleting the session disables Macie
        with pytest.raises(macie.exceptions.AccessDeniedException, match="Macie is not enabled"):
            macie.get_macie_session()


def test_an_unknown_account_profile_is_refused_with_the_profiles_there_are() -> None:
    with pytest.raises(ValueError, match="no account profile 'ideal'; the profiles are new, established"):
        LocalCloud(CloudConfig(template=TEMPLATE, account="ideal"))
