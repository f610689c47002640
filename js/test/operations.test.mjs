// Request and response rewriting on shapes DynamoDB Local does not produce on demand (a
// BatchGetItem with UnprocessedKeys), run through the same functions the middleware uses.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { OPERATIONS } = require("../src/operations.js");
const { window } = require("../src/rule.js");

const due = window(1800000000);

describe("BatchGetItem", () => {
  const batch = OPERATIONS.BatchGetItemCommand;

  it("gives UnprocessedKeys back with the caller's projection, so a retry does not clash", () => {
    const caller = {
      RequestItems: {
        projected: { Keys: [{ pk: { S: "a" } }], ProjectionExpression: "#d", ExpressionAttributeNames: { "#d": "data" } },
        legacy: { Keys: [{ pk: { S: "b" } }], AttributesToGet: ["data"] },
        whole: { Keys: [{ pk: { S: "c" } }] },
      },
    };
    const { input, plan } = batch.request(caller, "ttl", due);
    assert.equal(input.RequestItems.projected.ProjectionExpression, "#d, #precise_ttl_attr");
    assert.deepEqual(input.RequestItems.legacy.AttributesToGet, ["data", "ttl"]);
    // DynamoDB echoes each table's request as sent.
    const output = batch.response(
      {
        Responses: {
          projected: [{ data: { S: "x" }, ttl: { N: "1799999999" } }, { data: { S: "y" }, ttl: { N: "1800000001" } }],
          legacy: [{ data: { S: "z" }, ttl: { N: "1" } }],
        },
        UnprocessedKeys: structuredClone(input.RequestItems),
      },
      plan,
      due,
    );
    assert.deepEqual(output.Responses.projected, [{ data: { S: "y" } }]);
    assert.deepEqual(output.Responses.legacy, [{ data: { S: "z" } }]);
    assert.deepEqual(output.UnprocessedKeys, caller.RequestItems);
    // The retry is accepted.
    assert.doesNotThrow(() => batch.request({ RequestItems: output.UnprocessedKeys }, "ttl", due));
  });
});

describe("GetItem projections", () => {
  const get = OPERATIONS.GetItemCommand;

  it("adds the TTL only where the projection does not read it whole", () => {
    const projection = (ProjectionExpression, ExpressionAttributeNames) =>
      get.request({ TableName: "t", Key: {}, ProjectionExpression, ExpressionAttributeNames }, "expiresAt", due).input
        .ProjectionExpression;
    assert.equal(projection("a, b.c"), "a, b.c, #precise_ttl_attr");
    assert.equal(projection("a, expiresAt"), "a, expiresAt");
    assert.equal(projection("a, #e", { "#e": "expiresAt" }), "a, #e");
    assert.equal(projection("a, expiresAt.x"), "a, expiresAt.x");
    assert.equal(projection("expiresAtOther"), "expiresAtOther, #precise_ttl_attr");
    assert.equal(projection(undefined), undefined);
  });

  it("refuses a projection already using our placeholder", () => {
    assert.throws(
      () => get.request({ ProjectionExpression: "#precise_ttl_attr", ExpressionAttributeNames: { "#precise_ttl_attr": "x" } }, "ttl", due),
      /#precise_ttl_attr/,
    );
  });
});
