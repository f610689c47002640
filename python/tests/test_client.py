"""The low-level client: every read operation of the spec, against DynamoDB Local."""

import copy

import pytest
from botocore.exceptions import ClientError
from conftest import HIDDEN, PK, VISIBLE

from precise_ttl_read import hide_expired

KEY = {"KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": {"S": PK}}}


def sks(items):
    return sorted(i["sk"]["S"] for i in items)


def key(sk):
    return {"pk": {"S": PK}, "sk": {"S": sk}}


@pytest.fixture
def client(new_client):
    return hide_expired(new_client())


def test_query_hides_expired_and_counts_right(client, read_table):
    page = client.query(TableName=read_table, **KEY)
    assert sks(page["Items"]) == sorted(VISIBLE)
    assert page["Count"] == len(VISIBLE)
    assert page["ScannedCount"] == len(VISIBLE) + len(HIDDEN)


def test_select_count_is_right_server_side(client, read_table):
    assert client.query(TableName=read_table, Select="COUNT", **KEY)["Count"] == len(VISIBLE)
    assert client.scan(TableName=read_table, Select="COUNT")["Count"] == len(VISIBLE)


def test_scan_hides_expired(client, read_table):
    page = client.scan(TableName=read_table)
    assert sks(page["Items"]) == sorted(VISIBLE)
    assert page["Count"] == len(VISIBLE)


@pytest.mark.parametrize("operation", ["query", "scan"])
def test_pagination_by_hand_sees_every_visible_item_once(client, read_table, operation):
    params = {"TableName": read_table, "Limit": 2, **(KEY if operation == "query" else {})}
    seen, count, pages = [], 0, 0
    while True:
        page = getattr(client, operation)(**params)
        seen += [i["sk"]["S"] for i in page["Items"]]
        count += page["Count"]
        pages += 1
        if "LastEvaluatedKey" not in page:
            break
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    assert sorted(seen) == sorted(VISIBLE) and count == len(VISIBLE)
    # Limit counts the items the filter drops: more pages than the visible items alone need.
    assert pages >= (len(VISIBLE) + len(HIDDEN)) // 2


@pytest.mark.parametrize("operation", ["query", "scan"])
def test_paginators_keep_working(client, read_table, operation):
    extra = KEY if operation == "query" else {}
    pages = client.get_paginator(operation).paginate(
        TableName=read_table, PaginationConfig={"PageSize": 3}, **extra
    )
    seen = [i["sk"]["S"] for page in pages for i in page["Items"]]
    assert sorted(seen) == sorted(VISIBLE)


def test_the_caller_s_filter_and_placeholders_are_kept(client, read_table):
    params = {
        "TableName": read_table,
        "KeyConditionExpression": "pk = :pk",
        "FilterExpression": "#g = :g OR #d = :d",
        "ExpressionAttributeNames": {"#g": "grp", "#d": "data"},
        "ExpressionAttributeValues": {":pk": {"S": PK}, ":g": {"S": "a"}, ":d": {"S": "d-none"}},
    }
    before = copy.deepcopy(params)
    page = client.query(**params)
    items = client.query(HideExpired=False, **params)["Items"]
    theirs = [i["sk"]["S"] for i in items]
    assert sks(page["Items"]) == sorted(sk for sk in theirs if sk in VISIBLE)
    assert any(sk in HIDDEN for sk in theirs)  # the OR was kept inside its parentheses
    assert params == before  # the caller's dicts are not modified


def test_query_hides_expired_whatever_the_projection(client, read_table):
    page = client.query(TableName=read_table, ProjectionExpression="sk", **KEY)
    assert sks(page["Items"]) == sorted(VISIBLE)
    assert all(set(i) == {"sk"} for i in page["Items"])


def test_scan_hides_expired_whatever_the_projection(client, read_table):
    page = client.scan(TableName=read_table, ProjectionExpression="sk")
    assert sks(page["Items"]) == sorted(VISIBLE) and page["Count"] == len(VISIBLE)


def test_query_on_an_index(client, read_table):
    both = {"a": [], "b": []}
    for i, sk in enumerate([*HIDDEN, *VISIBLE]):
        both["a" if i % 2 == 0 else "b"].append(sk)
    for group, members in both.items():
        params = {
            "TableName": read_table,
            "KeyConditionExpression": "grp = :g",
            "ExpressionAttributeValues": {":g": {"S": group}},
        }
        page = client.query(IndexName="by-grp", **params)
        assert sks(page["Items"]) == sorted(sk for sk in members if sk in VISIBLE)
        # An index without the TTL cannot be filtered on it: DynamoDB (Local) refuses the Query,
        # and HideExpired=False is the way to read it (documented).
        with pytest.raises(ClientError, match="does not project one or more filter attributes"):
            client.query(IndexName="by-grp-keys", **params)
        page = client.query(IndexName="by-grp-keys", HideExpired=False, **params)
        assert sks(page["Items"]) == sorted(members)


def test_get_item(client, read_table):
    for sk in HIDDEN:
        assert "Item" not in client.get_item(TableName=read_table, Key=key(sk))
    for sk in VISIBLE:
        got = client.get_item(TableName=read_table, Key=key(sk))["Item"]
        assert got["sk"]["S"] == sk
        assert ("ttl" in got) == (VISIBLE[sk] is not None)


def test_get_item_projection_without_the_ttl(client, read_table):
    for sk in HIDDEN:
        got = client.get_item(
            TableName=read_table,
            Key=key(sk),
            ProjectionExpression="#d",
            ExpressionAttributeNames={"#d": "data"},
        )
        assert "Item" not in got
    for sk in VISIBLE:
        got = client.get_item(TableName=read_table, Key=key(sk), ProjectionExpression="sk, grp")
        assert got["Item"] == {"sk": {"S": sk}, "grp": got["Item"]["grp"]}
    # A projection that names the TTL keeps it.
    got = client.get_item(
        TableName=read_table,
        Key=key("future"),
        ProjectionExpression="sk, #t",
        ExpressionAttributeNames={"#t": "ttl"},
    )
    assert set(got["Item"]) == {"sk", "ttl"}


def test_get_item_legacy_attributes_to_get(client, read_table):
    assert "Item" not in client.get_item(
        TableName=read_table, Key=key("exp-1h"), AttributesToGet=["sk"]
    )
    got = client.get_item(TableName=read_table, Key=key("future"), AttributesToGet=["sk"])
    assert got["Item"] == {"sk": {"S": "future"}}


def test_batch_get_item(client, read_table):
    everything = [key(sk) for sk in [*HIDDEN, *VISIBLE]]
    got = client.batch_get_item(RequestItems={read_table: {"Keys": everything}})
    assert sks(got["Responses"][read_table]) == sorted(VISIBLE)
    assert not got["UnprocessedKeys"]
    projected = client.batch_get_item(
        RequestItems={read_table: {"Keys": everything, "ProjectionExpression": "sk"}}
    )["Responses"][read_table]
    assert sks(projected) == sorted(VISIBLE) and all(set(i) == {"sk"} for i in projected)
    legacy = client.batch_get_item(
        RequestItems={read_table: {"Keys": everything, "AttributesToGet": ["sk"]}}
    )["Responses"][read_table]
    assert sks(legacy) == sorted(VISIBLE) and all(set(i) == {"sk"} for i in legacy)


def test_transact_get_items_keeps_positions(client, read_table):
    order = [*HIDDEN, *VISIBLE]
    plain = client.transact_get_items(
        TransactItems=[{"Get": {"TableName": read_table, "Key": key(sk)}} for sk in order]
    )["Responses"]
    projected = client.transact_get_items(
        TransactItems=[
            {"Get": {"TableName": read_table, "Key": key(sk), "ProjectionExpression": "sk"}}
            for sk in order
        ]
    )["Responses"]
    for responses in (plain, projected):
        assert len(responses) == len(order)
        for sk, entry in zip(order, responses):
            assert ("Item" in entry) == (sk in VISIBLE)
            if sk in VISIBLE:
                assert entry["Item"]["sk"]["S"] == sk
    assert all(set(e["Item"]) == {"sk"} for e in projected if "Item" in e)


def test_legacy_key_conditions_get_the_client_side_check_only(client, read_table):
    page = client.query(
        TableName=read_table,
        KeyConditions={"pk": {"AttributeValueList": [{"S": PK}], "ComparisonOperator": "EQ"}},
    )
    assert sks(page["Items"]) == sorted(VISIBLE) and page["Count"] == len(VISIBLE)
    # Select=COUNT returns no items to check: with legacy parameters Count includes expired items.
    counted = client.query(
        TableName=read_table,
        Select="COUNT",
        KeyConditions={"pk": {"AttributeValueList": [{"S": PK}], "ComparisonOperator": "EQ"}},
    )
    assert counted["Count"] == len(VISIBLE) + len(HIDDEN)


def test_legacy_query_and_scan_are_checked_client_side(client, read_table):
    page = client.query(
        TableName=read_table,
        KeyConditions={"pk": {"AttributeValueList": [{"S": PK}], "ComparisonOperator": "EQ"}},
        QueryFilter={"grp": {"AttributeValueList": [{"S": "z"}], "ComparisonOperator": "NE"}},
    )
    assert sks(page["Items"]) == sorted(VISIBLE) and page["Count"] == len(VISIBLE)
    page = client.scan(
        TableName=read_table,
        ScanFilter={"grp": {"AttributeValueList": [{"S": "z"}], "ComparisonOperator": "NE"}},
    )
    assert sks(page["Items"]) == sorted(VISIBLE) and page["Count"] == len(VISIBLE)
    # Select=COUNT returns no items to check: with legacy filters Count includes expired items.
    counted = client.query(
        TableName=read_table,
        Select="COUNT",
        KeyConditions={"pk": {"AttributeValueList": [{"S": PK}], "ComparisonOperator": "EQ"}},
        QueryFilter={"grp": {"AttributeValueList": [{"S": "z"}], "ComparisonOperator": "NE"}},
    )
    assert counted["Count"] == len(VISIBLE) + len(HIDDEN)
    # Without the TTL in AttributesToGet there is nothing to judge: documented, items stay.
    page = client.scan(TableName=read_table, AttributesToGet=["sk"])
    assert len(page["Items"]) == len(VISIBLE) + len(HIDDEN)


def test_execute_statement(client, read_table):
    select = f'SELECT * FROM "{read_table}" WHERE pk = ?'
    items = client.execute_statement(Statement=select, Parameters=[{"S": PK}])["Items"]
    assert sks(items) == sorted(VISIBLE)
    # Leading comments and lower case are still a SELECT.
    items = client.execute_statement(
        Statement=f'/* mine */ select * from "{read_table}" where pk = ?', Parameters=[{"S": PK}]
    )["Items"]
    assert sks(items) == sorted(VISIBLE)
    # A projection without the TTL cannot be judged: documented, those items stay visible.
    items = client.execute_statement(
        Statement=f'SELECT sk FROM "{read_table}" WHERE pk = ?', Parameters=[{"S": PK}]
    )["Items"]
    assert len(items) == len(VISIBLE) + len(HIDDEN)


def test_execute_statement_pagination(client, read_table):
    seen, token = [], None
    while True:
        extra = {"NextToken": token} if token else {}
        page = client.execute_statement(
            Statement=f'SELECT * FROM "{read_table}" WHERE pk = ?',
            Parameters=[{"S": PK}],
            Limit=2,
            **extra,
        )
        seen += [i["sk"]["S"] for i in page["Items"]]
        token = page.get("NextToken")
        if not token:
            break
    assert sorted(seen) == sorted(VISIBLE)


def test_batch_execute_statement_and_execute_transaction_keep_entries(client, read_table):
    order = ["exp-1h", "future", "exp-dec", "none"]
    statement = f'SELECT * FROM "{read_table}" WHERE pk = ? AND sk = ?'
    batch = client.batch_execute_statement(
        Statements=[{"Statement": statement, "Parameters": [{"S": PK}, {"S": sk}]} for sk in order]
    )["Responses"]
    transaction = client.execute_transaction(
        TransactStatements=[
            {"Statement": statement, "Parameters": [{"S": PK}, {"S": sk}]} for sk in order
        ]
    )["Responses"]
    for responses in (batch, transaction):
        assert len(responses) == len(order)
        for sk, entry in zip(order, responses):
            assert ("Item" in entry) == (sk in VISIBLE), (sk, entry)
