"""The async request/reply API: the task service, the recorder of task ends, the append-only status log, the task
types."""
