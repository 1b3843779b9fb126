"""The async request/reply API: the task service, its append-only status log, the task types."""
