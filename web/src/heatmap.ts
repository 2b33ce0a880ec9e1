// The cluster heatmap: one row per GPU (node x GPU), one column per time bucket, coloured by
// utilization, SM activity or memory use; zones and alerts marked on the rows; the job and user
// of each cell on hover; zoom and pan in time (mouse wheel / drag, or the slider).
import { get, type Alert, type Allocation, type GpuHistory, type Node, type Zones } from "./api";
import { chartIn, type Option } from "./charts";
import { el, fmtClock, fmtTime, simulatedBadge } from "./util";

type Metric = "util" | "sm" | "mem";
const METRIC_NAMES: Record<Metric, string> = {
  util: "GPU utilization %",
  sm: "SM activity %",
  mem: "memory used %",
};
const ZONE_MARK: Record<string, string> = { gold: "●", silver: "◐", bronze: "○", hot: "▲", unknown: "?" };

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

// Each refresh leaves performance measures "heatmap-fetch" (the API calls) and "heatmap-draw"
// (building the option and ECharts rendering every cell), which docs/performance.md reports.
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
  const zoneOf = new Map((zones?.gpus ?? []).map((z) => [z.key, z]));
  const alertedNodes = new Set<string>();
  const alertedGpus = new Set<string>();
  for (const a of alerts) {
    if (a.state !== "firing") continue;
    if (a.labels.node && a.labels.gpu !== undefined) alertedGpus.add(`${a.labels.node}/${a.labels.gpu}`);
    else if (a.labels.node) alertedNodes.add(a.labels.node);
    else if (a.subject.includes("/")) alertedGpus.add(a.subject);
  }
  const shared = new Map<string, number>();  // GPU -> jobs sharing it now (GPU shares, MIG)
  for (const al of allocs) {
    if (al.gpu_milli >= 1000 && !al.mig_uuid) continue;
    for (const g of al.gpu_indices) shared.set(`${al.node}/${g}`, (shared.get(`${al.node}/${g}`) ?? 0) + 1);
  }

  // Rows from the bottom up in ECharts, so reverse to read top-down by node and index.
  const rows = [...hist.gpus].sort((a, b) => a.node.localeCompare(b.node) || a.index - b.index).reverse();
  const rowKeys = rows.map((g) => `${g.node}/${g.index}`);
  const rowLabels = rows.map((g, i) => {
    const key = rowKeys[i];
    const z = zoneOf.get(key);
    const marks = [z ? ZONE_MARK[z.zone] ?? "" : "", alertedGpus.has(key) || alertedNodes.has(g.node) ? "⚠" : ""]
      .filter(Boolean)
      .join(" ");
    const kind = g.mig ? " MIG" : shared.has(key) ? ` shared×${shared.get(key)}` : "";
    const sim = nodeOf.get(g.node)?.simulated ? " (sim)" : "";
    return `${marks} ${g.node}/gpu${g.index}${kind}${sim}`.trim();
  });
  const times: number[] = [];
  for (let c = 0; c < hist.columns; c++) times.push(hist.start_ms + c * hist.step_ms);
  const data: [number, number, number][] = [];
  const cellsPerRow: number[] = rows.map(() => 0);
  rows.forEach((g, y) => {
    const series = g[state.metric];
    for (let x = 0; x < series.length; x++) {
      const v = series[x];
      if (v === null || v === undefined) continue;
      data.push([x, y, v]);
      cellsPerRow[y]++;
    }
  });
  // What the browser test (and a curious reader) can check: the rows drawn and their cells.
  host.dataset.rows = JSON.stringify(rowKeys.filter((_, i) => cellsPerRow[i] > 0));
  host.dataset.cells = String(data.length);

  const anySimulated = nodes.some((n) => n.simulated);
  info.replaceChildren(
    el(
      "span",
      {},
      `${rows.length} GPUs on ${new Set(rows.map((r) => r.node)).size} nodes · ${hist.columns} columns of ${Math.round(hist.step_ms / 1000)} s · up to ${fmtTime(hist.now_ms)}`,
    ),
    anySimulated ? simulatedBadge() : "",
    hist.dropped_gpus > 0 ? el("span", { class: "warn" }, ` ${hist.dropped_gpus} GPU samples beyond the history's limit`) : "",
    el("span", { class: "legend" }, " zones: ● gold ◐ silver ○ bronze ▲ hot ? unknown · ⚠ alert firing"),
  );

  const chart = chartIn(host);
  const height = Math.max(240, Math.min(rows.length * 18 + 110, 900));
  if (host.style.height !== `${height}px`) {
    host.style.height = `${height}px`;
    chart.resize();
  }
  const option: Option = {
    animation: false,
    grid: { left: 8, right: 70, top: 16, bottom: 70, containLabel: true },
    tooltip: {
      position: "top",
      formatter: (p: unknown) => {
        const d = (p as { data: [number, number, number] }).data;
        const g = rows[d[1]];
        const jobId = g.job[d[0]] ?? 0;
        const z = zoneOf.get(rowKeys[d[1]]);
        let job = "no job";
        if (jobId > 0) job = `job ${jobId} (${hist.job_users[String(jobId)] ?? "?"})`;
        else if (jobId < 0) job = "another user's job";
        const sim = nodeOf.get(g.node)?.simulated ? "<br/><i>simulated GPU</i>" : "";
        const zone = z
          ? `<br/>zone ${z.zone}${z.zone === "unknown" ? ` (${Math.round(z.covered_s)} s of ${zones?.window ?? "the window"} covered)` : ""}`
          : "";
        return `${g.node} GPU ${g.index} ${g.name}<br/>${fmtTime(times[d[0]])}<br/>${METRIC_NAMES[state.metric]}: <b>${d[2]}</b><br/>${job}${zone}${sim}`;
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
      calculable: true,
      orient: "vertical",
      right: 0,
      top: "middle",
      inRange: { color: ["#1e2a44", "#2f6db5", "#46b37a", "#f2c14e", "#e4572e"] },
    },
    dataZoom: [
      { type: "inside", xAxisIndex: 0, filterMode: "none" },
      { type: "slider", xAxisIndex: 0, bottom: 10, height: 18, filterMode: "none" },
    ],
    series: [
      {
        name: METRIC_NAMES[state.metric],
        type: "heatmap",
        data,
        progressive: 20000,
        emphasis: { itemStyle: { borderColor: "#fff", borderWidth: 1 } },
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
  chart.setOption(option, { replaceMerge: ["series"], lazyUpdate: false });
  await rendered;
  performance.measure("heatmap-draw", { start: t1, end: performance.now() });
  host.dataset.drawn = String((Number(host.dataset.drawn) || 0) + 1);
}
