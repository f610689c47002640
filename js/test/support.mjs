// Test support: one DynamoDB Local (the repository's script), the two kinds of client, and the
// fixture items: the same suite runs against DynamoDBClient and DynamoDBDocumentClient.
//
// `run-tests` starts one DynamoDB Local for the whole run and passes its endpoint in
// PRECISE_TTL_DYNAMODB_ENDPOINT; a test file run on its own starts (and stops) its own.
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import path from "node:path";
import * as ddb from "@aws-sdk/client-dynamodb";
import * as doc from "@aws-sdk/lib-dynamodb";
import { marshall, unmarshall, convertToAttr } from "@aws-sdk/util-dynamodb";

const script = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../scripts/dynamodb-local");

let endpoint = process.env.PRECISE_TTL_DYNAMODB_ENDPOINT;
export function dynamodbEndpoint() {
  if (!endpoint) {
    endpoint = execFileSync(script, ["start"], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim();
    const port = new URL(endpoint).port;
    // Once per process, however its suites end; the stop itself is synchronous, as exit needs.
    process.on("exit", () => execFileSync(script, ["stop", port], { stdio: "inherit" }));
  }
  return endpoint;
}

// Dummy credentials and region: DynamoDB Local checks neither.
export function plainClient() {
  return new ddb.DynamoDBClient({
    endpoint: dynamodbEndpoint(),
    region: "us-east-1",
    credentials: { accessKeyId: "local", secretAccessKey: "local" },
  });
}

export const FIVE_YEARS = 157680000;

// A table with pk (S) + sk (S). Native TTL stays off: expired items stay present.
export async function createTable(client, name) {
  await client.send(
    new ddb.CreateTableCommand({
      TableName: name,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [
        { AttributeName: "pk", AttributeType: "S" },
        { AttributeName: "sk", AttributeType: "S" },
      ],
      KeySchema: [
        { AttributeName: "pk", KeyType: "HASH" },
        { AttributeName: "sk", KeyType: "RANGE" },
      ],
    }),
  );
}

// The fixture, relative to `now` (epoch seconds): typed items, so each TTL has exactly the type
// it needs (a String TTL, a decimal one).
export function fixture(now, pk = "p", ttl = "ttl") {
  const n = (v) => ({ N: String(v) });
  const hidden = {
    "exp-1s": n(now - 1),
    "exp-1h": n(now - 3600),
    "exp-4y": n(now - 4 * 365 * 86400),
    "exp-decimal": { N: (Math.floor(now) - 1 + 0.25).toFixed(2) },
  };
  const visible = {
    future: n(now + 3600),
    string: { S: String(now - 60) },
    millis: n(Math.round(now * 1000)),
    "over-5y": n(now - FIVE_YEARS - 3600),
    none: undefined,
  };
  const items = [];
  const states = ["a", "b"];
  let i = 0;
  for (const [sk, value] of [...Object.entries(hidden), ...Object.entries(visible)]) {
    const item = { pk: { S: pk }, sk: { S: sk }, state: { S: states[i++ % 2] }, data: { S: `data of ${sk}` } };
    if (value) item[ttl] = value;
    items.push(item);
  }
  return { items, hidden: Object.keys(hidden).sort(), visible: Object.keys(visible).sort() };
}

export async function put(client, table, items) {
  for (const Item of items) await client.send(new ddb.PutItemCommand({ TableName: table, Item }));
}

// Converters for the typed client: tests are written with plain values, as for the document
// client, and the typed kind marshalls requests and unmarshalls responses at the same places the
// document client does.
const mv = (values) => values && marshall(values);
const list = (params) => params && params.map((p) => convertToAttr(p));
const conditions = (c) =>
  c &&
  Object.fromEntries(
    Object.entries(c).map(([k, v]) => [k, { ...v, AttributeValueList: v.AttributeValueList && list(v.AttributeValueList) }]),
  );
const toTyped = {
  Query: (i) => ({
    ...i,
    ExpressionAttributeValues: mv(i.ExpressionAttributeValues),
    ExclusiveStartKey: mv(i.ExclusiveStartKey),
    KeyConditions: conditions(i.KeyConditions),
    QueryFilter: conditions(i.QueryFilter),
  }),
  Scan: (i) => ({
    ...i,
    ExpressionAttributeValues: mv(i.ExpressionAttributeValues),
    ExclusiveStartKey: mv(i.ExclusiveStartKey),
    ScanFilter: conditions(i.ScanFilter),
  }),
  GetItem: (i) => ({ ...i, Key: mv(i.Key) }),
  PutItem: (i) => ({ ...i, Item: mv(i.Item), ExpressionAttributeValues: mv(i.ExpressionAttributeValues) }),
  BatchGetItem: (i) => ({
    ...i,
    RequestItems: Object.fromEntries(
      Object.entries(i.RequestItems).map(([t, r]) => [t, { ...r, Keys: r.Keys.map((k) => marshall(k)) }]),
    ),
  }),
  TransactGetItems: (i) => ({
    ...i,
    TransactItems: i.TransactItems.map((e) => ({ ...e, Get: { ...e.Get, Key: marshall(e.Get.Key) } })),
  }),
  ExecuteStatement: (i) => ({ ...i, Parameters: list(i.Parameters) }),
  BatchExecuteStatement: (i) => ({ ...i, Statements: i.Statements.map((s) => ({ ...s, Parameters: list(s.Parameters) })) }),
  ExecuteTransaction: (i) => ({
    ...i,
    TransactStatements: i.TransactStatements.map((s) => ({ ...s, Parameters: list(s.Parameters) })),
  }),
};
const um = (item) => item && unmarshall(item);
const entries = (rs) => rs && rs.map((r) => (r.Item ? { ...r, Item: um(r.Item) } : r));
const fromTyped = {
  Query: (o) => ({ ...o, Items: o.Items?.map(um), LastEvaluatedKey: um(o.LastEvaluatedKey) }),
  Scan: (o) => ({ ...o, Items: o.Items?.map(um), LastEvaluatedKey: um(o.LastEvaluatedKey) }),
  GetItem: (o) => ({ ...o, Item: um(o.Item) }),
  PutItem: (o) => o,
  BatchGetItem: (o) => ({
    ...o,
    Responses: Object.fromEntries(Object.entries(o.Responses ?? {}).map(([t, items]) => [t, items.map(um)])),
  }),
  TransactGetItems: (o) => ({ ...o, Responses: entries(o.Responses) }),
  ExecuteStatement: (o) => ({ ...o, Items: o.Items?.map(um) }),
  BatchExecuteStatement: (o) => ({ ...o, Responses: entries(o.Responses) }),
  ExecuteTransaction: (o) => ({ ...o, Responses: entries(o.Responses) }),
};

const documentCommands = {
  Query: doc.QueryCommand,
  Scan: doc.ScanCommand,
  GetItem: doc.GetCommand,
  PutItem: doc.PutCommand,
  BatchGetItem: doc.BatchGetCommand,
  TransactGetItems: doc.TransactGetCommand,
  ExecuteStatement: doc.ExecuteStatementCommand,
  BatchExecuteStatement: doc.BatchExecuteStatementCommand,
  ExecuteTransaction: doc.ExecuteTransactionCommand,
};

// The two kinds of client, behind one interface: command(op, plainInput) builds the command,
// send(client, command) sends it and returns the output with plain values.
export const KINDS = {
  DynamoDBClient: {
    client: (base) => base,
    command: (op, input) => Object.assign(new ddb[`${op}Command`](toTyped[op](input)), { op }),
    async send(client, command) {
      return fromTyped[command.op](await client.send(command));
    },
    paginateScan: (client, input, config = {}) => ddb.paginateScan({ client, ...config }, toTyped.Scan(input)),
    pageItems: (page) => (page.Items ?? []).map(um),
  },
  DynamoDBDocumentClient: {
    client: (base) => doc.DynamoDBDocumentClient.from(base),
    command: (op, input) => new documentCommands[op](input),
    send: (client, command) => client.send(command),
    paginateScan: (client, input, config = {}) => doc.paginateScan({ client, ...config }, input),
    pageItems: (page) => page.Items ?? [],
  },
};

export const sks = (items) => (items ?? []).map((i) => i.sk).sort();
