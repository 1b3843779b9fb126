"""Settings from the function's environment, validated once at cold start."""

import os
from functools import cache

from pydantic import BaseModel, Field


class CallbackSettings(BaseModel):
    token_table: str = Field(alias="TOKEN_TABLE", min_length=1)
    task_timeout_seconds: int = Field(alias="TASK_TIMEOUT_SECONDS", gt=0)
    token_ttl_margin_seconds: int = Field(alias="TOKEN_TTL_MARGIN_SECONDS", ge=0)
    reconcile_after_seconds: int = Field(alias="RECONCILE_AFTER_SECONDS", ge=0)

    @property
    def default_token_ttl_seconds(self) -> int:
        """How long a registration lives when the caller gives no TTL: the waiting task's timeout plus a margin."""
        return self.task_timeout_seconds + self.token_ttl_margin_seconds


@cache
def callback_settings() -> CallbackSettings:
    return CallbackSettings.model_validate(dict(os.environ))
