"""The write condition pattern (documentation only in the package): a put that treats an expired
item as absent."""

import pytest
from boto3.dynamodb.conditions import Attr
from botocore.exceptions import ClientError
from conftest import item

from precise_ttl_read import FIVE_YEARS
from precise_ttl_read.rule import wall_clock

CONDITION = (
    "attribute_not_exists(pk) OR (attribute_type(#ttl, :N) AND #ttl BETWEEN :oldest AND :now)"
)


def put_if_absent_or_expired(client, table, typed_item):
    now = wall_clock()
    client.put_item(
        TableName=table,
        Item=typed_item,
        ConditionExpression=CONDITION,
        ExpressionAttributeNames={"#ttl": "ttl"},
        ExpressionAttributeValues={
            ":N": {"S": "N"},
            ":oldest": {"N": str(now - FIVE_YEARS)},
            ":now": {"N": str(now)},
        },
    )


def conditional_failure(error):
    return error.value.response["Error"]["Code"] == "ConditionalCheckFailedException"


def test_write_condition_with_the_client(new_client, write_table, fresh_pk):
    client = new_client()
    now = wall_clock()
    put_if_absent_or_expired(
        client, write_table, item("k", {"N": str(now - 1)}, "first", pk=fresh_pk)
    )
    # Expired: the put goes through, as if the item were absent.
    put_if_absent_or_expired(
        client, write_table, item("k", {"N": str(now + 600)}, "second", pk=fresh_pk)
    )
    # Live: refused.
    with pytest.raises(ClientError) as error:
        put_if_absent_or_expired(client, write_table, item("k", None, "third", pk=fresh_pk))
    assert conditional_failure(error)
    # No TTL, a String TTL, a TTL over five years old: all live, all refused.
    for sk, ttl in [
        ("none", None),
        ("string", {"S": str(now - 1)}),
        ("old", {"N": str(now - FIVE_YEARS - 10)}),
    ]:
        client.put_item(TableName=write_table, Item=item(sk, ttl, "x", pk=fresh_pk))
        with pytest.raises(ClientError) as error:
            put_if_absent_or_expired(client, write_table, item(sk, None, "y", pk=fresh_pk))
        assert conditional_failure(error)


def test_write_condition_with_the_table_api(new_resource, write_table, fresh_pk):
    table = new_resource().Table(write_table)
    now = wall_clock()
    ttl = Attr("ttl")
    expired_or_absent = Attr("pk").not_exists() | (
        ttl.attribute_type("N") & ttl.between(now - FIVE_YEARS, now)
    )
    table.put_item(Item={"pk": fresh_pk, "sk": "k", "ttl": now - 1})
    table.put_item(
        Item={"pk": fresh_pk, "sk": "k", "ttl": now + 600}, ConditionExpression=expired_or_absent
    )
    with pytest.raises(ClientError) as error:
        table.put_item(Item={"pk": fresh_pk, "sk": "k"}, ConditionExpression=expired_or_absent)
    assert conditional_failure(error)
