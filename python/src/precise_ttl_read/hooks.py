"""Attaching to a boto3 DynamoDB client through botocore's event hooks.

Three handlers per client, registered with fixed unique ids so that attaching twice registers
nothing new:

- ``provide-client-params.dynamodb`` (first): takes the per-call switch ``HideExpired`` out of the
  parameters before botocore validates them, and before the resource layer copies them.
- ``before-parameter-build.dynamodb`` (last): rewrites the request. Running last means the
  resource layer has already turned ``boto3.dynamodb.conditions`` and Python values into
  expressions and typed values, so one code path serves the client and the resource APIs.
- ``after-call.dynamodb`` (first): filters the response while it is still typed, before the
  resource layer turns it into Python values.

The handlers pass what they decided from one to the next in botocore's per-call ``context``.
"""

import weakref

from . import requests, responses, rule
from .errors import AlreadyAttachedError

SWITCH = "HideExpired"
_STATE = "precise_ttl_read"
_UNIQUE = "precise-ttl-read-"

# Client -> settings, to tell an idempotent second call from a conflicting one.
_attached = weakref.WeakKeyDictionary()


def _client_of(target):
    """The low-level client behind a client, a service resource or a Table."""
    meta = getattr(target, "meta", None)
    client = getattr(meta, "client", None) or target
    client_meta = getattr(client, "meta", None)
    service = getattr(getattr(client_meta, "service_model", None), "service_name", None)
    if getattr(client_meta, "events", None) is None or service != "dynamodb":
        raise TypeError(
            "hide_expired expects a boto3 DynamoDB client, boto3.resource('dynamodb') or one of "
            f"its Tables, not {type(target).__name__}"
        )
    return client


class _Interceptor:
    def __init__(self, ttl_attribute, clock):
        self.ttl_attribute = ttl_attribute
        self.clock = clock or rule.wall_clock

    def now(self):
        return rule.as_decimal(self.clock())

    def take_switch(self, params, context, **_):
        """Removes ``HideExpired`` before validation; ``HideExpired=False`` turns this call off."""
        state = {"off": False}
        if context is not None:
            context[_STATE] = state
        if SWITCH in params:
            value = params.pop(SWITCH)
            if not isinstance(value, bool):
                raise TypeError(f"{SWITCH} must be True or False, not {value!r}")
            state["off"] = not value
        # Returning None keeps the (same, now switch-free) params for the next handlers.

    def rewrite_request(self, params, model, context, **_):
        state = (context or {}).get(_STATE)
        if state is None or state["off"]:
            return
        ttl = self.ttl_attribute
        operation = model.name
        if operation in ("Query", "Scan"):
            requests.inject_filter(params, ttl, self.now())
        elif operation == "GetItem":
            state["strip"] = requests.add_ttl_to_projection(params, ttl)
        elif operation == "BatchGetItem":
            request_items = dict(params.get("RequestItems") or {})
            strip = {}
            for table, keys_and_attributes in request_items.items():
                if not isinstance(keys_and_attributes, dict):
                    continue  # malformed: botocore's validation reports it
                copied = dict(keys_and_attributes)
                strip[table] = requests.add_ttl_to_projection(copied, ttl)
                request_items[table] = copied
            params["RequestItems"] = request_items
            state["strip"] = strip
        elif operation == "TransactGetItems":
            transact_items = []
            strip = []
            for entry in params.get("TransactItems") or []:
                entry = dict(entry) if isinstance(entry, dict) else entry
                if isinstance(entry, dict) and isinstance(entry.get("Get"), dict):
                    entry["Get"] = dict(entry["Get"])
                    strip.append(requests.add_ttl_to_projection(entry["Get"], ttl))
                else:
                    strip.append(False)
                transact_items.append(entry)
            params["TransactItems"] = transact_items
            state["strip"] = strip
        elif operation == "ExecuteStatement":
            state["select"] = requests.is_select(params.get("Statement"))
        # Everything else (writes, DescribeTable, ...) goes through untouched.

    def filter_response(self, http_response, parsed, model, context, **_):
        state = (context or {}).get(_STATE)
        if state is None or state["off"] or parsed is None:
            return
        if getattr(http_response, "status_code", 200) >= 300:
            return
        ttl = self.ttl_attribute
        operation = model.name
        if operation in ("Query", "Scan"):
            responses.query_or_scan(parsed, ttl, self.now())
        elif operation == "GetItem":
            responses.get_item(parsed, ttl, self.now(), state.get("strip", False))
        elif operation == "BatchGetItem":
            responses.batch_get_item(parsed, ttl, self.now(), state.get("strip", {}))
        elif operation == "TransactGetItems":
            responses.positional(parsed, ttl, self.now(), state.get("strip", []))
        elif operation == "ExecuteStatement":
            # A SELECT whose projection leaves out the TTL cannot be judged: those items stay.
            if state.get("select") and parsed.get("Items"):
                responses.filter_items(parsed["Items"], ttl, self.now())
        elif operation in ("BatchExecuteStatement", "ExecuteTransaction"):
            responses.positional(parsed, ttl, self.now())


def hide_expired(client_or_resource, ttl_attribute="ttl", *, clock=None):
    """Hides expired items from every read made through ``client_or_resource``.

    Accepts a low-level client (``boto3.client("dynamodb")``), a service resource
    (``boto3.resource("dynamodb")``) or a ``Table``; for the resource APIs it attaches to
    ``.meta.client``, which the service resource and its Tables share. Returns its argument.

    ``ttl_attribute`` is the TTL attribute's name. ``clock`` (for tests) returns now in epoch
    seconds; the default is the wall clock. Pass ``HideExpired=False`` to any call to leave that
    one call alone. Calling this again with the same settings does nothing; with different
    settings it raises AlreadyAttachedError (one TTL attribute per client).
    """
    if not isinstance(ttl_attribute, str) or not ttl_attribute:
        raise ValueError(f"ttl_attribute must be a non-empty attribute name, not {ttl_attribute!r}")
    client = _client_of(client_or_resource)
    settings = (ttl_attribute, clock)
    previous = _attached.get(client)
    if previous is not None:
        if previous != settings:
            raise AlreadyAttachedError(
                f"hide_expired is already attached to this client with "
                f"ttl_attribute={previous[0]!r} and its own clock; one client hides by one "
                f"TTL attribute: use a separate client for ttl_attribute={ttl_attribute!r}"
            )
        return client_or_resource
    interceptor = _Interceptor(ttl_attribute, clock)
    events = client.meta.events
    events.register_first(
        "provide-client-params.dynamodb", interceptor.take_switch, unique_id=_UNIQUE + "switch"
    )
    events.register_last(
        "before-parameter-build.dynamodb",
        interceptor.rewrite_request,
        unique_id=_UNIQUE + "request",
    )
    events.register_first(
        "after-call.dynamodb", interceptor.filter_response, unique_id=_UNIQUE + "response"
    )
    _attached[client] = settings
    return client_or_resource
