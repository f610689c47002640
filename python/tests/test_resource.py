"""The resource layer: boto3's Python-value transformation on both sides of the hooks."""

from decimal import Decimal

import pytest
from boto3.dynamodb.conditions import Attr, Key
from conftest import HIDDEN, PK, VISIBLE

from precise_ttl_read import hide_expired


def sks(items):
    return sorted(i["sk"] for i in items)


@pytest.fixture
def resource(new_resource):
    return hide_expired(new_resource())


@pytest.fixture
def table(resource, read_table):
    return resource.Table(read_table)


def test_table_get_item(table):
    for sk in HIDDEN:
        assert "Item" not in table.get_item(Key={"pk": PK, "sk": sk})
    got = table.get_item(Key={"pk": PK, "sk": "future"})["Item"]
    assert isinstance(got["ttl"], Decimal) and got["sk"] == "future"
    got = table.get_item(Key={"pk": PK, "sk": "string"})["Item"]
    assert isinstance(got["ttl"], str)
    projected = table.get_item(Key={"pk": PK, "sk": "future"}, ProjectionExpression="sk")["Item"]
    assert projected == {"sk": "future"}
    assert "Item" not in table.get_item(Key={"pk": PK, "sk": "exp-dec"}, ProjectionExpression="sk")


def test_table_query_with_conditions(table):
    page = table.query(KeyConditionExpression=Key("pk").eq(PK))
    assert sks(page["Items"]) == sorted(VISIBLE) and page["Count"] == len(VISIBLE)
    # The caller's condition object is turned into #n0/:v0 placeholders first, then ANDed with ours.
    page = table.query(
        KeyConditionExpression=Key("pk").eq(PK), FilterExpression=Attr("grp").eq("b")
    )
    everything = table.query(
        KeyConditionExpression=Key("pk").eq(PK),
        FilterExpression=Attr("grp").eq("b"),
        HideExpired=False,
    )["Items"]
    assert sks(page["Items"]) == sorted(i["sk"] for i in everything if i["sk"] in VISIBLE)
    assert table.query(KeyConditionExpression=Key("pk").eq(PK), Select="COUNT")["Count"] == len(
        VISIBLE
    )


def test_table_query_with_string_expressions_and_python_values(table):
    page = table.query(
        KeyConditionExpression="pk = :pk",
        FilterExpression="#d <> :d",
        ExpressionAttributeNames={"#d": "data"},
        ExpressionAttributeValues={":pk": PK, ":d": "d-future"},
        ProjectionExpression="sk",
    )
    assert sks(page["Items"]) == sorted(set(VISIBLE) - {"future"})


def test_table_scan_and_pagination(table):
    assert sks(table.scan()["Items"]) == sorted(VISIBLE)
    seen, params = [], {"Limit": 2, "FilterExpression": Attr("sk").exists()}
    while True:
        page = table.scan(**params)
        seen += [i["sk"] for i in page["Items"]]
        if "LastEvaluatedKey" not in page:
            break
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    assert sorted(seen) == sorted(VISIBLE)


def test_resource_batch_get_item(resource, read_table):
    keys = [{"pk": PK, "sk": sk} for sk in [*HIDDEN, *VISIBLE]]
    got = resource.batch_get_item(RequestItems={read_table: {"Keys": keys}})
    assert sks(got["Responses"][read_table]) == sorted(VISIBLE)
    projected = resource.batch_get_item(
        RequestItems={read_table: {"Keys": keys, "ProjectionExpression": "sk, grp"}}
    )["Responses"][read_table]
    assert sks(projected) == sorted(VISIBLE) and all(set(i) == {"sk", "grp"} for i in projected)


def test_resource_client_transact_get_items(resource, read_table):
    order = ["exp-4y", "old", "exp-1s", "millis"]
    responses = resource.meta.client.transact_get_items(
        TransactItems=[
            {
                "Get": {
                    "TableName": read_table,
                    "Key": {"pk": PK, "sk": sk},
                    "ProjectionExpression": "sk",
                }
            }
            for sk in order
        ]
    )["Responses"]
    assert [e.get("Item") for e in responses] == [None, {"sk": "old"}, None, {"sk": "millis"}]


def test_resource_and_its_tables_share_one_attachment(new_resource, read_table):
    resource = new_resource()
    table = resource.Table(read_table)
    hide_expired(table)
    hide_expired(resource)  # the same client: nothing new registered, no error
    assert sks(resource.Table(read_table).scan()["Items"]) == sorted(VISIBLE)
