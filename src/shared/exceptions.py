"""Named errors: their class names are what ASL Retry/Catch match on."""


class TokenConflictError(Exception):
    """Another task token is already registered for this job."""


class UnknownServiceError(ValueError):
    """A registration names a service no adapter describes."""


class UnknownJobEventError(Exception):
    """An event no adapter recognises reached the resume function (the rule is wider than the adapters)."""


class EventsNotDeliveredError(Exception):
    """PutEvents kept refusing entries after every retry; the invocation fails so its retries/DLQ take over."""
