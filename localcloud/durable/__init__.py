"""Lambda durable functions offline: a function with DurableConfig starts a durable execution when it is invoked,
and Lambda's durable execution API answers on the offline endpoint.

What runs is AWS's testing SDK's executor (`aws-durable-execution-sdk-python-testing`, the execution's checkpoints,
replays, timers and callbacks: executor.py) and, in the function, the durable execution SDK its package brings (or
the runtime's copy, as Lambda's python3.13 runtime has one). Each invocation of the execution runs the function's
built package in a worker (localcloud.runtime.lambdas): the first runs the handler from the start, and every later
one, when a callback closes or a timer falls due, replays it from its checkpoints, as Lambda does. Timers (waits,
callback timeouts and heartbeats, the execution's timeout) wait on the cloud's clock.

- runtime.py: `DurableRuntime`, the offline Lambda runtime whose durable functions' invocations start executions
  (Invoke, with its X-Amz-Durable-Execution-Arn; Step Functions, EventBridge and the other callers alike);
- executor.py: `DurableExecutions`, the executions and what Lambda answers about them;
- api.py: `LambdaApi`, the answerer of the Lambda operations moto lacks: the durable execution API and
  GetAccountSettings (localcloud.account).
"""
