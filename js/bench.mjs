#!/usr/bin/env node
// Overhead of hideExpired: Query (100 items, one page) and GetItem (one item), each through a
// client with and one without the middleware, against one DynamoDB Local, interleaved round by
// round. Writes p50 and p99 (ms) of the four, and the differences, as JSON to --out.
//
//   node bench.mjs --out bench.json [--n 1000] [--warmup 300] [--endpoint URL]
//
// Without --endpoint it starts DynamoDB Local with the repository's script and stops it after.
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import {
  DynamoDBClient,
  BatchWriteItemCommand,
  QueryCommand,
  GetItemCommand,
} from "@aws-sdk/client-dynamodb";
import { hideExpired } from "./index.mjs";
import { createTable } from "./test/support.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const script = path.resolve(here, "../scripts/dynamodb-local");
const require = createRequire(import.meta.url);

const { values: flags } = parseArgs({
  options: {
    out: { type: "string" },
    n: { type: "string", default: "1000" },
    warmup: { type: "string", default: "300" },
    endpoint: { type: "string" },
  },
});
if (!flags.out) {
  console.error("usage: node bench.mjs --out FILE [--n 1000] [--warmup 300] [--endpoint URL]");
  process.exit(2);
}
const rounds = Number(flags.n);
const warmup = Number(flags.warmup);
if (!Number.isInteger(rounds) || rounds < 1 || !Number.isInteger(warmup) || warmup < 0) {
  console.error("bench: --n must be a positive integer and --warmup a non-negative one");
  process.exit(2);
}

const git = (...args) => {
  try {
    return execFileSync("git", args, { cwd: here, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return null;
  }
};

let endpoint = flags.endpoint;
let port;
if (!endpoint) {
  endpoint = execFileSync(script, ["start"], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim();
  port = new URL(endpoint).port;
}
const stop = () => port && execFileSync(script, ["stop", port], { stdio: "inherit" });

try {
  const config = { endpoint, region: "us-east-1", credentials: { accessKeyId: "local", secretAccessKey: "local" } };
  // Separate clients, so the one without the middleware is untouched by it.
  const plain = new DynamoDBClient(config);
  const hiding = hideExpired(new DynamoDBClient(config));

  const table = `bench-${process.pid}`;
  await createTable(plain, table);
  // None expired: the figures are the middleware's cost, not the filter's effect.
  const ttl = String(Math.floor(Date.now() / 1000) + 86400);
  const items = Array.from({ length: 100 }, (_, i) => ({
    pk: { S: "bench" },
    sk: { S: `item-${String(i).padStart(3, "0")}` },
    ttl: { N: ttl },
    data: { S: "x".repeat(100) },
  }));
  for (let i = 0; i < items.length; i += 25) {
    await plain.send(
      new BatchWriteItemCommand({ RequestItems: { [table]: items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })) } }),
    );
  }

  const query = () =>
    new QueryCommand({ TableName: table, KeyConditionExpression: "pk = :pk", ExpressionAttributeValues: { ":pk": { S: "bench" } } });
  const get = () => new GetItemCommand({ TableName: table, Key: { pk: { S: "bench" }, sk: { S: "item-042" } } });

  const cases = {
    query_without: [plain, query],
    query_with: [hiding, query],
    get_item_without: [plain, get],
    get_item_with: [hiding, get],
  };
  const samples = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
  const once = async (name) => {
    const [client, command] = cases[name];
    const start = process.hrtime.bigint();
    const out = await client.send(command());
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    if (name.startsWith("query") && out.Items.length !== 100) throw new Error(`bench: Query returned ${out.Items.length} items`);
    if (name.startsWith("get") && !out.Item) throw new Error("bench: GetItem returned no item");
    return ms;
  };

  const names = Object.keys(cases);
  for (let i = 0; i < warmup; i++) for (const name of names) await once(name);
  for (let i = 0; i < rounds; i++) {
    // Alternate which side goes first, so neither always follows the other.
    const order = i % 2 === 0 ? names : [names[1], names[0], names[3], names[2]];
    for (const name of order) samples[name].push(await once(name));
  }

  const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
  const stats = (xs) => {
    const sorted = [...xs].sort((a, b) => a - b);
    return { p50_ms: percentile(sorted, 50), p99_ms: percentile(sorted, 99) };
  };
  const figures = {};
  for (const op of ["query", "get_item"]) {
    const without = stats(samples[`${op}_without`]);
    const withMiddleware = stats(samples[`${op}_with`]);
    figures[op] = {
      without,
      with: withMiddleware,
      difference: {
        p50_ms: withMiddleware.p50_ms - without.p50_ms,
        p99_ms: withMiddleware.p99_ms - without.p99_ms,
      },
    };
  }

  const version = (name) => {
    try {
      return require(`${name}/package.json`).version;
    } catch {
      return null;
    }
  };
  const status = git("status", "--porcelain");
  const result = {
    revision: git("rev-parse", "HEAD"),
    clean: status === null ? null : status === "",
    command: process.argv,
    host: {
      hostname: os.hostname(),
      nproc: os.availableParallelism?.() ?? os.cpus().length,
      os: `${os.type()} ${os.release()} ${os.arch()}`,
      cpu: os.cpus()[0]?.model ?? null,
    },
    runtime: {
      node: process.version,
      "@aws-sdk/client-dynamodb": version("@aws-sdk/client-dynamodb"),
      "@aws-sdk/lib-dynamodb": version("@aws-sdk/lib-dynamodb"),
      client: "DynamoDBClient",
    },
    setup: { items: items.length, warmup_calls_each: warmup, rounds, endpoint: "DynamoDB Local" },
    figures,
  };
  writeFileSync(flags.out, `${JSON.stringify(result, null, 2)}\n`);
  console.log(JSON.stringify(figures, null, 2));
} finally {
  stop();
}
