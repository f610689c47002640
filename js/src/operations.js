// What hideExpired does to each DynamoDB operation, on typed values (the low-level client's
// AttributeValues; the middleware sits inside the document client's marshalling).
//
// Each entry has `request(input, ttl)` → { input, plan } and `response(output, plan, due)` →
// output. Requests and responses are copied, never modified in place: paginators and retries
// send the caller's input object again, and it must come back without our placeholders.
"use strict";

const { isDue } = require("./rule");
const decimal = require("./decimal");

const ATTR = "#precise_ttl_attr";
const NUMBER = ":precise_ttl_number";
const OLDEST = ":precise_ttl_oldest";
const NOW = ":precise_ttl_now";

const HIDE_EXPIRED =
  `NOT (attribute_type(${ATTR}, ${NUMBER}) AND ${ATTR} BETWEEN ${OLDEST} AND ${NOW})`;

// DynamoDB refuses requests that mix these with expression parameters, so such requests get no
// filter, only the client-side check.
const LEGACY = ["QueryFilter", "ScanFilter", "ConditionalOperator", "AttributesToGet", "KeyConditions"];

class PlaceholderClash extends Error {
  constructor(placeholder) {
    super(
      `precise-ttl-read: the request already uses ${placeholder}, a placeholder hideExpired adds ` +
        "to hide expired items; rename yours, or send the command with showExpired(command)",
    );
    this.name = "PreciseTtlPlaceholderClash";
  }
}

function refuseClash(map, placeholders) {
  for (const p of placeholders) if (map && Object.prototype.hasOwnProperty.call(map, p)) throw new PlaceholderClash(p);
}

// Query and Scan: the filter combined with the caller's, so Count and Select=COUNT are right
// server side whatever the projection.
function withFilter(input, ttl, due) {
  if (LEGACY.some((k) => input[k] !== undefined)) return input;
  refuseClash(input.ExpressionAttributeNames, [ATTR]);
  refuseClash(input.ExpressionAttributeValues, [NUMBER, OLDEST, NOW]);
  const theirs = typeof input.FilterExpression === "string" ? input.FilterExpression.trim() : "";
  return {
    ...input,
    // Theirs may contain OR, which binds more loosely than AND: both sides keep parentheses.
    FilterExpression: theirs ? `(${theirs}) AND (${HIDE_EXPIRED})` : HIDE_EXPIRED,
    ExpressionAttributeNames: { ...input.ExpressionAttributeNames, [ATTR]: ttl },
    ExpressionAttributeValues: {
      ...input.ExpressionAttributeValues,
      [NUMBER]: { S: "N" },
      [OLDEST]: { N: decimal.toText(due.oldest) },
      [NOW]: { N: decimal.toText(due.now) },
    },
  };
}

// The top-level attribute names a ProjectionExpression reads, and whether each is read whole.
function projected(expression, names = {}) {
  return expression.split(",").map((path) => {
    const trimmed = path.trim();
    const head = /^[^.[\s]+/.exec(trimmed)?.[0] ?? trimmed;
    const name = head.startsWith("#") ? names[head] : head;
    return { name, whole: head === trimmed };
  });
}

// A read-by-key request (GetItem, one BatchGetItem table, one TransactGetItems Get) made to return
// the TTL attribute, so the item can be judged. `strip` says whether the caller did not ask for it
// and it must be removed from the result.
function withTtlProjected(request, ttl) {
  if (Array.isArray(request.AttributesToGet)) {
    if (request.AttributesToGet.includes(ttl)) return { request, strip: false };
    return { request: { ...request, AttributesToGet: [...request.AttributesToGet, ttl] }, strip: true };
  }
  if (typeof request.ProjectionExpression !== "string" || request.ProjectionExpression.trim() === "") {
    return { request, strip: false };
  }
  const paths = projected(request.ProjectionExpression, request.ExpressionAttributeNames);
  if (paths.some((p) => p.name === ttl && p.whole)) return { request, strip: false };
  // A nested path inside the TTL attribute (`ttl.x`) would overlap with the whole attribute and
  // DynamoDB would refuse the request; a TTL that has nested paths is no Number anyway.
  if (paths.some((p) => p.name === ttl)) return { request, strip: false };
  refuseClash(request.ExpressionAttributeNames, [ATTR]);
  return {
    request: {
      ...request,
      ProjectionExpression: `${request.ProjectionExpression}, ${ATTR}`,
      ExpressionAttributeNames: { ...request.ExpressionAttributeNames, [ATTR]: ttl },
    },
    strip: true,
  };
}

function stripped(item, ttl, strip) {
  if (!strip || !item || !(ttl in item)) return item;
  const { [ttl]: _, ...rest } = item;
  return rest;
}

// The items that are not due, with the TTL removed where the caller did not project it.
function visible(items, plan, due) {
  return items.filter((item) => !isDue(item?.[plan.ttl], due)).map((item) => stripped(item, plan.ttl, plan.strip));
}

// An entry ({ Item }) of a positional response, without its Item when that is due.
function positional(entry, plan, due, strip = false) {
  if (!entry || !entry.Item) return entry;
  if (isDue(entry.Item[plan.ttl], due)) {
    const { Item: _, ...rest } = entry;
    return rest;
  }
  return strip ? { ...entry, Item: stripped(entry.Item, plan.ttl, true) } : entry;
}

// BatchGetItem's UnprocessedKeys with each table's projection as the caller wrote it.
function unprocessed(keys, plan) {
  if (!keys) return {};
  const restored = {};
  for (const [table, request] of Object.entries(keys)) {
    const original = plan.original[table];
    if (!plan.strip[table] || !original || !request) {
      restored[table] = request;
      continue;
    }
    const { ProjectionExpression: _p, ExpressionAttributeNames: _n, AttributesToGet: _a, ...rest } = request;
    const own = {};
    for (const k of ["ProjectionExpression", "ExpressionAttributeNames", "AttributesToGet"]) {
      if (original[k] !== undefined) own[k] = original[k];
    }
    restored[table] = { ...rest, ...own };
  }
  return { UnprocessedKeys: restored };
}

const queryOrScan = {
  request: (input, ttl, due) => ({ input: withFilter(input, ttl, due), plan: { ttl, strip: false } }),
  response(output, plan, due) {
    if (!Array.isArray(output.Items)) return output;
    const Items = visible(output.Items, plan, due);
    const removed = output.Items.length - Items.length;
    // Count is the items returned; ScannedCount and LastEvaluatedKey stay as the server said,
    // so pagination goes on exactly as without us.
    return { ...output, Items, ...(typeof output.Count === "number" ? { Count: output.Count - removed } : {}) };
  },
};

const OPERATIONS = {
  QueryCommand: queryOrScan,
  ScanCommand: queryOrScan,

  GetItemCommand: {
    request(input, ttl) {
      const { request, strip } = withTtlProjected(input, ttl);
      return { input: request, plan: { ttl, strip } };
    },
    response(output, plan, due) {
      if (!output.Item) return output;
      if (isDue(output.Item[plan.ttl], due)) {
        const { Item: _, ...rest } = output;
        return rest;
      }
      return { ...output, Item: stripped(output.Item, plan.ttl, plan.strip) };
    },
  },

  BatchGetItemCommand: {
    request(input, ttl) {
      const strip = {};
      const RequestItems = {};
      for (const [table, request] of Object.entries(input.RequestItems ?? {})) {
        const projected = withTtlProjected(request, ttl);
        RequestItems[table] = projected.request;
        strip[table] = projected.strip;
      }
      return { input: { ...input, RequestItems }, plan: { ttl, strip, original: input.RequestItems ?? {} } };
    },
    response(output, plan, due) {
      if (!output.Responses) return output;
      const Responses = {};
      for (const [table, items] of Object.entries(output.Responses)) {
        Responses[table] = Array.isArray(items) ? visible(items, { ttl: plan.ttl, strip: plan.strip[table] }, due) : items;
      }
      // UnprocessedKeys are keys, not items: the caller retries them and we judge them then.
      // UnprocessedKeys echo the request as sent; the caller sends them again, so they get the
      // caller's own projection back (ours would clash with the placeholder on the retry).
      return { ...output, Responses, ...unprocessed(output.UnprocessedKeys, plan) };
    },
  },

  TransactGetItemsCommand: {
    request(input, ttl) {
      const strip = [];
      const TransactItems = (input.TransactItems ?? []).map((entry) => {
        if (!entry?.Get) return strip.push(false), entry;
        const projected = withTtlProjected(entry.Get, ttl);
        strip.push(projected.strip);
        return { ...entry, Get: projected.request };
      });
      return { input: { ...input, TransactItems }, plan: { ttl, strip } };
    },
    response(output, plan, due) {
      if (!Array.isArray(output.Responses)) return output;
      // Responses are aligned with the request: an expired item leaves its entry, without Item.
      return { ...output, Responses: output.Responses.map((e, i) => positional(e, plan, due, plan.strip[i])) };
    },
  },

  ExecuteStatementCommand: {
    request: (input, ttl) => ({ input, plan: { ttl, strip: false, select: /^\s*\(*\s*select\b/i.test(input.Statement ?? "") } }),
    response(output, plan, due) {
      // Only a SELECT returns items; a projection that leaves the TTL out makes them unjudgeable,
      // and they stay visible.
      if (!plan.select || !Array.isArray(output.Items)) return output;
      return { ...output, Items: visible(output.Items, plan, due) };
    },
  },

  BatchExecuteStatementCommand: {
    request: (input, ttl) => ({ input, plan: { ttl } }),
    response(output, plan, due) {
      if (!Array.isArray(output.Responses)) return output;
      return { ...output, Responses: output.Responses.map((e) => positional(e, plan, due)) };
    },
  },

  ExecuteTransactionCommand: {
    request: (input, ttl) => ({ input, plan: { ttl } }),
    response(output, plan, due) {
      if (!Array.isArray(output.Responses)) return output;
      return { ...output, Responses: output.Responses.map((e) => positional(e, plan, due)) };
    },
  },
};

module.exports = { OPERATIONS, HIDE_EXPIRED, PLACEHOLDERS: { ATTR, NUMBER, OLDEST, NOW }, PlaceholderClash };
