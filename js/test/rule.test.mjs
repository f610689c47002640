// The rule itself, without DynamoDB: isExpired on typed and document-client values, at the
// edges of the window, and with more digits than a JS number holds.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { NumberValueImpl as NumberValue } from "@aws-sdk/util-dynamodb";
import { isExpired, HIDE_EXPIRED } from "../index.mjs";

const now = 1800000000;
const oldest = now - 157680000;
const typed = (N) => ({ ttl: { N } });

describe("isExpired", () => {
  it("hides a Number TTL inside [now − 5 years, now], edges included", () => {
    for (const n of [now, now - 1, now - 3600, oldest, `${now - 1}.5`]) assert.equal(isExpired(typed(String(n)), { now }), true, n);
  });

  it("keeps everything else visible", () => {
    for (const n of [now + 1, oldest - 1, now * 1000, `${now}.000001`, oldest - 0.001]) {
      assert.equal(isExpired(typed(String(n)), { now }), false, n);
    }
    assert.equal(isExpired({ ttl: { S: String(now - 1) } }, { now }), false);
    assert.equal(isExpired({ ttl: { NS: [String(now - 1)] } }, { now }), false);
    assert.equal(isExpired({}, { now }), false);
    assert.equal(isExpired(undefined, { now }), false);
    assert.equal(isExpired({ ttl: String(now - 1) }, { now }), false, "a document-client String");
    assert.equal(isExpired({ ttl: { N: String(now - 1), S: "x" } }, { now }), false, "a document-client Map");
  });

  it("compares exactly, beyond a JS number's precision", () => {
    assert.equal(isExpired(typed("1800000000.00000000000000000000000001"), { now }), false);
    assert.equal(isExpired(typed("1799999999.99999999999999999999999999"), { now }), true);
    assert.equal(isExpired(typed("1.8E9"), { now }), true);
    assert.equal(isExpired(typed("99999999999999999999999999999999999999"), { now }), false);
    assert.equal(isExpired(typed(`${oldest}.000000000000000000001`), { now }), true);
    assert.equal(isExpired(typed(`${oldest - 1}.999999999999999999999`), { now }), false);
    assert.equal(isExpired(typed("1800000000"), { now: "1800000000.5" }), true);
  });

  it("reads the document client's numbers: number, bigint, NumberValue", () => {
    assert.equal(isExpired({ ttl: now - 0.5 }, { now }), true);
    assert.equal(isExpired({ ttl: BigInt(now - 1) }, { now }), true);
    assert.equal(isExpired({ ttl: NumberValue.from(`${now - 1}.000000000000000000001`) }, { now }), true);
    assert.equal(isExpired({ ttl: now * 1000 }, { now }), false);
  });

  it("takes the attribute name and defaults to the system clock", () => {
    const second = Date.now() / 1000;
    assert.equal(isExpired({ expiresAt: { N: String(second - 10) } }, { ttlAttribute: "expiresAt" }), true);
    assert.equal(isExpired({ ttl: { N: String(second - 10) } }, { ttlAttribute: "expiresAt" }), false);
    assert.equal(isExpired({ ttl: second + 60 }), false);
  });

  it("refuses a clock that is not epoch seconds", () => {
    assert.throws(() => isExpired(typed("1"), { now: "soon" }), /epoch seconds/);
  });

  it("exports the filter expression every language uses", () => {
    assert.equal(
      HIDE_EXPIRED,
      "NOT (attribute_type(#precise_ttl_attr, :precise_ttl_number) AND #precise_ttl_attr BETWEEN :precise_ttl_oldest AND :precise_ttl_now)",
    );
  });
});
