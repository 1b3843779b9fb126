"""Lambda's durable execution API on the offline endpoint (moto has none of it): the calls the durable execution SDK
makes from inside the function (CheckpointDurableExecution, GetDurableExecutionState), the callback calls an
external system makes (SendDurableExecutionCallbackSuccess, ...Failure, ...Heartbeat), and GetDurableExecution,
GetDurableExecutionHistory and StopDurableExecution. One answerer per service: it answers GetAccountSettings too
(localcloud.account), and every other Lambda operation goes on to moto."""

from __future__ import annotations

from typing import Any

from aws_durable_execution_sdk_python.lambda_service import ErrorObject
from aws_durable_execution_sdk_python_testing.exceptions import AwsApiException
from aws_durable_execution_sdk_python_testing.model import CheckpointDurableExecutionRequest
from botocore.model import OperationModel

from localcloud.account import Account, LambdaAccountSettings
from localcloud.durable.executor import DurableExecutions, lambda_error


class LambdaApi(LambdaAccountSettings):
    """The Lambda operations moto lacks, in the account: registered like a simulator, with `partial` set."""

    def __init__(self, account: Account, region: str, executions: DurableExecutions) -> None:
        super().__init__(account, region)
        self.executions = executions

    def handle(self, operation: OperationModel, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return super().handle(operation, params)
        except AwsApiException as exc:  # the executor's refusals (a stale checkpoint token, an unknown execution)
            raise lambda_error(type(exc).__name__, str(exc)) from exc

    # --- from inside the function (the SDK) -------------------------------------------------------------------
    def CheckpointDurableExecution(self, params: dict[str, Any]) -> dict[str, Any]:
        arn = params["DurableExecutionArn"]
        request = CheckpointDurableExecutionRequest.from_dict(params, arn)
        return self.executions.checkpoint(arn, request.checkpoint_token, request.updates, request.client_token)

    def GetDurableExecutionState(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.executions.state(
            params["DurableExecutionArn"], params.get("CheckpointToken"), params.get("Marker"), params.get("MaxItems")
        )

    # --- about an execution -----------------------------------------------------------------------------------
    def GetDurableExecution(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.executions.describe(params["DurableExecutionArn"])

    def GetDurableExecutionHistory(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.executions.history(
            params["DurableExecutionArn"],
            bool(params.get("IncludeExecutionData", False)),
            bool(params.get("ReverseOrder", False)),
            params.get("Marker"),
            params.get("MaxItems"),
        )

    def StopDurableExecution(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.executions.stop_execution(params["DurableExecutionArn"], _error(params))

    # --- callbacks --------------------------------------------------------------------------------------------
    def SendDurableExecutionCallbackSuccess(self, params: dict[str, Any]) -> dict[str, Any]:
        self.executions.succeed(params["CallbackId"], params.get("Result", b""))
        return {}

    def SendDurableExecutionCallbackFailure(self, params: dict[str, Any]) -> dict[str, Any]:
        self.executions.fail(params["CallbackId"], _error(params))
        return {}

    def SendDurableExecutionCallbackHeartbeat(self, params: dict[str, Any]) -> dict[str, Any]:
        self.executions.heartbeat(params["CallbackId"])
        return {}


def _error(params: dict[str, Any]) -> ErrorObject | None:
    """The call's Error (its body: ErrorType, ErrorMessage, ErrorData, StackTrace), if it sent one."""
    return ErrorObject.from_dict(params["Error"]) if params.get("Error") else None
