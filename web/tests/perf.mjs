// Dashboard cost with many GPUs (docs/performance.md): a real `stoker up` with the history in
// 1 s buckets, NODES-1 more registered nodes of 8 GPUs whose heartbeats (samples cloned from the
// simulated node's, utilization varied) fill the last WINDOW seconds, then the heatmap in
// headless Chromium: first paint (navigation to the heatmap drawn), the API answer's size and
// time, and what each auto-refresh costs (fetch, draw) over a few refreshes.
//
//   node perf.mjs --stoker BUILD/bin/stoker [--nodes 125] [--window 240] [--refreshes 4]
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const nodesWanted = Number(args.nodes ?? 125);
const windowS = Number(args.window ?? 240);
const refreshes = Number(args.refreshes ?? 4);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const port = await new Promise((resolve) => {
  const s = net.createServer();
  s.listen(0, "127.0.0.1", () => {
    const p = s.address().port;
    s.close(() => resolve(p));
  });
});
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stoker-perf-"));
const base = `http://127.0.0.1:${port}`;
const env = { ...process.env, XDG_CONFIG_HOME: path.join(dir, "config") };
delete env.STOKER_SERVER;
delete env.STOKER_TOKEN;
const up = spawn(
  args.stoker,
  ["up", "--data-dir", path.join(dir, "data"), "--listen", `127.0.0.1:${port}`, "--node-timeout", "600", "--dashboard-bucket", "1s"],
  { env, stdio: ["ignore", fs.openSync(path.join(dir, "up.log"), "w"), "ignore"] },
);
async function api(method, p, tok, body) {
  const res = await fetch(`${base}/api/v1${p}`, {
    method,
    headers: { Authorization: `Bearer ${tok}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text.slice(0, 200)}`);
  return text ? JSON.parse(text) : null;
}
async function until(fn) {
  for (let i = 0; i < 600; i++) {
    try {
      const v = await fn();
      if (v) return v;
    } catch {}
    await sleep(200);
  }
  throw new Error("timed out");
}
let browser;
try {
  const admin = await until(() => fs.readFileSync(path.join(dir, "data", "admin.token"), "utf8").trim());
  const sim = await until(async () => {
    const n = await api("GET", "/nodes", admin);
    if (!n.length) return null;
    const one = await api("GET", `/nodes/${n[0].name}`, admin);
    return one.samples.length ? one : null;
  });
  const template = sim.samples;
  const now = Date.now() / 1000;
  const names = [];
  for (let n = 1; n < nodesWanted; n++) {
    const name = `perf-${String(n).padStart(3, "0")}`;
    names.push(name);
    await api("POST", "/nodes/register", admin, {
      name,
      simulated: true,
      source: "perf",
      cpu_milli: 64000,
      memory_mib: 512 * 1024,
      gpus: template.map((s, i) => ({ index: i, uuid: `GPU-${name}-${i}`, model: s.name, memory_mib: 81920, mig_enabled: false })),
    });
  }
  const t0 = Date.now();
  let posted = 0;
  // One queue per node, oldest sample first (a bucket older than the GPU's newest is not
  // written again), and nodes spread over 16 workers.
  const queues = names.map(() => []);
  for (let t = now - windowS + 1; t <= now; t += 1) {
    for (const [k, name] of names.entries()) {
      const samples = template.map((s, i) => {
        const c = structuredClone(s);
        c.uuid = `GPU-${name}-${i}`;
        c.index = i;
        c.timestamp_unix = t;
        // Only what the heatmap draws (a real agent sends every field; the server takes any subset).
        c.fields = {
          util_gpu_pct: { state: "value", value: Math.round(50 + 50 * Math.sin((t + k * 7 + i) / 20)) },
          memory_total_bytes: s.fields.memory_total_bytes,
          memory_used_bytes: s.fields.memory_used_bytes,
        };
        c.processes = [];
        c.mig_instances = [];
        return c;
      });
      queues[k].push(JSON.stringify({ jobs: [], samples }));
    }
  }
  // 16 heartbeats in flight at a time.
  await Promise.all(
    Array.from({ length: 16 }, async (_, w) => {
      const mine = names.map((name, k) => [name, k]).filter(([, k]) => k % 16 === w);
      for (let step = 0; step < windowS; step++) for (const [name, k] of mine) {
        const body = queues[k][step];
        for (let attempt = 0; ; attempt++) {
          try {
            await api("POST", `/nodes/${name}/heartbeat`, admin, body);
            break;
          } catch (e) {
            if (attempt >= 3) throw e;  // a closed keep-alive connection: try again
          }
        }
        posted++;
      }
    }),
  );
  const backfillS = (Date.now() - t0) / 1000;
  const gpus = nodesWanted * template.length;
  const t1 = performance.now();
  const hist = await fetch(`${base}/api/v1/history/gpus?window=${windowS}s&points=240`, { headers: { Authorization: `Bearer ${admin}` } });
  const histText = await hist.text();
  const histMs = performance.now() - t1;
  const histJson = JSON.parse(histText);

  browser = await chromium.launch({ executablePath: args.chromium ?? "/usr/bin/chromium", headless: true, args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"] });
  const page = await (await browser.newContext({ viewport: { width: 1600, height: 1000 } })).newPage();
  // Log in by storing the token as the login form does, then time a fresh load of the page.
  await page.goto(`${base}/`);
  await page.evaluate((t) => sessionStorage.setItem("stoker.token", t), admin);
  await page.goto(`${base}/#/?span=${windowS}s`);
  await page.reload();
  await page.waitForSelector('#heatmap[data-drawn="1"]', { timeout: 120000 });
  const first = await page.evaluate(() => {
    const nav = performance.getEntriesByType("navigation")[0];
    const fetchM = performance.getEntriesByName("heatmap-fetch")[0];
    const drawM = performance.getEntriesByName("heatmap-draw")[0];
    const fcp = performance.getEntriesByName("first-contentful-paint")[0];
    return {
      first_contentful_paint_ms: fcp ? fcp.startTime : null,
      heatmap_drawn_ms: drawM.startTime + drawM.duration,
      dom_content_loaded_ms: nav.domContentLoadedEventEnd,
      fetch_ms: fetchM.duration,
      draw_ms: drawM.duration,
      cells: Number(document.querySelector("#heatmap").dataset.cells),
      rows: JSON.parse(document.querySelector("#heatmap").dataset.rows).length,
    };
  });
  await page.waitForSelector(`#heatmap[data-drawn="${refreshes + 1}"]`, { timeout: 120000 });
  const later = await page.evaluate(() => ({
    fetch_ms: performance.getEntriesByName("heatmap-fetch").slice(1).map((m) => Math.round(m.duration)),
    draw_ms: performance.getEntriesByName("heatmap-draw").slice(1).map((m) => Math.round(m.duration)),
    js_heap_mb: performance.memory ? Math.round(performance.memory.usedJSHeapSize / 1e6) : null,
  }));
  await page.screenshot({ path: path.join(args.artifacts ?? os.tmpdir(), "heatmap-1000.png") });
  console.log(
    JSON.stringify(
      {
        gpus,
        window_s: windowS,
        heartbeats_posted: posted,
        backfill_s: backfillS,
        history_api: { ms: Math.round(histMs), bytes: histText.length, gpus: histJson.gpus.length, columns: histJson.columns },
        first_load: first,
        refreshes: later,
      },
      null,
      1,
    ),
  );
} finally {
  if (browser) await browser.close();
  up.kill("SIGTERM");
  await new Promise((r) => up.on("exit", r));
  fs.rmSync(dir, { recursive: true, force: true });
}
