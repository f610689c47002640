// hideExpired on clients: idempotence, a conflicting second call, the document client sharing
// the wrapped client's middleware stack, and a TTL attribute with another name.
import { describe, it, before } from "node:test";
import assert from "node:assert/strict";
import { DynamoDBClient, GetItemCommand } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, GetCommand, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { hideExpired } from "../index.mjs";
import { plainClient, createTable, fixture, put, sks } from "./support.mjs";

const ours = (client) => client.middlewareStack.identify().filter((m) => m.startsWith("preciseTtl"));

describe("hideExpired", () => {
  it("is idempotent", () => {
    const client = new DynamoDBClient({ region: "us-east-1" });
    hideExpired(client);
    const once = ours(client);
    assert.equal(hideExpired(client), client);
    assert.deepEqual(ours(client), once);
  });

  it("refuses a second TTL attribute on the same client", () => {
    const client = hideExpired(new DynamoDBClient({ region: "us-east-1" }));
    assert.throws(() => hideExpired(client, { ttlAttribute: "expiresAt" }), /already hides items expired by "ttl"/);
  });

  it("refuses what is not a client", () => {
    assert.throws(() => hideExpired({}), /DynamoDBClient or a DynamoDBDocumentClient/);
  });

  describe("against DynamoDB Local", () => {
    const table = "client-tests";
    let fx;
    before(async () => {
      const base = plainClient();
      await createTable(base, table);
      fx = fixture(Date.now() / 1000, "p", "expiresAt");
      await put(base, table, fx.items);
    });

    it("hiding on the wrapped client also hides on a document client sharing its stack, and back", async () => {
      const base = hideExpired(plainClient(), { ttlAttribute: "expiresAt" });
      const document = DynamoDBDocumentClient.from(base);
      assert.equal(hideExpired(document, { ttlAttribute: "expiresAt" }), document);
      assert.equal(ours(document).length, ours(base).length);
      const out = await document.send(new QueryCommand({ TableName: table, KeyConditionExpression: "pk = :p", ExpressionAttributeValues: { ":p": "p" } }));
      assert.deepEqual(sks(out.Items), fx.visible);
      const expired = await base.send(new GetItemCommand({ TableName: table, Key: { pk: { S: "p" }, sk: { S: "exp-1h" } } }));
      assert.equal(expired.Item, undefined);
      const docExpired = await document.send(new GetCommand({ TableName: table, Key: { pk: "p", sk: "exp-1h" } }));
      assert.equal(docExpired.Item, undefined);
      const live = await document.send(new GetCommand({ TableName: table, Key: { pk: "p", sk: "future" } }));
      assert.equal(typeof live.Item.expiresAt, "number");
    });

    it("a document client with wrapNumbers judges the same", async () => {
      const document = hideExpired(
        DynamoDBDocumentClient.from(plainClient(), { unmarshallOptions: { wrapNumbers: true } }),
        { ttlAttribute: "expiresAt" },
      );
      const out = await document.send(new QueryCommand({ TableName: table, KeyConditionExpression: "pk = :p", ExpressionAttributeValues: { ":p": "p" } }));
      assert.deepEqual(sks(out.Items), fx.visible);
    });
  });
});
