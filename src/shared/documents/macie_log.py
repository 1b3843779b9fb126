"""Macie's job log group, `/aws/macie/classificationjobs`: the account's and Macie's, one per Region, never a stack's.

Macie makes it at its first job; a stack must subscribe to it before that. So the stack makes it when it is absent
and leaves it when it is there (another stack, a deleted stack, or Macie made it), and never deletes it: Macie goes
on writing to it after the stack is gone.
"""

from __future__ import annotations

from shared.aws import client
from shared.observability import logger


def ensure_log_group(name: str, retention_days: int) -> bool:
    """Make the log group unless it exists (with `retention_days`, only when made here); True if it was made."""
    logs = client("logs")
    try:
        logs.create_log_group(logGroupName=name)
    except logs.exceptions.ResourceAlreadyExistsException:
        logger.info("log group exists: left as it is", extra={"logGroup": name})
        return False
    logs.put_retention_policy(logGroupName=name, retentionInDays=retention_days)
    logger.info("log group made", extra={"logGroup": name, "retentionDays": retention_days})
    return True
