"""Concurrency control: bound how many executions use a scarce resource at once (docs/concurrency.md).

Three approaches, side by side:
- admission: an SQS FIFO queue of execution requests and a scheduled starter that starts at most MAX - RUNNING;
- gate: a state that lets an execution on only while it is among the N oldest RUNNING ones (ListExecutions);
- semaphore: N permits per named resource in DynamoDB, acquired by a callback task that waits without polling.
"""

from typing import Annotated

from pydantic import StringConstraints

# A resource's name: what its users agree to call it, e.g. "bda:us-east-1" or "partner-api".
ResourceName = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9._:/-]+$")]
