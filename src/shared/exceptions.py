"""Named errors: their class names are what ASL Retry/Catch match on."""


class TokenConflictError(Exception):
    """Another task token is already registered for this job."""


class UnknownJobEventError(Exception):
    """An event no adapter recognises reached the resume function (the rule is wider than the adapters)."""
