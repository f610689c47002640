"""Switching off per call, attaching twice, placeholder clashes, the response-time clock and the
TTL attribute's name."""

import json

import pytest
from conftest import HIDDEN, PK, VISIBLE, item

from precise_ttl_read import AlreadyAttachedError, PlaceholderClashError, hide_expired
from precise_ttl_read.rule import HIDE_EXPIRED, wall_clock

KEY = {"KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": {"S": PK}}}
EVERYTHING = len(HIDDEN) + len(VISIBLE)


def sent_bodies(client):
    """Records the JSON bodies the client sends, to see what the hooks made of a request."""
    bodies = []
    client.meta.events.register(
        "before-send.dynamodb", lambda request, **_: bodies.append(json.loads(request.body))
    )
    return bodies


def test_switch_off_per_call(new_client, new_resource, read_table):
    client = hide_expired(new_client())
    assert client.query(TableName=read_table, HideExpired=False, **KEY)["Count"] == EVERYTHING
    assert client.query(TableName=read_table, HideExpired=True, **KEY)["Count"] == len(VISIBLE)
    key = {"pk": {"S": PK}, "sk": {"S": "exp-1h"}}
    assert "Item" in client.get_item(TableName=read_table, Key=key, HideExpired=False)
    assert "Item" not in client.get_item(TableName=read_table, Key=key)
    pages = client.get_paginator("scan").paginate(TableName=read_table, HideExpired=False, Limit=4)
    assert sum(len(p["Items"]) for p in pages) == EVERYTHING
    table = hide_expired(new_resource()).Table(read_table)
    assert len(table.scan(HideExpired=False)["Items"]) == EVERYTHING
    with pytest.raises(TypeError, match="HideExpired must be True or False"):
        client.scan(TableName=read_table, HideExpired="no")


def test_the_switch_is_unknown_without_the_hooks(new_client, read_table):
    from botocore.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError):
        new_client().scan(TableName=read_table, HideExpired=False)


def test_attaching_twice_registers_once(new_client, read_table):
    client = new_client()
    assert hide_expired(hide_expired(client)) is client
    bodies = sent_bodies(client)
    client.query(
        TableName=read_table,
        FilterExpression="grp = :g",
        **{**KEY, "ExpressionAttributeValues": {":pk": {"S": PK}, ":g": {"S": "a"}}},
    )
    assert bodies[-1]["FilterExpression"] == f"(grp = :g) AND ({HIDE_EXPIRED})"
    with pytest.raises(AlreadyAttachedError, match="ttl_attribute='ttl'"):
        hide_expired(client, "expires_at")


def test_not_a_dynamodb_client(session_factory):
    with pytest.raises(TypeError, match="boto3 DynamoDB client"):
        hide_expired(session_factory().client("s3", region_name="us-east-1"))
    with pytest.raises(TypeError):
        hide_expired(object())


@pytest.mark.parametrize(
    "names, values, expression",
    [
        ({"#precise_ttl_attr": "ttl"}, {}, "#precise_ttl_attr > :pk"),
        ({}, {":precise_ttl_now": {"N": "1"}}, "grp <> :precise_ttl_now"),
        ({}, {}, "grp <> :precise_ttl_oldest"),
    ],
)
def test_placeholder_clash_fails_clearly(new_client, read_table, names, values, expression):
    client = hide_expired(new_client())
    params = {
        "TableName": read_table,
        "KeyConditionExpression": "pk = :pk",
        "FilterExpression": expression,
        "ExpressionAttributeValues": {":pk": {"S": PK}, **values},
    }
    if names:
        params["ExpressionAttributeNames"] = names
    with pytest.raises(PlaceholderClashError, match="already uses the placeholder"):
        client.query(**params)
    # The same request with the hooks switched off reaches DynamoDB as written.
    if names or values:
        client.query(HideExpired=False, **params)


def test_get_item_projection_clash(new_client, read_table):
    client = hide_expired(new_client())
    with pytest.raises(PlaceholderClashError):
        client.get_item(
            TableName=read_table,
            Key={"pk": {"S": PK}, "sk": {"S": "future"}},
            ProjectionExpression="#precise_ttl_attr",
            ExpressionAttributeNames={"#precise_ttl_attr": "data"},
        )


def test_items_that_expire_in_flight_are_hidden(new_client, write_table, fresh_pk):
    """The filter uses the clock at the call, the check the clock when the response arrives."""
    plain = new_client()
    now = wall_clock()
    plain.put_item(
        TableName=write_table, Item=item("soon", {"N": str(now + 100)}, "a", pk=fresh_pk)
    )
    plain.put_item(
        TableName=write_table, Item=item("later", {"N": str(now + 300)}, "a", pk=fresh_pk)
    )
    readings = []

    def clock():
        # First reading (the request): now; every later one (the response): 200 s on.
        readings.append(None)
        return now if len(readings) == 1 else now + 200

    client = hide_expired(new_client(), clock=clock)
    bodies = sent_bodies(client)
    page = client.query(
        TableName=write_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": fresh_pk}},
    )
    assert bodies[-1]["ExpressionAttributeValues"][":precise_ttl_now"] == {"N": str(now)}
    assert [i["sk"]["S"] for i in page["Items"]] == ["later"]
    assert page["Count"] == 1 and page["ScannedCount"] == 2


def test_another_ttl_attribute(new_client, write_table, fresh_pk):
    plain = new_client()
    now = wall_clock()
    for sk, ttl in [("gone", now - 5), ("kept", now + 500)]:
        plain.put_item(
            TableName=write_table,
            Item=item(sk, {"N": str(ttl)}, "a", ttl_attribute="expires_at", pk=fresh_pk),
        )
    # An expired value under the default name is ignored: only expires_at counts.
    plain.put_item(
        TableName=write_table, Item=item("ttl-only", {"N": str(now - 5)}, "a", pk=fresh_pk)
    )
    client = hide_expired(new_client(), ttl_attribute="expires_at")
    page = client.query(
        TableName=write_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": fresh_pk}},
    )
    assert sorted(i["sk"]["S"] for i in page["Items"]) == ["kept", "ttl-only"]
    key = {"pk": {"S": fresh_pk}, "sk": {"S": "gone"}}
    assert "Item" not in client.get_item(TableName=write_table, Key=key, ProjectionExpression="sk")


def test_writes_are_untouched(new_client, write_table, fresh_pk):
    client = hide_expired(new_client())
    expired = item("x", {"N": str(wall_clock() - 60)}, "a", pk=fresh_pk)
    client.put_item(TableName=write_table, Item=expired)
    old = client.put_item(TableName=write_table, Item=expired, ReturnValues="ALL_OLD")
    assert old["Attributes"] == expired
    updated = client.update_item(
        TableName=write_table,
        Key={"pk": expired["pk"], "sk": expired["sk"]},
        UpdateExpression="SET grp = :g",
        ExpressionAttributeValues={":g": {"S": "b"}},
        ReturnValues="ALL_NEW",
    )
    assert updated["Attributes"]["grp"] == {"S": "b"}
    # A PartiQL UPDATE ... RETURNING is not a SELECT: its item comes back as it is.
    returned = client.execute_statement(
        Statement=f"UPDATE \"{write_table}\" SET grp = 'c' WHERE pk = ? AND sk = 'x'"
        " RETURNING ALL NEW *",
        Parameters=[{"S": fresh_pk}],
    )
    assert [i["grp"] for i in returned["Items"]] == [{"S": "c"}]
