"""The export queue's messages, one model each: `start` is written by the export workflow (the SQS task's MessageBody
in statemachines/export.asl.json) and again by a start that must wait; `check` by every check that re-queues itself.
ExportJobFunction reads both; a message without its `action` is refused."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Message(BaseModel):
    model_config = ConfigDict(populate_by_name=True, hide_input_in_errors=True)

    task_token: str = Field(alias="taskToken", min_length=1, repr=False)

    def body(self) -> str:
        """The SQS message body: the model's JSON, in the wire's field names."""
        return self.model_dump_json(by_alias=True)


class Start(Message):
    action: Literal["start"]
    execution_arn: str = Field(alias="executionArn", min_length=1)
    execution_name: str = Field(alias="executionName", min_length=1)
    last_run_time: str | None = Field(alias="lastRunTime", default=None)


class Check(Message):
    action: Literal["check"]
    job_id: str = Field(alias="jobId", min_length=1)
