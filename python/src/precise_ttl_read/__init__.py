"""precise_ttl_read: hide expired DynamoDB items from boto3 reads.

``hide_expired(client_or_resource)`` makes every read through a boto3 DynamoDB client, service
resource or Table leave out items whose TTL has passed, by the rule native TTL and precise-ttl's
sweeper delete by; ``is_expired(item)`` is that rule for one item.
"""

from .errors import AlreadyAttachedError, PlaceholderClashError, PreciseTtlReadError
from .hooks import SWITCH, hide_expired
from .rule import FIVE_YEARS, HIDE_EXPIRED, is_expired

__all__ = [
    "hide_expired",
    "is_expired",
    "SWITCH",
    "FIVE_YEARS",
    "HIDE_EXPIRED",
    "PreciseTtlReadError",
    "PlaceholderClashError",
    "AlreadyAttachedError",
]
__version__ = "0.1.0"
