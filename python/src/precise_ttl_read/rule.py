"""The expiry rule, shared with native TTL and precise-ttl's sweeper.

An item is expired iff its TTL attribute is a Number with ``now - 5 years <= ttl <= now`` (epoch
seconds, decimals allowed, 5 years = 5 x 365 days). Anything else (missing, a String or any other
type, more than five years old, in the future, milliseconds) stays visible.

This module holds the rule twice: as the server-side filter expression injected into Query and
Scan, and as :func:`is_expired`, the client-side check of items that come back.
"""

import time
from decimal import Decimal, InvalidOperation

# 5 x 365 days in seconds, the age beyond which native TTL no longer deletes an item.
FIVE_YEARS = Decimal(5 * 365 * 24 * 3600)

# Placeholders merged into the caller's own maps. Their long names keep them clear of anything a
# caller would write; a caller that does use one gets a PlaceholderClashError, never a silent merge.
ATTRIBUTE = "#precise_ttl_attr"
NUMBER_TYPE = ":precise_ttl_number"
OLDEST = ":precise_ttl_oldest"
NOW = ":precise_ttl_now"
NAMES = (ATTRIBUTE,)
VALUES = (NUMBER_TYPE, OLDEST, NOW)

# The negation of the sweeper's delete condition: items without a Number TTL in the window pass.
HIDE_EXPIRED = (
    f"NOT (attribute_type({ATTRIBUTE}, {NUMBER_TYPE}) AND {ATTRIBUTE} BETWEEN {OLDEST} AND {NOW})"
)


def wall_clock():
    """Now, in epoch seconds with millisecond precision (the precision the Rust side uses)."""
    return Decimal(time.time_ns() // 1_000_000) / 1000


def as_decimal(value):
    """A clock reading or ``now`` argument as an exact Decimal.

    Floats go through their shortest text form, so ``1700000000.5`` stays that and does not turn
    into the float's full binary expansion.
    """
    if isinstance(value, bool):
        raise TypeError(f"now must be a number of epoch seconds, not {value!r}")
    if isinstance(value, Decimal):
        return value
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    raise TypeError(f"now must be a number of epoch seconds, not {type(value).__name__}")


def ttl_number(value):
    """The TTL attribute's value as a Decimal if it is a DynamoDB Number, else None.

    Accepts both shapes boto3 produces: the low-level client's typed ``{"N": "..."}`` and the
    resource layer's ``Decimal`` (ints and floats too, for items built by hand).
    """
    if isinstance(value, dict):
        if set(value) != {"N"} or not isinstance(value["N"], str):
            return None
        try:
            number = Decimal(value["N"])
        except InvalidOperation:
            return None
    elif isinstance(value, bool):
        return None
    elif isinstance(value, (Decimal, int, float)):
        number = as_decimal(value)
    else:
        return None
    return number if number.is_finite() else None


def is_expired(item, ttl_attribute="ttl", now=None):
    """Whether ``item`` has expired by ``now`` (epoch seconds; default: the wall clock).

    ``item`` may come from the low-level client (typed values) or the resource layer (Decimal
    values); ``None`` (no item) is not expired. Numbers are compared as Decimals, exactly, whatever
    their number of digits.
    """
    now = wall_clock() if now is None else as_decimal(now)
    return Window(now).expired(item, ttl_attribute)


class Window:
    """The expiry window ending at ``now``, computed once to judge many items."""

    __slots__ = ("oldest", "now")

    def __init__(self, now):
        self.now = now
        self.oldest = now - FIVE_YEARS

    def expired(self, item, ttl_attribute):
        if not item:
            return False
        ttl = ttl_number(item.get(ttl_attribute))
        return ttl is not None and self.oldest <= ttl <= self.now


def filter_values(now):
    """The typed values bound to the filter's placeholders, for the window ending at ``now``."""
    return {
        NUMBER_TYPE: {"S": "N"},
        OLDEST: {"N": str(now - FIVE_YEARS)},
        NOW: {"N": str(now)},
    }
