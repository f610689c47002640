"""Request rewriting: the filter injected into Query and Scan, the TTL added to projections.

Every function here works on the low-level, typed request (after boto3's resource layer has
turned conditions and Python values into expressions and typed values), copies what it changes
and never mutates the caller's own dicts. Each returns what the response side needs to know.
"""

import re

from . import rule
from .errors import PlaceholderClashError

# Legacy (non-expression) parameters: "DynamoDB does not allow mixing legacy conditional
# parameters and expression parameters in a single call" (Developer Guide, Legacy conditional
# parameters), so requests that use any of them get the client-side check only. KeyConditions is
# one of them: DynamoDB Local accepts it with a FilterExpression, but the documentation does not
# promise it, and a filter DynamoDB refused would break a query that worked without the hooks.
# The Rust and JavaScript interceptors decide the same.
LEGACY = ("KeyConditions", "QueryFilter", "ScanFilter", "ConditionalOperator", "AttributesToGet")

EXPRESSIONS = ("FilterExpression", "KeyConditionExpression", "ProjectionExpression")


def _placeholder_used(expression, placeholder):
    return re.search(re.escape(placeholder) + r"(?![A-Za-z0-9_])", expression) is not None


def _check_clash(params, names, values):
    """Fails if the request already uses one of our placeholders, in its maps or expressions."""
    used = [n for n in names if n in (params.get("ExpressionAttributeNames") or {})]
    used += [v for v in values if v in (params.get("ExpressionAttributeValues") or {})]
    for key in EXPRESSIONS:
        expression = params.get(key)
        if isinstance(expression, str):
            used += [p for p in names + values if _placeholder_used(expression, p)]
    if used:
        raise PlaceholderClashError(
            f"precise_ttl_read: the request already uses the placeholder(s) "
            f"{', '.join(sorted(set(used)))}, which hide_expired adds itself; rename yours "
            f"(or pass HideExpired=False to leave this request alone)"
        )


def inject_filter(params, ttl_attribute, now):
    """Adds the hide-expired filter to Query or Scan ``params`` in place, ANDed with theirs.

    Returns False (and changes nothing) for requests with legacy parameters.
    """
    if any(params.get(key) is not None for key in LEGACY):
        return False
    theirs = params.get("FilterExpression")
    if theirs is not None and not isinstance(theirs, str):
        # Not an expression botocore can send (a condition object on a low-level client): leave
        # it for botocore to refuse rather than replace it.
        return False
    _check_clash(params, rule.NAMES, rule.VALUES)
    # Both sides are parenthesised: the caller's filter may contain OR, which binds looser than AND.
    params["FilterExpression"] = (
        f"({theirs}) AND ({rule.HIDE_EXPIRED})"
        if isinstance(theirs, str) and theirs.strip()
        else rule.HIDE_EXPIRED
    )
    params["ExpressionAttributeNames"] = {
        **(params.get("ExpressionAttributeNames") or {}),
        rule.ATTRIBUTE: ttl_attribute,
    }
    params["ExpressionAttributeValues"] = {
        **(params.get("ExpressionAttributeValues") or {}),
        **rule.filter_values(now),
    }
    return True


def _top_level_names(projection, names):
    """The top-level attribute names a ProjectionExpression reads (``a.b[0]`` reads ``a``)."""
    found = set()
    for path in projection.split(","):
        match = re.match(r"\s*([^.\[\s]+)", path)
        if match:
            token = match.group(1)
            found.add(names.get(token, token) if token.startswith("#") else token)
    return found


def add_ttl_to_projection(params, ttl_attribute):
    """Makes sure a read by key returns the TTL attribute; changes ``params`` (one Get) in place.

    Returns True when the TTL was added, so the response side strips it again and the caller
    gets only what it asked for. Without a projection the whole item comes back: nothing to do.
    """
    attributes = params.get("AttributesToGet")
    if attributes is not None:
        if ttl_attribute in attributes:
            return False
        params["AttributesToGet"] = [*attributes, ttl_attribute]
        return True
    projection = params.get("ProjectionExpression")
    if not isinstance(projection, str) or not projection.strip():
        return False
    names = params.get("ExpressionAttributeNames") or {}
    if ttl_attribute in _top_level_names(projection, names):
        return False
    _check_clash(params, rule.NAMES, ())
    params["ProjectionExpression"] = f"{projection}, {rule.ATTRIBUTE}"
    params["ExpressionAttributeNames"] = {**names, rule.ATTRIBUTE: ttl_attribute}
    return True


_SELECT = re.compile(
    r"\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*select\b", re.IGNORECASE | re.DOTALL
)


def is_select(statement):
    """Whether a PartiQL statement is a SELECT (leading whitespace and comments skipped)."""
    return isinstance(statement, str) and _SELECT.match(statement) is not None
