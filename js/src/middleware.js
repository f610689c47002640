// hideExpired(client): the middleware that hides expired items from a DynamoDBClient's or a
// DynamoDBDocumentClient's reads, and showExpired(command) to switch it off for one call.
//
// Where it sits. The document client marshalls in two middlewares of the command's own stack,
// DocumentMarshall (just before the serializer) and DocumentUnmarshall (just before the
// deserializer). Ours must run inside both, on typed values, so that the filter's values, the
// projection and the TTL check are the same code for both clients. A middleware added to the
// client's stack "before the serializer" would land outside DocumentMarshall (the stack orders
// the client's entries before the command's), so ours is placed *after* DocumentMarshall and
// DocumentUnmarshall by name. For the low-level client's commands, which have no such
// middlewares, two no-op anchors answer to those names at the same places; a document command's
// own middlewares replace the anchors (they are added with override), and ours follow them.
//
// The document client shares the wrapped client's middleware stack in the SDK versions tested, so
// hiding on one hides on both; a document client with its own stack (the SDK makes one when the
// wrapped client is of an incompatible version) needs its own hideExpired call.
"use strict";

const { OPERATIONS } = require("./operations");
const { systemClock, window } = require("./rule");

const INPUT = "preciseTtlHideExpired";
const OUTPUT = "preciseTtlCheckItems";
const SHOW = "preciseTtlShowExpired";
const MARSHALL = "DocumentMarshall";
const UNMARSHALL = "DocumentUnmarshall";

// The TTL attribute each stack hides by, so that a second call is a no-op and a conflicting one
// is refused.
const applied = new WeakMap();

const passThrough = (next) => (args) => next(args);

function hideExpired(client, { ttlAttribute = "ttl", clock = systemClock } = {}) {
  const stack = client?.middlewareStack;
  if (!stack || typeof stack.addRelativeTo !== "function") {
    throw new TypeError("precise-ttl-read: hideExpired needs a DynamoDBClient or a DynamoDBDocumentClient");
  }
  if (typeof ttlAttribute !== "string" || ttlAttribute === "") {
    throw new TypeError("precise-ttl-read: ttlAttribute must be a non-empty attribute name");
  }
  if (typeof clock !== "function") throw new TypeError("precise-ttl-read: clock must be a function returning epoch seconds");
  const already = applied.get(stack) ?? (stack.identify().some((m) => m.startsWith(`${INPUT} `)) ? null : undefined);
  if (already !== undefined) {
    if (already !== null && already !== ttlAttribute) {
      throw new Error(
        `precise-ttl-read: this client already hides items expired by "${already}"; ` +
          `it cannot also hide by "${ttlAttribute}" (use a second client)`,
      );
    }
    return client;
  }

  stack.addRelativeTo(passThrough, {
    name: "preciseTtlMarshallAnchor",
    aliases: [MARSHALL],
    relation: "before",
    toMiddleware: "serializerMiddleware",
  });
  stack.addRelativeTo(passThrough, {
    name: "preciseTtlUnmarshallAnchor",
    aliases: [UNMARSHALL],
    relation: "before",
    toMiddleware: "deserializerMiddleware",
  });

  // Requests: the filter or the projection, with `now` read when the call is made.
  stack.addRelativeTo(
    (next, context) => async (args) => {
      const operation = OPERATIONS[context.commandName];
      if (!operation || context[SHOW]) return next(args);
      const { input, plan } = operation.request(args.input, ttlAttribute, window(clock()));
      context[OUTPUT] = plan;
      return next({ ...args, input });
    },
    { name: INPUT, relation: "after", toMiddleware: MARSHALL },
  );

  // Responses: the second guard, with `now` read when the response arrives, so an item that
  // expired while the request was in flight is hidden too.
  stack.addRelativeTo(
    (next, context) => async (args) => {
      const result = await next(args);
      const plan = context[OUTPUT];
      const operation = OPERATIONS[context.commandName];
      if (!plan || !operation || context[SHOW] || !result?.output) return result;
      return { ...result, output: operation.response(result.output, plan, window(clock())) };
    },
    { name: OUTPUT, relation: "after", toMiddleware: UNMARSHALL },
  );

  applied.set(stack, ttlAttribute);
  return client;
}

// Switches hideExpired off for this command (and every later send of the same command object).
// Returns the command, so it can wrap the constructor call.
function showExpired(command) {
  const stack = command?.middlewareStack;
  if (!stack || typeof stack.add !== "function") {
    throw new TypeError("precise-ttl-read: showExpired needs a command (e.g. new QueryCommand(...))");
  }
  stack.add(
    (next, context) => (args) => {
      context[SHOW] = true;
      return next(args);
    },
    { name: SHOW, step: "initialize", override: true },
  );
  return command;
}

module.exports = { hideExpired, showExpired };
