// The cluster heatmap: one row per GPU (node x GPU), one column per time bucket, coloured by
// utilization, SM activity or memory use; zones and alerts marked on the rows; the job and user
// of each cell on hover; zoom and pan in time (mouse wheel / drag, or the slider) and, with many
// GPUs, over the rows (shift + wheel, or the slider on the right).
//
// ECharts draws the axes, zoom, colour scale and tooltip. The cells are one image of a custom
// series, painted from the data at the grid's pixel size each time ECharts lays the chart out:
// a series of one element per cell (ECharts' heatmap) costs seconds of main-thread time per
// redraw at 1,000 GPUs x 240 columns, an image a few milliseconds (docs/performance.md).
import { get, type Alert, type Allocation, type GpuHistory, type Node, type Zones } from "./api";
import { chartIn, color, type Option } from "./charts";
import { el, fmtClock, fmtTime, simulatedBadge } from "./util";

type Metric = "util" | "sm" | "mem";
const METRIC_NAMES: Record<Metric, string> = {
  util: "GPU utilization %",
  sm: "SM activity %",
  mem: "memory used %",
};
const ZONE_MARK: Record<string, string> = { gold: "●", silver: "◐", bronze: "○", hot: "▲", unknown: "?" };
const COLOURS = ["#1e2a44", "#2f6db5", "#46b37a", "#f2c14e", "#e4572e"];
const NO_DATA = 255;

export interface HeatmapState {
  metric: Metric;
  window: string;
}

export function heatmapControls(state: HeatmapState, onChange: () => void): HTMLElement {
  const metric = el("select", { id: "metric" }) as HTMLSelectElement;
  for (const m of Object.keys(METRIC_NAMES) as Metric[]) {
    const o = el("option", { value: m }, METRIC_NAMES[m]);
    if (m === state.metric) o.setAttribute("selected", "");
    metric.append(o);
  }
  metric.addEventListener("change", () => {
    state.metric = metric.value as Metric;
    onChange();
  });
  const win = el("select", { id: "window" }) as HTMLSelectElement;
  const spans = ["15m", "1h", "6h", "24h"];
  if (!spans.includes(state.window)) spans.unshift(state.window);
  for (const w of spans) {
    const o = el("option", { value: w }, `last ${w}`);
    if (w === state.window) o.setAttribute("selected", "");
    win.append(o);
  }
  win.addEventListener("change", () => {
    state.window = win.value;
    onChange();
  });
  return el("div", { class: "controls" }, el("label", {}, "colour by ", metric), el("label", {}, "span ", win));
}

// One pixel colour (RGBA bytes in memory order) per percent 0..100, from the same colour stops
// as the visual map; values outside [lo, hi] (the visual map's handles) are drawn faint.
function colourTable(lo: number, hi: number): Uint32Array {
  const lut = new Uint32Array(256);
  const little = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
  for (let v = 0; v <= 100; v++) {
    const [r, g, b] = color.parse(color.lerp(v / 100, COLOURS) as string) as number[];
    const a = v < lo || v > hi ? 40 : 255;
    lut[v] = little ? ((a << 24) | (b << 16) | (g << 8) | r) >>> 0 : ((r << 24) | (g << 16) | (b << 8) | a) >>> 0;
  }
  lut[NO_DATA] = 0;  // no sample: transparent
  return lut;
}

// The cells as bytes, row-major in the chart's row order (row 0 at the bottom): 0..100 or NO_DATA.
interface Cells {
  rows: number;
  columns: number;
  values: Uint8Array;
  version: number;
}

// Paints the cells that fall inside the grid into a new canvas at device resolution, each device
// pixel taking the cell under its centre (so cells stay sharp at any zoom), with a one-pixel gap
// between cells once they are at least 6 device pixels tall or wide.
function paintCells(
  cells: Cells,
  lut: Uint32Array,
  full: { left: number; top: number; cellW: number; cellH: number },
  clip: { x: number; y: number; width: number; height: number },
): { canvas: HTMLCanvasElement; x: number; y: number; width: number; height: number } | null {
  const dpr = window.devicePixelRatio || 1;
  const left = Math.max(clip.x, full.left);
  const right = Math.min(clip.x + clip.width, full.left + cells.columns * full.cellW);
  const top = Math.max(clip.y, full.top);
  const bottom = Math.min(clip.y + clip.height, full.top + cells.rows * full.cellH);
  const w = Math.round((right - left) * dpr);
  const h = Math.round((bottom - top) * dpr);
  if (w <= 0 || h <= 0) return null;
  const gapX = full.cellW * dpr >= 6;
  const gapY = full.cellH * dpr >= 6;
  const colOf = new Int32Array(w);
  for (let i = 0; i < w; i++) {
    const pos = (left + (i + 0.5) / dpr - full.left) / full.cellW;
    const c = Math.floor(pos);
    colOf[i] = c < 0 || c >= cells.columns || (gapX && (pos - c) * full.cellW * dpr > full.cellW * dpr - 1) ? -1 : c;
  }
  const canvas = document.createElement("canvas");
  canvas.width = w;
  canvas.height = h;
  const ctx = canvas.getContext("2d")!;
  const image = ctx.createImageData(w, h);
  const px = new Uint32Array(image.data.buffer);
  for (let j = 0; j < h; j++) {
    const pos = (top + (j + 0.5) / dpr - full.top) / full.cellH;
    const fromTop = Math.floor(pos);
    if (fromTop < 0 || fromTop >= cells.rows) continue;
    if (gapY && (pos - fromTop) * full.cellH * dpr > full.cellH * dpr - 1) continue;
    const base = (cells.rows - 1 - fromTop) * cells.columns;
    const line = j * w;
    for (let i = 0; i < w; i++) {
      const c = colOf[i];
      if (c >= 0) px[line + i] = lut[cells.values[base + c]];
    }
  }
  ctx.putImageData(image, 0, 0);
  return { canvas, x: left, y: top, width: right - left, height: bottom - top };
}

// Per host element: what the last refresh drew, for the tooltip and the repaint on zoom.
interface Drawn {
  cells: Cells;
  lut: Uint32Array;
  range: [number, number];
  tooltip: (col: number, row: number) => string;
  mouse: [number, number];
  listening: boolean;
  manyRows: boolean;
}
const drawnOf = new WeakMap<HTMLElement, Drawn>();

// Each refresh leaves performance measures "heatmap-fetch" (the API calls) and "heatmap-draw"
// (from the answers to the chart rendered), which docs/performance.md reports.
export async function drawHeatmap(host: HTMLElement, info: HTMLElement, state: HeatmapState): Promise<void> {
  const t0 = performance.now();
  const [hist, nodes, zones, alerts, allocs] = await Promise.all([
    get<GpuHistory>(`/history/gpus?window=${state.window}&points=240`),
    get<Node[]>("/nodes"),
    get<Zones>("/zones").catch(() => null),
    get<Alert[]>("/alerts").catch(() => [] as Alert[]),
    get<Allocation[]>("/allocations").catch(() => [] as Allocation[]),
  ]);
  const t1 = performance.now();
  performance.measure("heatmap-fetch", { start: t0, end: t1 });
  const nodeOf = new Map(nodes.map((n) => [n.name, n]));
  // Zones, like alerts, name a GPU by its UUID; rows are "node/index".
  const zoneByUuid = new Map((zones?.gpus ?? []).map((z) => [z.key, z]));
  const zoneOf = new Map<string, (typeof zones & object)["gpus"][number]>();
  for (const n of nodes) {
    for (const g of n.gpus) {
      const z = zoneByUuid.get(g.uuid);
      if (z) zoneOf.set(`${n.name}/${g.index}`, z);
    }
  }
  // Alerts name a GPU by its UUID (labels gpu and uuid) and its node by hostname.
  const gpuByUuid = new Map<string, string>();
  for (const n of nodes) {
    for (const g of n.gpus) {
      gpuByUuid.set(g.uuid, `${n.name}/${g.index}`);
      for (const m of g.mig ?? []) gpuByUuid.set(m.uuid, `${n.name}/${g.index}/${m.uuid}`);
    }
  }
  const alertedNodes = new Set<string>();
  const alertedGpus = new Set<string>();
  for (const a of alerts) {
    if (a.state !== "firing") continue;
    const gpu = gpuByUuid.get(a.labels.uuid ?? a.labels.gpu ?? "");
    if (gpu) alertedGpus.add(gpu);
    else if (a.labels.hostname && nodeOf.has(a.labels.hostname)) alertedNodes.add(a.labels.hostname);
  }
  const shared = new Map<string, number>();  // GPU -> jobs sharing it now (GPU shares, MIG)
  for (const al of allocs) {
    if (al.gpu_milli >= 1000 && !al.mig_uuid) continue;
    for (const g of al.gpu_indices) shared.set(`${al.node}/${g}`, (shared.get(`${al.node}/${g}`) ?? 0) + 1);
  }

  // Rows from the bottom up in ECharts, so reverse to read top-down by node and index, each MIG
  // GPU followed by its instances.
  const slice = (g: GpuHistory["gpus"][number]) => g.mig_instance?.uuid ?? "";
  const rows = [...hist.gpus]
    .sort((a, b) => a.node.localeCompare(b.node) || a.index - b.index || slice(a).localeCompare(slice(b)))
    .reverse();
  const rowKeys = rows.map((g) => `${g.node}/${g.index}${g.mig_instance ? "/" + g.mig_instance.uuid : ""}`);
  const rowLabels = rows.map((g, i) => {
    const key = rowKeys[i];
    const z = zoneOf.get(key);
    const marks = [z ? ZONE_MARK[z.zone] ?? "" : "", alertedGpus.has(key) || alertedNodes.has(g.node) ? "⚠" : ""]
      .filter(Boolean)
      .join(" ");
    const sim = nodeOf.get(g.node)?.simulated ? " (sim)" : "";
    if (g.mig_instance) return `${marks} └ MIG ${g.mig_instance.profile}${sim}`.trim();
    const kind = g.mig ? " MIG" : shared.has(key) ? ` shared×${shared.get(key)}` : "";
    return `${marks} ${g.node}/gpu${g.index}${kind}${sim}`.trim();
  });
  const times: number[] = [];
  for (let c = 0; c < hist.columns; c++) times.push(hist.start_ms + c * hist.step_ms);
  const values = new Uint8Array(rows.length * hist.columns).fill(NO_DATA);
  const cellsPerRow = new Int32Array(rows.length);
  let cellCount = 0;
  rows.forEach((g, y) => {
    const series = g[state.metric];
    const base = y * hist.columns;
    for (let x = 0; x < series.length && x < hist.columns; x++) {
      const v = series[x];
      if (v === null || v === undefined) continue;
      values[base + x] = Math.max(0, Math.min(100, Math.round(v)));
      cellsPerRow[y]++;
      cellCount++;
    }
  });
  // What the browser test (and a curious reader) can check: the rows drawn and their cells.
  host.dataset.rows = JSON.stringify(rowKeys.filter((_, i) => cellsPerRow[i] > 0));
  host.dataset.cells = String(cellCount);
  host.dataset.zones = JSON.stringify(Object.fromEntries(rowKeys.filter((k) => zoneOf.has(k)).map((k) => [k, zoneOf.get(k)!.zone])));
  host.dataset.alerted = JSON.stringify(rowKeys.filter((k, i) => alertedGpus.has(k) || alertedNodes.has(rows[i].node)));

  const anySimulated = nodes.some((n) => n.simulated);
  const unknownZones = (zones?.gpus ?? []).filter((z) => z.zone === "unknown");
  info.replaceChildren(
    el(
      "span",
      {},
      `${rows.filter((r) => !r.mig_instance).length} GPUs${rows.some((r) => r.mig_instance) ? ` and ${rows.filter((r) => r.mig_instance).length} MIG instances` : ""} on ${new Set(rows.map((r) => r.node)).size} nodes · ${hist.columns} columns of ${Math.round(hist.step_ms / 1000)} s · up to ${fmtTime(hist.now_ms)}`,
    ),
    anySimulated ? simulatedBadge() : "",
    hist.dropped_gpus > 0 ? el("span", { class: "warn" }, ` ${hist.dropped_gpus} GPU samples beyond the history's limit`) : "",
    unknownZones.length > 0 && zones
      ? el(
          "span",
          { class: "muted", id: "unknown-zones" },
          ` ${unknownZones.length} GPU zones unknown: ${coverageNote(unknownZones, zones)}`,
        )
      : "",
    el("span", { class: "legend" }, " zones: ● gold ◐ silver ○ bronze ▲ hot ? unknown · ⚠ alert firing"),
  );

  const chart = chartIn(host);
  const manyRows = rows.length > 48;
  const height = Math.max(240, Math.min(rows.length * 18 + 110, 900));
  if (host.style.height !== `${height}px`) {
    host.style.height = `${height}px`;
    chart.resize();
  }
  const previous = drawnOf.get(host);
  const range: [number, number] = previous?.range ?? [0, 100];
  const drawn: Drawn = {
    cells: { rows: rows.length, columns: hist.columns, values, version: (previous?.cells.version ?? 0) + 1 },
    lut: previous && previous.range[0] === range[0] && previous.range[1] === range[1] ? previous.lut : colourTable(range[0], range[1]),
    range,
    mouse: previous?.mouse ?? [-1, -1],
    listening: previous?.listening ?? false,
    manyRows,
    tooltip: (col, row) => {
      const g = rows[row];
      if (!g || col < 0 || col >= hist.columns) return "";
      const v = g[state.metric][col];
      const jobId = g.job[col] ?? 0;
      const z = zoneOf.get(rowKeys[row]);
      let job = "no job";
      if (jobId > 0) job = `job ${jobId} (${hist.job_users[String(jobId)] ?? "?"})`;
      else if (jobId < 0) job = "another user's job";
      const sim = nodeOf.get(g.node)?.simulated ? "<br/><i>simulated GPU</i>" : "";
      const zone = z
        ? `<br/>zone ${z.zone}${z.zone === "unknown" && zones ? ` (${coverageNote([z], zones)})` : ""}`
        : "";
      const reading = v === null || v === undefined ? "no sample" : `<b>${v}</b>`;
      const m = g.mig_instance;
      const what = m
        ? `${g.node} GPU ${g.index} ${g.name}, MIG instance ${m.profile} (${m.slices} slices)`
        : `${g.node} GPU ${g.index} ${g.name}${g.mig ? " (MIG mode)" : ""}`;
      const note = m && state.metric === "util" ? "<br/><i>utilization of a MIG instance is its SM activity (NVML has none per instance)</i>" : "";
      const sharers = !m && shared.has(rowKeys[row]) ? `<br/>shared now by ${shared.get(rowKeys[row])} jobs` : "";
      const power =
        !m && g.tflops_estimate != null && g.tflops_per_watt_estimate != null
          ? `<br/>latest sample: ${g.tflops_estimate.toFixed(1)} TFLOPS, ${g.tflops_per_watt_estimate.toFixed(3)} TFLOPS/W (estimates)`
          : "";
      return `${what}<br/>${fmtTime(times[col])}<br/>${METRIC_NAMES[state.metric]}: ${reading}${note}<br/>${job}${sharers}${power}${zone}${sim}`;
    },
  };
  drawnOf.set(host, drawn);
  if (!drawn.listening) {
    drawn.listening = true;
    // The tooltip names the cell under the pointer (the cells are one image to ECharts).
    chart.getZr().on("mousemove", (e) => {
      const d = drawnOf.get(host);
      if (d) d.mouse = [e.offsetX, e.offsetY];
    });
    // Every render (refresh, zoom, pan, resize) counts, for tests and tests/perf.mjs.
    chart.on("finished", () => {
      host.dataset.rendered = String((Number(host.dataset.rendered) || 0) + 1);
    });
    chart.on("datarangeselected", (e) => {
      const d = drawnOf.get(host);
      const sel = (e as { selected: [number, number] }).selected;
      if (!d || !sel) return;
      d.range = [sel[0], sel[1]];
      d.lut = colourTable(sel[0], sel[1]);
      d.cells = { ...d.cells, version: d.cells.version + 1 };
      chart.setOption({ series: [{ id: "cells", data: [[d.cells.version]] }] });
    });
  }

  const option: Option = {
    animation: false,
    grid: { left: 8, right: manyRows ? 100 : 70, top: 16, bottom: 70, containLabel: true },
    tooltip: {
      trigger: "item",
      formatter: () => {
        const d = drawnOf.get(host);
        if (!d) return "";
        const [x, y] = chart.convertFromPixel({ gridIndex: 0 }, d.mouse) as number[];
        return d.tooltip(Math.round(x), Math.round(y));
      },
    },
    xAxis: {
      type: "category",
      data: times.map((t) => fmtClock(t)),
      splitArea: { show: false },
    },
    yAxis: { type: "category", data: rowLabels, axisLabel: { fontSize: 11 } },
    visualMap: {
      min: 0,
      max: 100,
      range,
      calculable: true,
      realtime: true,
      orient: "vertical",
      right: manyRows ? 30 : 0,
      top: "middle",
      seriesIndex: [],
      inRange: { color: COLOURS },
    },
    // With ids, a refresh keeps where the user zoomed to.
    dataZoom: [
      { id: "x-inside", type: "inside", xAxisIndex: 0, filterMode: "none" },
      { id: "x-slider", type: "slider", xAxisIndex: 0, bottom: 10, height: 18, filterMode: "none" },
      ...(manyRows
        ? [
            { id: "y-inside", type: "inside", yAxisIndex: 0, filterMode: "none", zoomOnMouseWheel: "shift", moveOnMouseWheel: false, moveOnMouseMove: false },
            { id: "y-slider", type: "slider", yAxisIndex: 0, right: 4, width: 16, filterMode: "none" },
          ]
        : []),
    ],
    series: [
      {
        id: "cells",
        name: METRIC_NAMES[state.metric],
        type: "custom",
        clip: true,
        data: [[drawn.cells.version]],
        renderItem: (params: unknown, api: unknown) => {
          const d = drawnOf.get(host);
          const a = api as { coord: (v: number[]) => number[]; size: (v: number[]) => number[] };
          const grid = (params as { coordSys: { x: number; y: number; width: number; height: number } }).coordSys;
          if (!d || d.cells.rows === 0 || d.cells.columns === 0) return null;
          const [cellW, cellH] = a.size([1, 1]);
          const [cx, cy] = a.coord([0, d.cells.rows - 1]);
          const painted = paintCells(d.cells, d.lut, { left: cx - cellW / 2, top: cy - cellH / 2, cellW, cellH }, grid);
          if (!painted) return null;
          return {
            type: "image",
            style: { image: painted.canvas, x: painted.x, y: painted.y, width: painted.width, height: painted.height },
          };
        },
      },
    ],
  };
  const rendered = new Promise<void>((resolve) => {
    const done = () => {
      chart.off("finished", done);
      window.clearTimeout(timer);
      resolve();
    };
    // A chart that draws nothing (hidden tab, zero size) may never say it finished.
    const timer = window.setTimeout(done, 10000);
    chart.on("finished", done);
  });
  const replace = previous && previous.manyRows !== manyRows ? ["series", "dataZoom"] : ["series"];
  chart.setOption(option, { replaceMerge: replace, lazyUpdate: false });
  await rendered;
  performance.measure("heatmap-draw", { start: t1, end: performance.now() });
  host.dataset.drawn = String((Number(host.dataset.drawn) || 0) + 1);
}

// Why zones are still unknown: a zone is decided once its window holds `min_coverage` of samples;
// this says how much the unknown ones have.
export function coverageNote(unknown: { covered_s: number }[], zones: { window: string; min_coverage?: string }): string {
  const least = Math.round(Math.min(...unknown.map((z) => z.covered_s)));
  const most = Math.round(Math.max(...unknown.map((z) => z.covered_s)));
  const span = least === most ? `${least} s` : `${least}-${most} s`;
  const need = zones.min_coverage ? ` of the ${zones.min_coverage} needed` : "";
  return `${span} of samples covered${need} (zone window ${zones.window})`;
}
