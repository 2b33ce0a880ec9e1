// Dashboard cost with many GPUs (docs/performance.md): a real `stoker up` with the history in
// 1 s buckets, NODES-1 more registered nodes of 8 GPUs whose heartbeats (samples cloned from the
// simulated node's, utilization varied) fill the heatmap's whole span for the time of the
// measurement, then the heatmap in headless Chromium: first paint (navigation to the heatmap
// drawn), the API answer's size and time, what each auto-refresh costs (fetch, draw), and a
// zoom. With --compare DIR (the `dist/` of another build of the front end, e.g. an older commit)
// the same page is measured from both front ends, alternating, against the same server, so the
// two are compared in one run on the same data.
//
//   node perf.mjs --stoker BUILD/bin/stoker [--nodes 125] [--span 240] [--refreshes 3]
//                 [--rounds 2] [--compare OLD_DIST] [--artifacts DIR]
//
// The samples are stamped from SPAN seconds ago to almost 5 minutes ahead (the server takes
// samples within 5 minutes of its clock), ten seconds of them per heartbeat, so the span stays
// covered while the pages are measured; each measurement says how much of it was covered.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs, startBrowser, startUp } from "./harness.mjs";

const args = parseArgs(process.argv.slice(2));
const nodesWanted = Number(args.nodes ?? 125);
const spanS = Number(args.span ?? 240);
const refreshes = Number(args.refreshes ?? 3);
const rounds = Number(args.rounds ?? (args.compare ? 2 : 1));
const aheadS = 285;
const perHeartbeat = 10;
const artifacts = args.artifacts ?? os.tmpdir();
fs.mkdirSync(artifacts, { recursive: true });

const up = await startUp(args.stoker, ["--dashboard-bucket", "1s"], {}, { nodeTimeoutS: 900 });
let b;
const api = async (method, p, tok, body) => {
  const res = await fetch(`${up.base}/api/v1${p}`, {
    method,
    headers: { Authorization: `Bearer ${tok}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text.slice(0, 200)}`);
  return text ? JSON.parse(text) : null;
};

// In the page: the device-pixel lines of the chart, down its middle, on which any of its canvases
// (ECharts draws progressive renders on a layer of their own) has paint; the cells are most of
// them, the axis line and zoom slider a few.
function paintedLines() {
  const canvases = [...document.querySelectorAll("#heatmap canvas")];
  if (!canvases.length) return null;
  const { width, height } = canvases[0];
  const lines = new Uint8Array(height);
  for (const c of canvases) {
    if (c.width !== width || c.height !== height) continue;
    const d = c.getContext("2d").getImageData(Math.floor(width / 2), 0, 1, height).data;
    for (let y = 0; y < height; y++) if (d[4 * y + 3] > 0) lines[y] = 1;
  }
  return { lines: height, painted: lines.reduce((a, v) => a + v, 0) };
}

// Serves the page's files from DIST instead of the server (the API still goes to the server).
async function serveFrom(page, dist) {
  await page.route(`${up.base}/**`, (route) => {
    const url = new URL(route.request().url());
    if (url.pathname.startsWith("/api/")) return route.continue();
    const file = path.join(dist, url.pathname === "/" ? "index.html" : url.pathname);
    if (!file.startsWith(dist) || !fs.existsSync(file)) return route.continue();
    const type = file.endsWith(".js") ? "text/javascript" : file.endsWith(".css") ? "text/css" : "text/html";
    return route.fulfill({ status: 200, contentType: type, body: fs.readFileSync(file) });
  });
}

async function measure(admin, variant, dist) {
  const page = await b.page(variant, { width: 1600, height: 1000 });
  if (dist) await serveFrom(page, dist);
  // Log in by storing the token as the login form does, then time a fresh load of the page.
  await page.goto(`${up.base}/`);
  await page.evaluate((t) => sessionStorage.setItem("stoker.token", t), admin);
  await page.goto(`${up.base}/#/?span=${spanS}s`);
  await page.reload();
  await page.waitForSelector('#heatmap[data-drawn="1"]', { timeout: 180000 });
  const first = await page.evaluate(() => {
    const nav = performance.getEntriesByType("navigation")[0];
    const fetchM = performance.getEntriesByName("heatmap-fetch")[0];
    const drawM = performance.getEntriesByName("heatmap-draw")[0];
    const fcp = performance.getEntriesByName("first-contentful-paint")[0];
    const host = document.querySelector("#heatmap");
    return {
      first_contentful_paint_ms: fcp ? Math.round(fcp.startTime) : null,
      heatmap_drawn_ms: Math.round(drawM.startTime + drawM.duration),
      dom_content_loaded_ms: Math.round(nav.domContentLoadedEventEnd),
      fetch_ms: Math.round(fetchM.duration),
      draw_ms: Math.round(drawM.duration),
      cells: Number(host.dataset.cells),
      rows: JSON.parse(host.dataset.rows).length,
    };
  });
  const out = { variant, first_load: first };
  // The auto-refresh redraws every 5 s; a redraw that does not finish in 60 s is reported as such.
  // Meanwhile the chart's canvases are read every 100 ms: how many of the cells' pixel lines are
  // painted, so a page that shows fewer rows than its data has (a redraw still under way, or
  // cells lost) shows in the numbers, not only in a screenshot.
  const painted = [];
  const deadline = Date.now() + 60000 * refreshes;
  for (;;) {
    const p = await page.evaluate(paintedLines);
    if (p) painted.push(p.painted);
    if ((await page.getAttribute("#heatmap", "data-drawn")) === String(refreshes + 1)) break;
    if (Date.now() > deadline) {
      out.refresh_note = `fewer than ${refreshes} redraws finished within ${60 * refreshes} s`;
      break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  Object.assign(
    out,
    await page.evaluate(() => ({
      refresh_fetch_ms: performance.getEntriesByName("heatmap-fetch").slice(1).map((m) => Math.round(m.duration)),
      refresh_draw_ms: performance.getEntriesByName("heatmap-draw").slice(1).map((m) => Math.round(m.duration)),
      cells_last: Number(document.querySelector("#heatmap").dataset.cells),
      js_heap_mb: performance.memory ? Math.round(performance.memory.usedJSHeapSize / 1e6) : null,
    })),
  );
  out.window_covered = Number((out.cells_last / (1000 * spanS)).toFixed(3));
  // A zoom with the mouse wheel over the cells: from the wheel to the chart rendered again
  // (front ends that count renders only: data-rendered).
  const rendered = await page.getAttribute("#heatmap", "data-rendered");
  if (rendered !== null) {
    const box = await page.locator("#heatmap canvas").first().boundingBox();
    await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5);
    const zooms = [];
    for (let i = 0; i < 3; i++) {
      const before = Number(await page.getAttribute("#heatmap", "data-rendered"));
      const t0 = Date.now();
      await page.mouse.wheel(0, i % 2 ? 300 : -300);
      await page.waitForFunction((n) => Number(document.querySelector("#heatmap").dataset.rendered) > n, before, { timeout: 60000 });
      zooms.push(Date.now() - t0);
    }
    out.zoom_ms = zooms;
  }
  await page.screenshot({ path: path.join(artifacts, `heatmap-1000-${variant}.png`) });
  const atShot = await page.evaluate(paintedLines);
  const most = Math.max(...painted, atShot?.painted ?? 0);
  out.painted_lines = {
    grid: atShot?.lines ?? null,
    most,
    least_during_refreshes: painted.length ? Math.min(...painted) : null,
    samples_below_most: painted.filter((p) => p < most).length,
    samples: painted.length,
    at_screenshot: atShot?.painted ?? null,
  };
  await page.context().close();
  return out;
}

try {
  const admin = await up.adminToken();
  const sim = await up.waitFor("the simulated node's samples", async () => {
    const n = await api("GET", "/nodes", admin);
    if (!n.length) return null;
    const one = await api("GET", `/nodes/${n[0].name}`, admin);
    return one.samples.length ? one : null;
  });
  const template = sim.samples;
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
  const now = Math.floor(Date.now() / 1000);
  const t0 = Date.now();
  let posted = 0;
  const sample = (s, name, k, i, t) => ({
    ...s,
    uuid: `GPU-${name}-${i}`,
    index: i,
    timestamp_unix: t,
    // Only what the heatmap draws (a real agent sends every field; the server takes any subset).
    fields: {
      util_gpu_pct: { state: "value", value: Math.round(50 + 50 * Math.sin((t + k * 7 + i) / 20)) },
      memory_total_bytes: s.fields.memory_total_bytes,
      memory_used_bytes: s.fields.memory_used_bytes,
    },
    processes: [],
    mig_instances: [],
  });
  // Each node's heartbeats in time order (a bucket older than the GPU's newest is not written
  // again), nodes spread over 16 workers, 16 heartbeats in flight.
  const first = now - spanS + 1;
  const last = now + aheadS;
  await Promise.all(
    Array.from({ length: 16 }, async (_, w) => {
      const mine = names.map((name, k) => [name, k]).filter(([, k]) => k % 16 === w);
      for (let from = first; from <= last; from += perHeartbeat) {
        for (const [name, k] of mine) {
          const samples = [];
          for (let t = from; t < from + perHeartbeat && t <= last; t++) template.forEach((s, i) => samples.push(sample(s, name, k, i, t)));
          const body = JSON.stringify({ jobs: [], samples });
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
      }
    }),
  );
  const backfillS = (Date.now() - t0) / 1000;
  const metrics = await (await fetch(`${up.base}/metrics`, { headers: { Authorization: `Bearer ${admin}` } })).text();
  const refused = metrics.split("\n").filter((l) => l.startsWith("stoker_server_heartbeat_samples_refused_total"));
  const h0 = performance.now();
  const histText = await (await fetch(`${up.base}/api/v1/history/gpus?window=${spanS}s&points=240`, { headers: { Authorization: `Bearer ${admin}` } })).text();
  const histMs = performance.now() - h0;
  const hist = JSON.parse(histText);
  const rowsWithData = hist.gpus.filter((g) => g.util.some((v) => v !== null)).length;

  b = await startBrowser(args.chromium ?? "/usr/bin/chromium", up.base);
  const results = [];
  for (let r = 0; r < rounds; r++) {
    if (args.compare) results.push(await measure(admin, `compare-${r}`, path.resolve(args.compare)));
    results.push(await measure(admin, `this-${r}`, null));
  }
  console.log(
    JSON.stringify(
      {
        gpus: nodesWanted * template.length,
        span_s: spanS,
        heartbeats_posted: posted,
        samples_per_heartbeat: perHeartbeat * template.length,
        backfill_s: backfillS,
        samples_refused: refused,
        history_api: { ms: Math.round(histMs), bytes: histText.length, gpus: hist.gpus.length, rows_with_data: rowsWithData, columns: hist.columns },
        load_average: os.loadavg().map((x) => Number(x.toFixed(1))),
        pages: results,
      },
      null,
      1,
    ),
  );
} catch (e) {
  process.exitCode = 1;
  console.error(e);
} finally {
  if (b) await b.close();
  await up.stop();
}
