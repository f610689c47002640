"""The tables the tests and ``bench.py`` read, created alike (no pytest here, so the benchmark
can use it without it)."""


def create_table(client, name, indexes=()):
    """A pk (S) + sk (S) table; ``indexes``: (name, projection type) of GSIs keyed grp + sk."""
    extra = {}
    if indexes:
        extra["GlobalSecondaryIndexes"] = [
            {
                "IndexName": index,
                "KeySchema": [
                    {"AttributeName": "grp", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": projection},
            }
            for index, projection in indexes
        ]
    client.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            *([{"AttributeName": "grp", "AttributeType": "S"}] if indexes else []),
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )
    client.get_waiter("table_exists").wait(TableName=name)
