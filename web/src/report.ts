// The charts of the HTML efficiency report (`stoker report --html FILE`, GET /report?format=html),
// drawn with the dashboard's charting library. The report's C++ writer (efficiency/report.cc)
// puts this script, built as one self-contained file (vite.report.config.ts), and the report's
// JSON into the page, so the file works offline and can be mailed. Each chart goes into the
// element with its id when the page has it:
//   #chart-cluster  mean GPU activity and stranded free GPUs over time
//   #chart-fgd      the scheduler's fragmentation (FGD measure) over time, when recorded
//   #chart-owners   allocated vs used GPU-hours by user
//   #chart-cost     cost by team
import * as echarts from "echarts/core";
import { BarChart, LineChart } from "echarts/charts";
import { DataZoomComponent, GridComponent, LegendComponent, TooltipComponent } from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";

echarts.use([BarChart, LineChart, DataZoomComponent, GridComponent, LegendComponent, TooltipComponent, CanvasRenderer]);

interface Owner {
  name: string;
  alloc_gpu_hours: number;
  used_gpu_hours: number;
  idle_gpu_hours: number;
  cost: number;
}
interface ReportData {
  from: string;
  to: string;
  timeline: { start: string; avg_activity_pct: number; fragmentation_pct: number | null; fgd_fragmentation_pct: number | null }[];
  users: Owner[];
  teams: Owner[];
}

function chart(id: string, height: number): echarts.ECharts | null {
  const host = document.getElementById(id);
  if (!host) return null;
  host.style.width = "100%";
  host.style.maxWidth = "960px";
  host.style.height = `${height}px`;
  const c = echarts.init(host, undefined, { renderer: "canvas" });
  window.addEventListener("resize", () => c.resize());
  return c;
}

function timeSeries(points: [number, number | null][]): [number, number | null][] {
  return points.map(([t, v]) => [t, v === null ? null : Number(v.toFixed(2))]);
}

function draw(r: ReportData): void {
  const t = r.timeline.map((b) => Date.parse(b.start));
  const line = (name: string, values: (number | null)[]) => ({
    name,
    type: "line",
    showSymbol: values.length < 3,
    connectNulls: false,
    data: timeSeries(values.map((v, i) => [t[i], v])),
  });
  const common = {
    animation: false,
    tooltip: { trigger: "axis", valueFormatter: (v: unknown) => (typeof v === "number" ? `${v.toFixed(1)} %` : "–") },
    legend: { top: 0 },
    grid: { left: 50, right: 30, top: 40, bottom: 60 },
    xAxis: { type: "time", min: Date.parse(r.from), max: Date.parse(r.to) },
    yAxis: { type: "value", min: 0, max: 100, axisLabel: { formatter: "{value} %" } },
    dataZoom: [{ type: "inside" }, { type: "slider" }],
  };
  chart("chart-cluster", 300)?.setOption({
    ...common,
    series: [
      line("mean GPU activity %", r.timeline.map((b) => b.avg_activity_pct)),
      line("stranded free GPUs %", r.timeline.map((b) => b.fragmentation_pct)),
    ],
  });
  if (r.timeline.some((b) => b.fgd_fragmentation_pct !== null)) {
    chart("chart-fgd", 300)?.setOption({
      ...common,
      series: [
        line("mean GPU activity %", r.timeline.map((b) => b.avg_activity_pct)),
        line("GPUs the typical jobs cannot use, % of cluster", r.timeline.map((b) => b.fgd_fragmentation_pct)),
      ],
    });
  }
  const users = [...r.users].sort((a, b) => b.alloc_gpu_hours - a.alloc_gpu_hours);
  chart("chart-owners", Math.max(160, 28 * users.length + 80))?.setOption({
    animation: false,
    tooltip: { trigger: "axis", valueFormatter: (v: unknown) => (typeof v === "number" ? `${v.toFixed(2)} GPU-h` : "–") },
    legend: { top: 0 },
    grid: { left: 10, right: 60, top: 40, bottom: 20, containLabel: true },
    xAxis: { type: "value", name: "GPU-h" },
    yAxis: { type: "category", data: users.map((u) => u.name), inverse: true },
    series: [
      { name: "allocated", type: "bar", data: users.map((u) => Number(u.alloc_gpu_hours.toFixed(3))) },
      { name: "used (activity-weighted)", type: "bar", data: users.map((u) => Number(u.used_gpu_hours.toFixed(3))) },
    ],
  });
  const teams = [...r.teams].sort((a, b) => b.cost - a.cost);
  chart("chart-cost", Math.max(160, 28 * teams.length + 80))?.setOption({
    animation: false,
    tooltip: { trigger: "axis" },
    grid: { left: 10, right: 60, top: 20, bottom: 20, containLabel: true },
    xAxis: { type: "value", name: "cost" },
    yAxis: { type: "category", data: teams.map((u) => u.name), inverse: true },
    series: [{ name: "cost", type: "bar", data: teams.map((u) => Number(u.cost.toFixed(2))) }],
  });
  document.body.dataset.charts = "drawn";
}

const data = document.getElementById("stoker-report-data");
if (data?.textContent) draw(JSON.parse(data.textContent) as ReportData);
