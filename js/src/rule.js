// The one rule: an item is expired iff its TTL attribute is a Number with
// now − 5 years ≤ ttl ≤ now (epoch seconds, decimals allowed, 5 years = 5 × 365 days), the rule
// that native TTL and the precise-ttl sweeper delete by. Anything else (missing, a String or any
// other type, older than five years, in the future, milliseconds) is not expired.
"use strict";

const decimal = require("./decimal");

// Native TTL ignores values more than five years (of 365 days) old.
const FIVE_YEARS = decimal.parse("157680000");

// The clock when none is injected: epoch seconds with the milliseconds Date.now() has.
const systemClock = () => Date.now() / 1000;

// The window [oldest, now] of TTLs that are due at `now` (epoch seconds: a number, bigint or
// number text), as decimals.
function window(now) {
  const until = decimal.from(now);
  if (until === undefined) {
    throw new TypeError(`precise-ttl-read: now must be epoch seconds, got ${String(now)}`);
  }
  return { oldest: decimal.subtract(until, FIVE_YEARS), now: until };
}

// The TTL's value as a decimal when it is a DynamoDB Number, else undefined. Accepts the low-level
// client's typed values ({ N: "..." }) and the document client's plain ones (number, bigint, or a
// NumberValue from `wrapNumbers`, recognised by its toAttributeValue()).
function numberOf(value) {
  if (value === null || value === undefined) return undefined;
  if (typeof value === "number" || typeof value === "bigint") return decimal.from(value);
  if (typeof value !== "object") return undefined;
  if (typeof value.toAttributeValue === "function") return numberOf(value.toAttributeValue());
  // A typed AttributeValue has exactly one key; a document-client Map that happens to have an
  // `N` key among others is not a Number.
  const keys = Object.keys(value);
  if (keys.length === 1 && keys[0] === "N" && typeof value.N === "string") return decimal.parse(value.N);
  return undefined;
}

// Whether a TTL value is due inside `due` (from window()).
function isDue(value, due) {
  const ttl = numberOf(value);
  return ttl !== undefined && decimal.compare(due.oldest, ttl) <= 0 && decimal.compare(ttl, due.now) <= 0;
}

// Whether an item (typed or document-client) has expired at `now` (epoch seconds, default: the
// system clock).
function isExpired(item, { ttlAttribute = "ttl", now } = {}) {
  if (item === null || typeof item !== "object") return false;
  return isDue(item[ttlAttribute], window(now === undefined ? systemClock() : now));
}

module.exports = { FIVE_YEARS, systemClock, window, isDue, isExpired };
