"""Concurrency control: bound how many executions use a scarce resource at once (docs/concurrency.md).

Three approaches, side by side:
- admission: an SQS FIFO queue of execution requests and a scheduled starter that starts at most MAX - RUNNING;
- gate: a state that lets an execution on only while it is among the N oldest RUNNING ones (ListExecutions);
- semaphore: N permits per named resource in DynamoDB, acquired by a callback task that waits without polling.
"""
