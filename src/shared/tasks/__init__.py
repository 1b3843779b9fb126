"""The async request/reply API: the task service, its HTTP resolver and response bodies (the API function's only),
the recorder of task ends, the append-only status log, the task types."""
