#!/usr/bin/env node
// Runs the queries of docs/format/parquet.md with real engines, DuckDB
// (@duckdb/node-api) and Polars (nodejs-polars), and prints their answers as
// JSON. The queries are taken from the document itself (fenced ```sql and
// ```js blocks whose first line is "-- query: NAME" or "// query: NAME"),
// so the document cannot drift from what is tested.
//
//   node run_queries.js DOC ROOT
//
// DOC is parquet.md; ROOT replaces the documents' "out/demo" output root.
// Output: {"queries": {"duckdb": [names], "polars": [names]},
//          "duckdb": {NAME: [row, ...]}, "polars": {NAME: [row, ...]}}
// Integers come back as JSON numbers (they are counts far below 2^53).
"use strict";

const fs = require("node:fs");
const duckdb = require("@duckdb/node-api");
const pl = require("nodejs-polars");

const DOC_ROOT = "out/demo";

function extractQueries(doc) {
  const queries = { duckdb: {}, polars: {} };
  const block = /```(sql|js)\n(?:--|\/\/) query: ([a-z0-9_]+)\n([\s\S]*?)```/g;
  for (const m of doc.matchAll(block)) {
    const engine = m[1] === "sql" ? "duckdb" : "polars";
    if (queries[engine][m[2]] !== undefined) {
      throw new Error(`query ${m[2]} appears twice for ${engine}`);
    }
    queries[engine][m[2]] = m[3];
  }
  return queries;
}

function plain(value) {
  // BigInt (DuckDB BIGINT, Polars Int64 in some paths) is not JSON.
  return JSON.parse(JSON.stringify(value, (_, v) => (typeof v === "bigint" ? Number(v) : v)));
}

async function runDuckDB(queries, root) {
  const instance = await duckdb.DuckDBInstance.create(":memory:");
  const conn = await instance.connect();
  const out = {};
  for (const [name, sql] of Object.entries(queries)) {
    try {
      const reader = await conn.runAndReadAll(sql.replaceAll(DOC_ROOT, root));
      out[name] = plain(reader.getRowObjectsJS());
    } catch (err) {
      throw new Error(`duckdb query ${name}: ${err.message}`);
    }
  }
  conn.closeSync();
  return out;
}

function runPolars(queries, root) {
  const out = {};
  for (const [name, code] of Object.entries(queries)) {
    try {
      const run = new Function("pl", `"use strict";\n${code.replaceAll(DOC_ROOT, root)}\nreturn result;`);
      out[name] = plain(run(pl).toRecords());
    } catch (err) {
      throw new Error(`polars query ${name}: ${err.message}`);
    }
  }
  return out;
}

async function main() {
  const [docPath, root] = process.argv.slice(2);
  if (!docPath || !root) {
    throw new Error("usage: node run_queries.js DOC ROOT");
  }
  if (/['"\\]/.test(root)) {
    throw new Error(`root ${JSON.stringify(root)} contains a quote or backslash`);
  }
  const queries = extractQueries(fs.readFileSync(docPath, "utf8"));
  const result = {
    queries: { duckdb: Object.keys(queries.duckdb), polars: Object.keys(queries.polars) },
    duckdb: await runDuckDB(queries.duckdb, root),
    polars: runPolars(queries.polars, root),
  };
  process.stdout.write(JSON.stringify(result) + "\n");
}

main().catch((err) => {
  process.stderr.write(`run_queries: ${err.message}\n`);
  process.exit(1);
});
