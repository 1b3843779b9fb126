"""moto's fixes: the registry of every change the offline cloud makes to moto (patches.py), and the modules the changes
come from: Step Functions' interpreter (sfn.py), EventBridge delivery and schedules (events.py), Logs subscriptions
(logs.py), SQS event-source mappings and DynamoDB TTL (pollers.py), and the backends' locks (atomic.py). Each change
cites its gap in docs/offline-cloud.md."""
