"""Task types of the async API: each one is a request model whose `input` is validated by its own model.

The state machine or durable function that runs a type comes from the template (TASK_STATE_MACHINES,
TASK_DURABLE_FUNCTIONS, checked against these models at cold start); a type whose workflow is not deployed is not
offered. To add a type: a `<Name>Task` model with `type: Literal["<name>"]` and its input model, added to the
TaskRequest union, and one `"<name>": "${<Workflow>}"` entry in TASK_STATE_MACHINES (template.yaml, TaskApiFunction),
with the workflow's ARN in the status rule and the functions' IAM policies (docs/api.md, "Adding a task type").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from shared.concurrency import ResourceName

# Amazon Translate's language codes: "en", "fr-CA", "zh-TW"; "auto" lets Translate detect the source language.
LanguageCode = Annotated[str, StringConstraints(pattern=r"^[a-z]{2,3}(-[A-Z]{2})?$")]
S3Prefix = Annotated[str, StringConstraints(min_length=1, max_length=1024, pattern=r"^[^/\s]")]
S3Key = Annotated[str, StringConstraints(min_length=1, max_length=1024, pattern=r"^[^/\s]")]


class TaskInput(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, str_strip_whitespace=False)


class DocumentsInput(TaskInput):
    """DocumentsWorkflow: translate the documents under a prefix and classify them with Macie."""

    input_prefix: S3Prefix = Field(alias="inputPrefix", description="Folder of the documents in the document bucket")
    output_prefix: S3Prefix = Field(alias="outputPrefix", description="Where Translate writes the translations")
    source_language: LanguageCode | Literal["auto"] = Field(alias="sourceLanguage", examples=["en"])
    target_languages: list[LanguageCode] = Field(
        alias="targetLanguages", min_length=1, max_length=10, examples=[["es", "fr"]]
    )


class DocumentsTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["documents"]
    input: DocumentsInput


class DocumentsDurableTask(BaseModel):
    """The documents workflow as a Lambda durable function (DocumentsDurableFunction): the same input, the same jobs
    and tags, waited for through the same resume path (docs/callback.md compares the two engines)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["documents-durable"]
    input: DocumentsInput


class ExportInput(TaskInput):
    """ExportWorkflow: export what changed in the HealthLake data store since the last successful run (no input;
    a run while another holds the lock ends SUCCEEDED with status SKIPPED)."""


class ExportTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["export"]
    input: ExportInput = Field(default_factory=ExportInput)


class BoundedInput(TaskInput):
    """BoundedWorkflow: hold a permit of a shared resource for some seconds; at most SemaphorePermits tasks hold the
    same resource at once, the others wait their turn in arrival order."""

    resource: ResourceName = Field(description="The shared resource's name", examples=["partner-api"])
    seconds: int = Field(ge=0, le=86_400, description="How long the work holds the resource", examples=[30])


class BoundedTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["bounded"]
    input: BoundedInput


class ExtractInput(TaskInput):
    """ExtractWorkflow: extract documents of the document bucket with Bedrock Data Automation (the template's project
    and profile), at most the Region's concurrent-job quota at once across every batch; either a prefix or a list of
    keys, at most 500 documents a batch. The status log counts the documents done."""

    prefix: S3Prefix | None = Field(default=None, description="Folder of the documents", examples=["incoming/"])
    documents: list[S3Key] | None = Field(
        default=None, min_length=1, max_length=500, description="Keys of the documents", examples=[["a.pdf"]]
    )

    @model_validator(mode="after")
    def _one_source(self) -> ExtractInput:
        if (self.prefix is None) == (self.documents is None):
            raise ValueError("give either prefix or documents")
        return self


class ExtractTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["extract"]
    input: ExtractInput


# The request body: whichever task model its "type" names.
TaskRequest = Annotated[
    DocumentsTask | DocumentsDurableTask | ExportTask | BoundedTask | ExtractTask, Field(discriminator="type")
]


def task_models() -> tuple[type[BaseModel], ...]:
    """The task models of TaskRequest."""
    inner = get_args(TaskRequest)[0]
    return get_args(inner) or (inner,)


def task_type_names() -> set[str]:
    """The type names the models accept."""
    return {str(get_args(model.model_fields["type"].annotation)[0]) for model in task_models()}


def workflow_input(request: Any) -> dict[str, Any]:
    """The task's input as its workflow takes it (the API's field names, validated and normalised)."""
    return dict(request.input.model_dump(mode="json", by_alias=True, exclude_none=True))
