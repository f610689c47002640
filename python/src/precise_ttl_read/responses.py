"""Response filtering: expired items removed from what DynamoDB returned, typed values only.

These run before boto3's resource layer turns typed values into Python values, so they only ever
see the low-level shapes (``{"N": "..."}``). ``now`` is the clock when the response arrived: an
item that expired while the request was in flight is hidden too.
"""

from .rule import Window


def _strip(item, ttl_attribute):
    item.pop(ttl_attribute, None)
    return item


def filter_items(items, ttl_attribute, now, strip=False):
    """Expired items removed from a list (in place); returns how many were removed."""
    window = Window(now)
    kept = [i for i in items if not window.expired(i, ttl_attribute)]
    removed = len(items) - len(kept)
    if strip:
        for item in kept:
            _strip(item, ttl_attribute)
    items[:] = kept
    return removed


def query_or_scan(parsed, ttl_attribute, now):
    """The second guard after the server-side filter; ``Count`` follows, ``ScannedCount``,
    ``LastEvaluatedKey`` (and so pagination) stay as DynamoDB sent them."""
    items = parsed.get("Items")
    if not items:
        return
    removed = filter_items(items, ttl_attribute, now)
    if removed and isinstance(parsed.get("Count"), int):
        parsed["Count"] -= removed


def get_item(parsed, ttl_attribute, now, strip):
    """An expired item is reported as absent: the response has no ``Item``."""
    item = parsed.get("Item")
    if item is None:
        return
    if Window(now).expired(item, ttl_attribute):
        del parsed["Item"]
    elif strip:
        _strip(item, ttl_attribute)


def batch_get_item(parsed, ttl_attribute, now, strip_by_table):
    """Expired items removed from ``Responses[table]``; ``UnprocessedKeys`` untouched."""
    for table, items in (parsed.get("Responses") or {}).items():
        filter_items(items, ttl_attribute, now, strip=strip_by_table.get(table, False))


def positional(parsed, ttl_attribute, now, strip_by_position=()):
    """``Responses`` aligned with the request (transactions, batched statements): an expired
    item's entry stays, without its ``Item``."""
    window = Window(now)
    for position, entry in enumerate(parsed.get("Responses") or []):
        item = entry.get("Item") if isinstance(entry, dict) else None
        if item is None:
            continue
        if window.expired(item, ttl_attribute):
            del entry["Item"]
        elif position < len(strip_by_position) and strip_by_position[position]:
            _strip(item, ttl_attribute)
