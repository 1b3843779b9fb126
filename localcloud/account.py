"""The AWS account the offline cloud runs in: its identity, and the rules a real account of its kind enforces.

A user deploys callback-kit into an account that is rarely ideal, and the offline cloud must not be friendlier than
that account. A profile says what kind of account it is; `Account` holds that account's state (Macie per Region)
and answers for it:

    new          a new account, as its first `sam deploy` meets it (the default): Lambda concurrency quota 10, so
                 the unreserved minimum is the whole quota and no function may reserve any; Macie not enabled and
                 its job log group `/aws/macie/classificationjobs` absent (Macie creates it at its first job).
    established  an account that has run things for a while: quota 1,000 (unreserved minimum 100); Macie enabled
                 and its job log group present, since Macie has run jobs there.

What each rule refuses, and with AWS's words (docs/deploy.md, "What the offline account enforces"):
- CreateFunction (through CloudFormation) with a ReservedConcurrentExecutions that leaves less than the unreserved
  minimum: InvalidParameterValueException, and the stack rolls back (`reservation_refusal`).
- Lambda GetAccountSettings answers the profile's quota and what is left unreserved (`LambdaAccountSettings`).
- Every Macie operation but EnableMacie while Macie is not enabled in the Region: AccessDeniedException "Macie is not
  enabled." (localcloud.simulators.macie); AWS::Macie::Session where Macie is enabled already: the resource fails.

Its identities: `ACCOUNT_ID`, and a `Credential` for each caller a SigV4 check knows (the HTTP API's, the HealthLake
FHIR endpoint's), `EXECUTION_ROLE` the one every function's worker signs with.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from moto.core.models import DEFAULT_ACCOUNT_ID

ACCOUNT_ID = DEFAULT_ACCOUNT_ID  # moto's account: every resource of the offline cloud lives in it
MACIE_LOG_GROUP = "/aws/macie/classificationjobs"  # Macie's, fixed: one per account and Region
UNRESERVED_MINIMUM = 100  # Lambda keeps this much of the quota unreserved, or the whole quota where it is lower
CODE_STORAGE_BYTES = 80 * 1024**3  # Lambda's default code storage per Region (75 GB, as GetAccountSettings says it)


@dataclass(frozen=True)
class Credential:
    """An identity of the account, as a SigV4 check knows it: its key pair and who it is."""

    access_key_id: str
    secret_access_key: str
    user_arn: str  # e.g. "arn:aws:iam::123456789012:user/alice"
    user_id: str  # e.g. "AIDAEXAMPLEALICE"
    account_id: str


# What a function's execution role gives it on AWS; here one fake identity for every worker. Services that check
# signatures offline (the HealthLake FHIR endpoint) accept it.
EXECUTION_ROLE = Credential(
    access_key_id="ASIALOCALCLOUDWORKER",
    secret_access_key="localcloud-worker-secret",  # noqa: S106 - a local, documented credential
    user_arn=f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/localcloud-function/worker",
    user_id="AROALOCALCLOUDWORKER:worker",
    account_id=ACCOUNT_ID,
)


@dataclass(frozen=True)
class AccountProfile:
    name: str
    lambda_concurrency: int  # the Region's ConcurrentExecutions quota
    macie_enabled: bool
    macie_log_group: bool  # Macie has run jobs here, so its log group exists

    @property
    def unreserved_minimum(self) -> int:
        return min(UNRESERVED_MINIMUM, self.lambda_concurrency)


NEW = AccountProfile("new", lambda_concurrency=10, macie_enabled=False, macie_log_group=False)
ESTABLISHED = AccountProfile("established", lambda_concurrency=1000, macie_enabled=True, macie_log_group=True)
PROFILES = {profile.name: profile for profile in (NEW, ESTABLISHED)}


def profile(name: str) -> AccountProfile:
    """The profile called `name`; a ValueError naming the profiles there are for any other name."""
    if name not in PROFILES:
        raise ValueError(f"no account profile {name!r}; the profiles are {', '.join(PROFILES)}")
    return PROFILES[name]


class MacieAlreadyEnabledError(Exception):
    """AWS::Macie::Session (EnableMacie) where Macie is enabled already."""

    MESSAGE = "Macie is already enabled for this account."


class Account:
    """One offline account: its profile and the state that profile starts it in (thread-safe)."""

    def __init__(self, account_profile: AccountProfile = NEW) -> None:
        self.profile = account_profile
        self.id = ACCOUNT_ID
        self._lock = threading.Lock()
        self._macie: dict[str, bool] = {}  # by Region, where EnableMacie or DisableMacie changed the profile's

    def macie_enabled(self, region: str) -> bool:
        with self._lock:
            return self._macie.get(region, self.profile.macie_enabled)

    def enable_macie(self, region: str) -> None:
        """EnableMacie in `region`; MacieAlreadyEnabledError where it is on already (Macie answers a conflict)."""
        with self._lock:
            if self._macie.get(region, self.profile.macie_enabled):
                raise MacieAlreadyEnabledError(MacieAlreadyEnabledError.MESSAGE)
            self._macie[region] = True

    def disable_macie(self, region: str) -> None:
        with self._lock:
            self._macie[region] = False

    def reserved(self, region: str) -> dict[str, int]:
        """What the Region's functions reserve (ReservedConcurrentExecutions), by function name."""
        from moto.awslambda.utils import get_backend

        functions = get_backend(self.id, region).list_functions()
        return {fn.function_name: int(fn.reserved_concurrency) for fn in functions if fn.reserved_concurrency}

    def reservation_refusal(self, reservations: Iterable[tuple[str, int]], held: int = 0) -> tuple[str, str] | None:
        """The first function, in creation order, whose ReservedConcurrentExecutions Lambda refuses, with Lambda's
        message, where the Region's other functions reserve `held` already; None when every reservation fits."""
        unreserved = self.profile.lambda_concurrency - held
        for name, reserved in reservations:
            unreserved -= reserved
            if unreserved < self.profile.unreserved_minimum:
                return name, (
                    "Specified ReservedConcurrentExecutions for function decreases account's "
                    f"UnreservedConcurrentExecution below its minimum value of [{self.profile.unreserved_minimum}]."
                )
        return None

    def lambda_settings(self, reserved_total: int, code_size: int, function_count: int) -> dict[str, Any]:
        """GetAccountSettings' answer, for the functions the Region has."""
        return {
            "AccountLimit": {
                "TotalCodeSize": CODE_STORAGE_BYTES,
                "CodeSizeUnzipped": 262_144_000,
                "CodeSizeZipped": 52_428_800,
                "ConcurrentExecutions": self.profile.lambda_concurrency,
                "UnreservedConcurrentExecutions": self.profile.lambda_concurrency - reserved_total,
            },
            "AccountUsage": {"TotalCodeSize": code_size, "FunctionCount": function_count},
        }


class LambdaAccountSettings:
    """Answers Lambda's GetAccountSettings (moto has none) from the account; every other Lambda operation goes on to
    moto, or to a subclass's method of its name (localcloud.durable.api's durable execution API: one answerer per
    service). Registered with localcloud.simulators like a simulator, with `partial` set."""

    service: ClassVar[str] = "lambda"
    partial: ClassVar[bool] = True  # the operations it does not define are moto's

    def __init__(self, account: Account, region: str) -> None:
        self.account, self.region = account, region

    def GetAccountSettings(self, params: dict[str, Any]) -> dict[str, Any]:
        from moto.awslambda.utils import get_backend

        functions = get_backend(self.account.id, self.region).list_functions()
        reserved = sum(self.account.reserved(self.region).values())
        return self.account.lambda_settings(reserved, sum(int(fn.code_size) for fn in functions), len(functions))

    def handle(self, operation: Any, params: dict[str, Any]) -> dict[str, Any]:
        return getattr(self, operation.name)(params)  # type: ignore[no-any-return]

    def settle(self, timeout: float = 10.0) -> None:
        pass

    def stop(self) -> None:
        pass
