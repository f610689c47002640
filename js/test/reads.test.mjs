// Every read operation, through both clients, against DynamoDB Local: expired items hidden,
// everything else exactly as DynamoDB returned it.
import { describe, it, before } from "node:test";
import assert from "node:assert/strict";
import { hideExpired, showExpired, PlaceholderClash } from "../index.mjs";
import { KINDS, plainClient, createTable, fixture, put, sks } from "./support.mjs";

for (const [kindName, kind] of Object.entries(KINDS)) {
  describe(kindName, () => {
    const table = `reads-${kindName}`;
    let client; // hides expired items
    let raw; // the same kind of client, without hideExpired
    let fx;

    const send = (op, input, c = client) => kind.send(c, kind.command(op, input));
    const query = (extra = {}, c) =>
      send("Query", {
        TableName: table,
        KeyConditionExpression: "pk = :pk",
        ...extra,
        ExpressionAttributeValues: { ":pk": "p", ...extra.ExpressionAttributeValues },
      }, c);
    const allKeys = () => [...fx.hidden, ...fx.visible].map((sk) => ({ pk: "p", sk }));

    before(async () => {
      const base = plainClient();
      await createTable(base, table);
      fx = fixture(Date.now() / 1000);
      await put(base, table, fx.items);
      client = hideExpired(kind.client(plainClient()));
      raw = kind.client(plainClient());
    });

    it("the fixture holds the expired items (native TTL off)", async () => {
      const out = await query({}, raw);
      assert.deepEqual(sks(out.Items), [...fx.hidden, ...fx.visible].sort());
    });

    it("Query hides expired items; Count counts what is left, ScannedCount what was read", async () => {
      const out = await query();
      assert.deepEqual(sks(out.Items), fx.visible);
      assert.equal(out.Count, fx.visible.length);
      assert.equal(out.ScannedCount, fx.visible.length + fx.hidden.length);
    });

    it("Query with Select=COUNT counts only unexpired items", async () => {
      const out = await query({ Select: "COUNT" });
      assert.equal(out.Items, undefined);
      assert.equal(out.Count, fx.visible.length);
    });

    it("Scan hides expired items", async () => {
      const out = await send("Scan", { TableName: table });
      assert.deepEqual(sks(out.Items), fx.visible);
      assert.equal(out.Count, fx.visible.length);
      const count = await send("Scan", { TableName: table, Select: "COUNT" });
      assert.equal(count.Count, fx.visible.length);
    });

    it("Query pages (Limit, LastEvaluatedKey) see every visible item once and no expired one", async () => {
      const seen = [];
      let ExclusiveStartKey;
      let pages = 0;
      do {
        const out = await query({ Limit: 2, ...(ExclusiveStartKey ? { ExclusiveStartKey } : {}) });
        seen.push(...out.Items.map((i) => i.sk));
        assert.equal(out.Count, out.Items.length);
        ExclusiveStartKey = out.LastEvaluatedKey;
        pages++;
      } while (ExclusiveStartKey);
      assert.deepEqual(seen.sort(), fx.visible);
      // Limit counts the items read before the filter: the pages follow the whole partition.
      assert.ok(pages >= Math.ceil((fx.visible.length + fx.hidden.length) / 2));
    });

    it("the Scan paginator sees every visible item once and no expired one", async () => {
      const seen = [];
      for await (const page of kind.paginateScan(client, { TableName: table, Limit: 3 })) {
        seen.push(...kind.pageItems(page).map((i) => i.sk));
      }
      assert.deepEqual(seen.sort(), fx.visible);
    });

    it("the caller's filter, names and values are kept, and OR does not leak expired items", async () => {
      const input = {
        TableName: table,
        KeyConditionExpression: "pk = :pk",
        FilterExpression: "#s = :a OR #s = :b",
        ExpressionAttributeNames: { "#s": "state" },
        ExpressionAttributeValues: { ":pk": "p", ":a": "a", ":b": "b" },
      };
      const copy = structuredClone(input);
      const out = await send("Query", input);
      assert.deepEqual(sks(out.Items), fx.visible);
      const onlyA = await send("Query", {
        ...input,
        FilterExpression: "#s = :a",
        ExpressionAttributeValues: { ":pk": "p", ":a": "a" },
      });
      const expectedA = fx.items
        .filter((i) => i.state.S === "a" && fx.visible.includes(i.sk.S))
        .map((i) => i.sk.S)
        .sort();
      assert.deepEqual(sks(onlyA.Items), expectedA);
      assert.deepEqual(input, copy, "the caller's input is not modified");
    });

    it("a request already using one of our placeholders fails clearly", async () => {
      await assert.rejects(
        query({ FilterExpression: "#precise_ttl_attr = :x", ExpressionAttributeNames: { "#precise_ttl_attr": "data" }, ExpressionAttributeValues: { ":x": "x" } }),
        (e) => e instanceof PlaceholderClash && /#precise_ttl_attr/.test(e.message),
      );
      await assert.rejects(
        query({ FilterExpression: "#d = :precise_ttl_now", ExpressionAttributeNames: { "#d": "data" }, ExpressionAttributeValues: { ":precise_ttl_now": "x" } }),
        (e) => e instanceof PlaceholderClash && /:precise_ttl_now/.test(e.message),
      );
    });

    it("Query and Scan with a projection leaving out the TTL still hide expired items", async () => {
      const out = await query({ ProjectionExpression: "sk, #d", ExpressionAttributeNames: { "#d": "data" } });
      assert.deepEqual(sks(out.Items), fx.visible);
      for (const item of out.Items) assert.deepEqual(Object.keys(item).sort(), ["data", "sk"]);
      const scan = await send("Scan", { TableName: table, ProjectionExpression: "sk" });
      assert.deepEqual(sks(scan.Items), fx.visible);
    });

    it("legacy Query/Scan parameters: no filter injected, items checked client side", async () => {
      const out = await send("Query", {
        TableName: table,
        KeyConditions: { pk: { ComparisonOperator: "EQ", AttributeValueList: ["p"] } },
        QueryFilter: { data: { ComparisonOperator: "BEGINS_WITH", AttributeValueList: ["data"] } },
      });
      assert.deepEqual(sks(out.Items), fx.visible);
      assert.equal(out.Count, fx.visible.length);
      assert.equal(out.ScannedCount, fx.visible.length + fx.hidden.length);
      const scan = await send("Scan", {
        TableName: table,
        ScanFilter: { pk: { ComparisonOperator: "EQ", AttributeValueList: ["p"] } },
      });
      assert.deepEqual(sks(scan.Items), fx.visible);
    });

    it("GetItem: expired items come back absent, the others whole", async () => {
      for (const sk of fx.hidden) {
        const out = await send("GetItem", { TableName: table, Key: { pk: "p", sk } });
        assert.equal(out.Item, undefined, sk);
      }
      for (const sk of fx.visible) {
        const out = await send("GetItem", { TableName: table, Key: { pk: "p", sk } });
        assert.equal(out.Item?.sk, sk);
        assert.equal(out.Item.data, `data of ${sk}`);
      }
    });

    it("GetItem with a projection leaving out the TTL hides expired items and returns no TTL", async () => {
      for (const sk of [...fx.hidden, ...fx.visible]) {
        const out = await send("GetItem", {
          TableName: table,
          Key: { pk: "p", sk },
          ProjectionExpression: "#d",
          ExpressionAttributeNames: { "#d": "data" },
        });
        if (fx.hidden.includes(sk)) assert.equal(out.Item, undefined, sk);
        else assert.deepEqual(out.Item, { data: `data of ${sk}` });
      }
      // Naming the TTL keeps it in the result.
      const named = await send("GetItem", {
        TableName: table,
        Key: { pk: "p", sk: "future" },
        ProjectionExpression: "sk, #t",
        ExpressionAttributeNames: { "#t": "ttl" },
      });
      assert.deepEqual(Object.keys(named.Item).sort(), ["sk", "ttl"]);
      const legacy = await send("GetItem", { TableName: table, Key: { pk: "p", sk: "exp-1h" }, AttributesToGet: ["sk"] });
      assert.equal(legacy.Item, undefined);
      const legacyVisible = await send("GetItem", { TableName: table, Key: { pk: "p", sk: "future" }, AttributesToGet: ["sk"] });
      assert.deepEqual(legacyVisible.Item, { sk: "future" });
    });

    it("BatchGetItem removes expired items, with and without the TTL projected", async () => {
      const out = await send("BatchGetItem", { RequestItems: { [table]: { Keys: allKeys() } } });
      assert.deepEqual(sks(out.Responses[table]), fx.visible);
      assert.ok(!out.UnprocessedKeys || Object.keys(out.UnprocessedKeys).length === 0);
      const projected = await send("BatchGetItem", { RequestItems: { [table]: { Keys: allKeys(), ProjectionExpression: "sk" } } });
      assert.deepEqual(sks(projected.Responses[table]), fx.visible);
      for (const item of projected.Responses[table]) assert.deepEqual(Object.keys(item), ["sk"]);
    });

    it("TransactGetItems keeps positions: an expired item's entry has no Item", async () => {
      const keys = allKeys();
      for (const ProjectionExpression of [undefined, "sk"]) {
        const out = await send("TransactGetItems", {
          TransactItems: keys.map((Key) => ({ Get: { TableName: table, Key, ...(ProjectionExpression ? { ProjectionExpression } : {}) } })),
        });
        assert.equal(out.Responses.length, keys.length);
        out.Responses.forEach((entry, i) => {
          if (fx.hidden.includes(keys[i].sk)) assert.equal(entry.Item, undefined, keys[i].sk);
          else assert.equal(entry.Item.sk, keys[i].sk);
          if (ProjectionExpression && entry.Item) assert.deepEqual(Object.keys(entry.Item), ["sk"]);
        });
      }
    });

    it("ExecuteStatement: SELECT * hides expired items; a projection without the TTL cannot", async () => {
      const all = await send("ExecuteStatement", { Statement: `SELECT * FROM "${table}" WHERE pk = ?`, Parameters: ["p"] });
      assert.deepEqual(sks(all.Items), fx.visible);
      const withTtl = await send("ExecuteStatement", { Statement: `SELECT sk, "ttl" FROM "${table}" WHERE pk = ?`, Parameters: ["p"] });
      assert.deepEqual(sks(withTtl.Items), fx.visible);
      const withoutTtl = await send("ExecuteStatement", { Statement: `SELECT sk FROM "${table}" WHERE pk = ?`, Parameters: ["p"] });
      assert.deepEqual(sks(withoutTtl.Items), [...fx.hidden, ...fx.visible].sort());
    });

    it("BatchExecuteStatement and ExecuteTransaction keep entries, without expired Items", async () => {
      const keys = allKeys();
      const statements = keys.map((k) => ({ Statement: `SELECT * FROM "${table}" WHERE pk = ? AND sk = ?`, Parameters: [k.pk, k.sk] }));
      const batch = await send("BatchExecuteStatement", { Statements: statements });
      const transaction = await send("ExecuteTransaction", { TransactStatements: statements });
      for (const out of [batch, transaction]) {
        assert.equal(out.Responses.length, keys.length);
        out.Responses.forEach((entry, i) => {
          if (fx.hidden.includes(keys[i].sk)) assert.equal(entry.Item, undefined, keys[i].sk);
          else assert.equal(entry.Item.sk, keys[i].sk);
        });
      }
    });

    it("showExpired(command) switches the filter off for that call only", async () => {
      const shown = await kind.send(client, showExpired(kind.command("Query", {
        TableName: table,
        KeyConditionExpression: "pk = :pk",
        ExpressionAttributeValues: { ":pk": "p" },
      })));
      assert.deepEqual(sks(shown.Items), [...fx.hidden, ...fx.visible].sort());
      const get = await kind.send(client, showExpired(kind.command("GetItem", { TableName: table, Key: { pk: "p", sk: "exp-1s" } })));
      assert.equal(get.Item.sk, "exp-1s");
      const after = await query();
      assert.deepEqual(sks(after.Items), fx.visible);
    });

    it("items that expire while the request is in flight are hidden client side", async () => {
      // The injected clock is read once for the request and once for the response: by the time
      // the response arrives, two hours have passed and `future` (an hour ahead) has expired.
      const start = Date.now() / 1000;
      let reads = 0;
      const inFlight = hideExpired(kind.client(plainClient()), { clock: () => (reads++ === 0 ? start : start + 7200) });
      const out = await kind.send(inFlight, kind.command("Query", {
        TableName: table,
        KeyConditionExpression: "pk = :pk",
        ExpressionAttributeValues: { ":pk": "p" },
      }));
      assert.equal(reads, 2);
      assert.deepEqual(sks(out.Items), fx.visible.filter((sk) => sk !== "future"));
      assert.equal(out.Count, fx.visible.length - 1);
      assert.equal(out.ScannedCount, fx.visible.length + fx.hidden.length);
    });

    it("writes pass through untouched", async () => {
      await send("PutItem", { TableName: table, Item: { pk: "other", sk: "x", ttl: 1 } });
      const out = await send("GetItem", { TableName: table, Key: { pk: "other", sk: "x" } }, raw);
      assert.equal(out.Item.ttl, 1);
    });

    it("the write condition treats an expired item as absent", async () => {
      // The pattern from the README: put only if the item is absent or expired.
      const now = Date.now() / 1000;
      const create = (sk, Item) =>
        send("PutItem", {
          TableName: table,
          Item: { pk: "w", sk, ...Item },
          ConditionExpression: "attribute_not_exists(pk) OR (attribute_type(#ttl, :n) AND #ttl BETWEEN :oldest AND :now)",
          ExpressionAttributeNames: { "#ttl": "ttl" },
          ExpressionAttributeValues: { ":n": "N", ":oldest": now - 157680000, ":now": now },
        });
      await send("PutItem", { TableName: table, Item: { pk: "w", sk: "expired", ttl: now - 60 } });
      await send("PutItem", { TableName: table, Item: { pk: "w", sk: "live", ttl: now + 3600 } });
      await send("PutItem", { TableName: table, Item: { pk: "w", sk: "string", ttl: String(now - 60) } });
      await create("absent", { v: 1 });
      await create("expired", { v: 1, ttl: now + 60 });
      for (const sk of ["live", "string"]) {
        await assert.rejects(create(sk, { v: 1 }), (e) => e.name === "ConditionalCheckFailedException", sk);
      }
      const replaced = await send("GetItem", { TableName: table, Key: { pk: "w", sk: "expired" } });
      assert.equal(replaced.Item.v, 1);
    });
  });
}
