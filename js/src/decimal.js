// Exact decimal arithmetic for DynamoDB Numbers.
//
// DynamoDB Numbers carry up to 38 significant digits, more than a JS number holds, so TTL values
// are compared as decimals (a BigInt mantissa and a power-of-ten exponent), never as floats. This
// keeps the client-side check in agreement with DynamoDB's own comparison in the filter, even for
// a TTL a few digits past the millisecond.
"use strict";

const NUMBER_TEXT = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;

// A decimal from DynamoDB's number text (or a JS number's own text, exponent included), or
// undefined when the text is not a number.
function parse(text) {
  const match = NUMBER_TEXT.exec(String(text).trim());
  if (!match) return undefined;
  const [, sign, whole = "", fraction = "", exponent = "0"] = match;
  if (whole === "" && fraction === "") return undefined;
  const digits = BigInt(whole + fraction || "0");
  return { mantissa: sign === "-" ? -digits : digits, exponent: Number(exponent) - fraction.length };
}

// A decimal from a JS value that is a number: a finite number (its shortest round-trip text, which
// is the value the caller meant), a bigint, or number text.
function from(value) {
  if (typeof value === "bigint") return { mantissa: value, exponent: 0 };
  if (typeof value === "number") return Number.isFinite(value) ? parse(String(value)) : undefined;
  if (typeof value === "string") return parse(value);
  return undefined;
}

// Both mantissas scaled to the smaller exponent, so they compare and subtract as integers.
function aligned(a, b) {
  const exponent = Math.min(a.exponent, b.exponent);
  return [
    a.mantissa * 10n ** BigInt(a.exponent - exponent),
    b.mantissa * 10n ** BigInt(b.exponent - exponent),
    exponent,
  ];
}

function compare(a, b) {
  const [x, y] = aligned(a, b);
  return x < y ? -1 : x > y ? 1 : 0;
}

function subtract(a, b) {
  const [x, y, exponent] = aligned(a, b);
  return { mantissa: x - y, exponent };
}

// DynamoDB number text without an exponent, e.g. "1800000000.123".
function toText({ mantissa, exponent }) {
  const negative = mantissa < 0n;
  let digits = (negative ? -mantissa : mantissa).toString();
  if (exponent >= 0) {
    digits = mantissa === 0n ? "0" : digits + "0".repeat(exponent);
  } else {
    const places = -exponent;
    digits = digits.padStart(places + 1, "0");
    const whole = digits.slice(0, digits.length - places);
    const fraction = digits.slice(digits.length - places).replace(/0+$/, "");
    digits = fraction ? `${whole}.${fraction}` : whole;
  }
  return negative && digits !== "0" ? `-${digits}` : digits;
}

module.exports = { parse, from, compare, subtract, toText };
