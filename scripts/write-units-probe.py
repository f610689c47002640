"""Write units DynamoDB Local reports for one item's life in each layout (issue 29): run as
   ~/.cache/precise-ttl/venv/bin/python scripts/write-units-probe.py $(scripts/dynamodb-local start)
against a fresh DynamoDB Local; it prints markdown table rows."""
import sys, boto3, time
ep = sys.argv[1]
c = boto3.client("dynamodb", endpoint_url=ep, region_name="us-east-1",
                 aws_access_key_id="x", aws_secret_access_key="x")
c.create_table(TableName="app", BillingMode="PAY_PER_REQUEST",
    AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                          {"AttributeName": "ttl_shard", "AttributeType": "N"},
                          {"AttributeName": "ttl", "AttributeType": "N"}],
    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    GlobalSecondaryIndexes=[{"IndexName": "precise-ttl",
        "KeySchema": [{"AttributeName": "ttl_shard", "KeyType": "HASH"}, {"AttributeName": "ttl", "KeyType": "RANGE"}],
        "Projection": {"ProjectionType": "KEYS_ONLY"}}])
c.create_table(TableName="plain", BillingMode="PAY_PER_REQUEST",
    AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
def wu(r):
    return r["ConsumedCapacity"]["CapacityUnits"]
t = int(time.time()) + 3600
rows = []
rows.append(("sharded: put an item with ttl + ttl_shard (table + index)", wu(c.put_item(TableName="app", Item={"pk": {"S": "a"}, "ttl": {"N": str(t)}, "ttl_shard": {"N": "3"}}, ReturnConsumedCapacity="TOTAL"))))
rows.append(("sharded: change its TTL (table + index delete + index put)", wu(c.update_item(TableName="app", Key={"pk": {"S": "a"}}, UpdateExpression="SET #t = :t", ExpressionAttributeNames={"#t": "ttl"}, ExpressionAttributeValues={":t": {"N": str(t + 60)}}, ReturnConsumedCapacity="TOTAL"))))
rows.append(("sharded: touch another attribute (table only)", wu(c.update_item(TableName="app", Key={"pk": {"S": "a"}}, UpdateExpression="SET #x = :x", ExpressionAttributeNames={"#x": "seen"}, ExpressionAttributeValues={":x": {"N": "1"}}, ReturnConsumedCapacity="TOTAL"))))
rows.append(("sharded: delete it (table + index)", wu(c.delete_item(TableName="app", Key={"pk": {"S": "a"}}, ReturnConsumedCapacity="TOTAL"))))
rows.append(("stream-queue: put an item with ttl only (table)", wu(c.put_item(TableName="plain", Item={"pk": {"S": "a"}, "ttl": {"N": str(t)}}, ReturnConsumedCapacity="TOTAL"))))
rows.append(("stream-queue: delete it (table)", wu(c.delete_item(TableName="plain", Key={"pk": {"S": "a"}}, ReturnConsumedCapacity="TOTAL"))))
for what, units in rows:
    print(f"| {what} | {units} |")
