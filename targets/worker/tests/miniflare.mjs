// Runs the built Worker (build/index.js + wasm) in local workerd through Miniflare, for the
// Rust tests in this directory. D1 is simulated by Miniflare; Vectorize (which has no local
// mode) is the in-memory mock below, bound as a wrapped binding.
//
// Usage: node miniflare.mjs '<json>' where json = { vars: {NAME: value}, vectorize: bool,
// ai: bool, persist: dir, queue: bool, front: bool } (bind the Vectorize and Workers AI mocks;
// keep D1 in dir; bind Miniflare's local queue as HANDOFF, consumed by the same Worker; run the
// front Worker of CLAWLESS_WORKER_FRONT_BUILD beside it, on the same D1 database and queue).
// Prints one line `{"url": ..., "control": ..., "front": ...}` when ready. The control server takes
//   POST /scheduled          → runs the scheduled handler, answers its outcome
//   POST /sql  (body: SQL)   → runs it on the DB binding, answers the rows
// Exits (disposing workerd) when stdin closes.

import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const here = path.dirname(fileURLToPath(import.meta.url));
// Miniflare comes from the tools directory .ci/run installs (CLAWLESS_NODE_MODULES).
const require = createRequire(path.join(process.env.CLAWLESS_NODE_MODULES ?? here, "x.js"));
const { Miniflare, Log, LogLevel } = require("miniflare");

const options = JSON.parse(process.argv[2] ?? "{}");
const build = process.env.CLAWLESS_WORKER_BUILD ?? path.join(here, "..", "build");

// An in-memory Vectorize index with the binding's API (upsert, query, deleteByIds, describe),
// exact cosine, equality filters, the 64-byte id limit and the topK limit of the real service.
const vectorizeMock = `
const stores = new Map();
class Index {
  constructor(dims) { this.dims = dims; this.items = new Map(); }
  async describe() { return { dimensions: this.dims, vectorCount: this.items.size }; }
  check(values) {
    if (values.length !== this.dims) throw new Error("VECTOR_DIMENSION_MISMATCH: " + values.length + " != " + this.dims);
  }
  async upsert(vectors) {
    for (const v of vectors) {
      if (typeof v.id !== "string" || v.id.length === 0 || new TextEncoder().encode(v.id).length > 64) throw new Error("invalid id " + v.id);
      this.check(v.values);
      this.items.set(v.id, { id: v.id, values: Array.from(v.values), metadata: { ...(v.metadata ?? {}) } });
    }
    return { mutationId: String(Date.now()) };
  }
  async query(vector, opts = {}) {
    this.check(vector);
    const topK = opts.topK ?? 5;
    if ((opts.returnMetadata === "all" || opts.returnValues) && topK > 20) throw new Error("topK > 20 with metadata");
    const filter = opts.filter ?? {};
    const cos = (a, b) => { let d = 0, na = 0, nb = 0; for (let i = 0; i < a.length; i++) { d += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i]; } return na && nb ? d / Math.sqrt(na * nb) : 0; };
    const matches = [...this.items.values()]
      .filter((it) => Object.entries(filter).every(([k, v]) => it.metadata[k] === v))
      .map((it) => ({ id: it.id, score: cos(vector, it.values), metadata: opts.returnMetadata === "none" ? undefined : it.metadata }))
      .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1))
      .slice(0, topK);
    return { count: matches.length, matches };
  }
  async deleteByIds(ids) { for (const id of ids) this.items.delete(id); return { mutationId: String(Date.now()) }; }
}
export default function (env) {
  if (!stores.has(env.NAME)) stores.set(env.NAME, new Index(env.DIMS));
  return stores.get(env.NAME);
}
`;

// Workers AI does not run locally either: a mock of the embedding model's answer shape
// ({shape, data}), with vectors from hashed words so related texts land near each other.
const aiMock = `
export default function () {
  return {
    async run(model, input) {
      if (model !== "@cf/baai/bge-small-en-v1.5") throw new Error("unexpected model " + model);
      const data = (input.text ?? []).map((t) => {
        const v = new Array(384).fill(0);
        for (const w of String(t).toLowerCase().match(/[a-z0-9]+/g) ?? []) {
          let h = 2166136261;
          for (const c of w) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
          v[h % 384] += (h & 1) ? 1 : -1;
        }
        const n = Math.hypot(...v) || 1;
        return v.map((x) => (x === 0 && n === 1 ? 1e-3 : x / n));
      });
      return { shape: [data.length, 384], data };
    },
  };
}
`;

const wrappedBindings = {
  VECTORIZE_TEST: { scriptName: "vectorize-mock", bindings: { NAME: "test", DIMS: 3 } },
};
if (options.ai) {
  wrappedBindings.AI = { scriptName: "ai-mock" };
}
if (options.vectorize) {
  wrappedBindings.VECTORIZE = { scriptName: "vectorize-mock", bindings: { NAME: "memory", DIMS: 384 } };
}

const mf = new Miniflare({
  host: "127.0.0.1",
  port: 0,
  log: new Log(LogLevel.INFO),
  // No request for the real `cf` object (no internet here, and tests need none).
  cf: {},
  // With `persist`, D1 lives in that directory and outlives this process (crash tests).
  d1Persist: options.persist ?? false,
  workers: [
    {
      name: "main",
      modules: true,
      scriptPath: path.join(build, "index.js"),
      modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }],
      compatibilityDate: "2026-04-01",
      d1Databases: ["DB", "CONFORMANCE_DB"],
      bindings: options.vars ?? {},
      wrappedBindings,
      // The panel's pages, as wrangler.toml's [assets] serves them.
      assets: {
        directory: path.join(here, "..", "..", "..", "core", "panel"),
        routerConfig: { has_user_worker: true },
      },
      ...(options.queue
        ? {
            queueProducers: { HANDOFF: "clawless-turns" },
            queueConsumers: { "clawless-turns": { maxBatchSize: 1, maxBatchTimeout: 1, maxRetries: 3 } },
          }
        : {}),
    },
    ...(options.front
      ? [
          {
            name: "front",
            modules: true,
            scriptPath: path.join(process.env.CLAWLESS_WORKER_FRONT_BUILD ?? path.join(here, "..", "build-front"), "index.js"),
            modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }],
            compatibilityDate: "2026-04-01",
            d1Databases: ["DB"],
            bindings: options.vars ?? {},
            queueProducers: { HANDOFF: "clawless-turns" },
            // Its own port: the tests post webhooks to it as Telegram would.
            unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
          },
        ]
      : []),
    { name: "vectorize-mock", modules: true, script: vectorizeMock },
    { name: "ai-mock", modules: true, script: aiMock },
  ],
});
const url = (await mf.ready).toString().replace(/\/$/, "");
const front = options.front ? (await mf.unsafeGetDirectURL("front")).toString().replace(/\/$/, "") : undefined;

const control = http.createServer(async (req, res) => {
  let body = "";
  for await (const chunk of req) body += chunk;
  try {
    let out;
    if (req.url === "/scheduled") {
      const worker = await mf.getWorker("main");
      out = await worker.scheduled({ cron: "* * * * *" });
    } else if (req.url === "/sql") {
      const db = await mf.getD1Database("DB");
      out = (await db.prepare(body).all()).results;
    } else {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(out ?? null));
  } catch (e) {
    res.writeHead(500).end(String(e?.stack ?? e));
  }
});
control.listen(0, "127.0.0.1", () => {
  console.log(JSON.stringify({ url, control: `http://127.0.0.1:${control.address().port}`, front }));
});

let closing = false;
async function shutdown() {
  if (closing) return;
  closing = true;
  control.close();
  await mf.dispose();
  process.exit(0);
}
process.stdin.on("end", shutdown);
process.stdin.on("close", shutdown);
process.stdin.resume();
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
