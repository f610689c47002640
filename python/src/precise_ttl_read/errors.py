"""Errors raised by precise_ttl_read, each with one message that says what to change."""


class PreciseTtlReadError(Exception):
    """Base class of this package's errors."""


class PlaceholderClashError(PreciseTtlReadError, ValueError):
    """The request already uses one of the placeholder names this package adds."""


class AlreadyAttachedError(PreciseTtlReadError, ValueError):
    """hide_expired was called again on the same client with different settings."""
