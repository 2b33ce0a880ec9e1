// The dashboard's views other than the heatmap. Each view renders into `root` and returns a
// refresh function that the auto-refresh calls (views keep their own state between refreshes).
// What a view shows is what the token may see: the API filters every answer by role.
import {
  ApiError,
  del,
  get,
  post,
  type Alert,
  type Allocation,
  type Budget,
  type FragSample,
  type GpuHistory,
  type Job,
  type JobEvent,
  type LedgerEntry,
  type LogChunk,
  type Node,
  type QueueEntry,
  type ReclaimRecord,
  type Report,
  type ReportJob,
  type Silence,
  type Whoami,
  type Zones,
} from "./api";
import { chartIn } from "./charts";
import { coverageNote } from "./heatmap";
import { badge, el, fmtDuration, fmtRfc3339, fmtTime, simulatedBadge, sortableTable, type Column } from "./util";

export type Refresh = () => Promise<void>;
// The names of the simulated nodes, kept fresh by main.ts.
export type Simulated = () => Set<string>;

const jobsSort = { key: 0, desc: true };

function gpusOf(j: Job): string {
  if (j.assignment) {
    const a = j.assignment;
    if (a.mig_uuid) return `${a.node}: MIG ${a.mig_slices}g on GPU ${a.gpu_indices.join(",")}`;
    const share = a.gpu_milli && a.gpu_milli < 1000 ? ` (${a.gpu_milli / 10}% share)` : "";
    return a.gpu_indices.length ? `${a.node}: ${a.gpu_indices.join(",")}${share}` : a.node;
  }
  const n = Number(j.spec.gpus ?? 0);
  return n ? `${n} wanted` : "–";
}

function stateBadge(s: string): HTMLElement {
  return badge(s, s);
}

function runtime(j: Job): number {
  if (!j.start_ms) return 0;
  return (j.end_ms || Date.now()) - j.start_ms;
}

function credits(v: number | null | undefined): string {
  return v === null || v === undefined ? "–" : v.toFixed(2);
}

function num(v: number | null | undefined, digits = 1): string {
  return v === null || v === undefined ? "n/a" : v.toFixed(digits);
}

// The efficiency report (GET /report) for costs, FLOPS, energy and advice: building it walks the
// server's recorded samples, so views share one answer for up to a minute.
let reportCache: { at: number; report: Promise<Report | null> } | null = null;
export function recentReport(maxAgeMs = 60000): Promise<Report | null> {
  if (!reportCache || Date.now() - reportCache.at > maxAgeMs) {
    reportCache = { at: Date.now(), report: get<Report>("/report").catch(() => null) };
  }
  return reportCache.report;
}
export function forgetReport(): void {
  reportCache = null;
}

// A line saying that some of what the view shows comes from simulated GPUs.
function simulatedNote(what: string): HTMLElement {
  return el("p", { class: "sim-note" }, simulatedBadge(), ` ${what}`);
}

export function jobsView(root: HTMLElement, simulatedNodes: Simulated): Refresh {
  const filter = el("select", { id: "job-state" }) as HTMLSelectElement;
  for (const s of ["all", "queued", "running", "succeeded", "failed", "cancelled"]) filter.append(el("option", { value: s }, s));
  const note = el("div");
  const host = el("div");
  root.append(el("div", { class: "controls" }, el("label", {}, "state ", filter)), note, host);
  let jobs: Job[] = [];
  let zones: Zones | null = null;
  let costOf = new Map<string, ReportJob>();
  const draw = () => {
    const zoneOf = new Map((zones?.jobs ?? []).map((z) => [z.key, z]));
    const sim = simulatedNodes();
    const onSim = (j: Job) => !!j.assignment && sim.has(j.assignment.node);
    const cols: Column<Job>[] = [
      { title: "id", value: (j) => j.id, numeric: true, render: (j) => el("a", { href: `#/jobs/${j.id}` }, String(j.id)) },
      { title: "name", value: (j) => j.name || j.spec.command.join(" ").slice(0, 40) },
      { title: "user", value: (j) => j.user },
      { title: "state", value: (j) => j.state, render: (j) => stateBadge(j.state) },
      {
        title: "GPUs",
        value: (j) => gpusOf(j),
        render: (j) => el("span", {}, gpusOf(j), onSim(j) ? simulatedBadge() : ""),
      },
      {
        title: "zone",
        value: (j) => zoneOf.get(String(j.id))?.zone ?? "–",
        render: (j) => {
          const z = zoneOf.get(String(j.id));
          if (!z) return "–";
          if (z.zone !== "unknown" || !zones) return z.zone;
          return el("span", { title: coverageNote([z], zones) }, "unknown", el("span", { class: "muted" }, ` (${Math.round(z.covered_s)} s covered)`));
        },
      },
      {
        title: "efficiency %",
        value: (j) => zoneOf.get(String(j.id))?.mean_pct ?? -1,
        numeric: true,
        render: (j) => {
          const z = zoneOf.get(String(j.id));
          return z ? z.mean_pct.toFixed(0) : "–";
        },
      },
      {
        title: "cost",
        value: (j) => costOf.get(String(j.id))?.cost ?? -1,
        numeric: true,
        render: (j) => credits(costOf.get(String(j.id))?.cost),
      },
      { title: "submitted", value: (j) => j.submit_ms, numeric: true, render: (j) => fmtTime(j.submit_ms) },
      { title: "runtime", value: (j) => runtime(j), numeric: true, render: (j) => fmtDuration(runtime(j)) },
    ];
    note.replaceChildren(jobs.some(onSim) ? simulatedNote("Jobs marked so ran on simulated GPUs: their zone, efficiency and cost come from simulated readings.") : "");
    host.replaceChildren(sortableTable(cols, jobs, jobsSort, draw, { id: "jobs-table" }));
  };
  const load = async () => {
    const q = filter.value === "all" ? "" : `&state=${filter.value}`;
    let report: Report | null;
    [jobs, zones, report] = await Promise.all([
      get<Job[]>(`/jobs?limit=1000${q}`),
      get<Zones>("/zones").catch(() => null),
      recentReport(),
    ]);
    costOf = new Map((report?.jobs ?? []).map((j) => [j.id, j]));
    draw();
  };
  filter.onchange = () => void load();
  return load;
}

export function jobView(root: HTMLElement, id: number, me: Whoami, simulatedNodes: Simulated): Refresh {
  const head = el("div", { id: "job-head" });
  const chartHost = el("div", { class: "chart", id: "job-gpus" });
  const efficiency = el("div", { id: "job-efficiency" });
  const flopsHost = el("div", { class: "chart small", id: "job-flops" });
  const events = el("div", { id: "job-events" });
  const stdout = el("pre", { class: "log", id: "job-stdout" });
  const stderr = el("pre", { class: "log", id: "job-stderr" });
  root.append(
    head,
    el("h3", {}, "GPUs over time"),
    chartHost,
    el("h3", {}, "Efficiency, energy and advice"),
    efficiency,
    flopsHost,
    el("h3", {}, "Events"),
    events,
    el("h3", {}, "Standard output"),
    stdout,
    el("h3", {}, "Standard error"),
    stderr,
  );
  const offsets = { stdout: 0, stderr: 0 };
  const readLog = async (stream: "stdout" | "stderr", into: HTMLElement) => {
    // Follow the log: read from the last offset until the server has no more bytes now.
    for (let i = 0; i < 16; i++) {
      const c = await get<LogChunk>(`/jobs/${id}/logs?stream=${stream}&offset=${offsets[stream]}`);
      if (c.data) into.append(c.data);
      const more = c.next_offset > offsets[stream];
      offsets[stream] = c.next_offset;
      if (!more || c.data.length < 1 << 20) break;
    }
  };
  const drawEfficiency = (report: Report | null, sim: boolean) => {
    const r = report?.jobs.find((j) => j.id === String(id));
    const advice = (report?.advice ?? []).filter((a) => a.job === String(id));
    if (!r) {
      efficiency.replaceChildren(el("p", { class: "muted" }, "No GPU samples recorded for this job yet (the report covers jobs that ran on GPUs)."));
      flopsHost.style.display = "none";
      return;
    }
    const gb = (b: number) => (b / 1e9).toFixed(1);
    efficiency.replaceChildren(
      sim ? simulatedNote("These figures come from simulated GPU readings.") : "",
      el(
        "dl",
        { class: "facts" },
        el("dt", {}, "GPU-hours"), el("dd", {}, `${r.alloc_gpu_hours.toFixed(3)} allocated, ${r.used_gpu_hours.toFixed(3)} used, ${r.idle_gpu_hours.toFixed(3)} idle`),
        el("dt", {}, "utilization"), el("dd", {}, `mean ${r.avg_util_pct.toFixed(0)} %, peak ${r.peak_util_pct.toFixed(0)} %; SM ${num(r.avg_sm_pct, 0)} %, tensor ${num(r.avg_tensor_pct, 0)} %`),
        el("dt", {}, "memory"), el("dd", {}, `peak ${gb(r.mem_peak_bytes)} GB of ${gb(r.mem_total_bytes)} GB`),
        el("dt", {}, "FLOPS (estimate)"), el("dd", { id: "job-tflops" }, `${num(r.achieved_tflops_estimate)} TFLOPS achieved of ${num(r.peak_tflops, 0)} theoretical`),
        el("dt", {}, "energy"), el("dd", {}, r.energy_kwh === null ? "n/a (no power reading)" : `${r.energy_kwh.toFixed(3)} kWh`),
        el("dt", {}, "TFLOPS/W (estimate)"), el("dd", {}, num(r.tflops_per_watt_estimate, 3)),
        el("dt", {}, "zone"), el("dd", {}, [r.zone, ...r.zone_history.map((z) => z.zone)].join(" → ")),
        el("dt", {}, "cost"), el("dd", {}, `${credits(r.cost)} (report prices)`),
      ),
      el("h4", {}, "Advice"),
      advice.length
        ? el("ul", { id: "job-advice" }, ...advice.map((a) => el("li", {}, el("b", {}, a.kind), ` ${a.text} `, el("i", { class: "muted" }, `(${a.evidence})`))))
        : el("p", { class: "muted", id: "job-advice" }, "No advice: no pattern with enough evidence."),
    );
    if (r.achieved_tflops_estimate === null || r.peak_tflops === null) {
      flopsHost.style.display = "none";
      return;
    }
    flopsHost.style.display = "";
    chartIn(flopsHost).setOption({
      animation: false,
      title: { text: "Achieved vs theoretical (estimate)", textStyle: { fontSize: 12 } },
      tooltip: { trigger: "axis" },
      grid: { left: 90, right: 30, top: 30, bottom: 30 },
      xAxis: { type: "value", name: "TFLOPS" },
      yAxis: { type: "category", data: ["theoretical", "achieved (est.)"] },
      series: [{ type: "bar", data: [r.peak_tflops, r.achieved_tflops_estimate], label: { show: true, position: "right" } }],
    });
  };
  return async () => {
    let job: Job;
    try {
      job = await get<Job>(`/jobs/${id}`);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        head.replaceChildren(el("p", { class: "error", id: "job-missing" }, `Job ${id} was not found (or is not yours).`));
        chartHost.remove();
        efficiency.remove();
        flopsHost.remove();
        return;
      }
      throw e;
    }
    const canCancel = ["queued", "assigned", "running"].includes(job.state) && (me.role === "admin" || me.name === job.user);
    const cancel = el("button", { id: "cancel" }, "Cancel job");
    cancel.addEventListener("click", () => void post(`/jobs/${id}/cancel`).then(() => location.reload()));
    const sim = !!job.assignment && simulatedNodes().has(job.assignment.node);
    head.replaceChildren(
      el("h2", {}, `Job ${job.id} `, stateBadge(job.state), sim ? simulatedBadge() : ""),
      el(
        "dl",
        { class: "facts" },
        el("dt", {}, "name"), el("dd", {}, job.name || "–"),
        el("dt", {}, "user"), el("dd", {}, job.user),
        el("dt", {}, "command"), el("dd", {}, el("code", {}, job.spec.command.join(" "))),
        el("dt", {}, "GPUs"), el("dd", {}, gpusOf(job)),
        el("dt", {}, "submitted"), el("dd", {}, fmtTime(job.submit_ms)),
        el("dt", {}, "started"), el("dd", {}, fmtTime(job.start_ms)),
        el("dt", {}, "ended"), el("dd", {}, fmtTime(job.end_ms)),
        el("dt", {}, "exit"), el("dd", {}, job.exit_code !== undefined ? String(job.exit_code) : job.signal ? `signal ${job.signal}` : "–"),
        el("dt", {}, "reason"), el("dd", {}, job.reason || "–"),
      ),
      canCancel ? cancel : "",
    );
    const [ev, , , report] = await Promise.all([
      get<JobEvent[]>(`/jobs/${id}/events`),
      readLog("stdout", stdout),
      readLog("stderr", stderr),
      recentReport(30000),
    ]);
    events.replaceChildren(
      el("table", { class: "grid" }, ...ev.map((e) => el("tr", {}, el("td", {}, fmtTime(e.ts_ms)), el("td", {}, e.kind), el("td", {}, e.message)))),
    );
    drawEfficiency(report, sim);
    const a = job.assignment;
    if (!a || a.gpu_indices.length === 0) {
      chartHost.replaceChildren(el("p", { class: "muted" }, "This job holds no GPU."));
      chartHost.style.height = "auto";
      return;
    }
    const hist = await get<GpuHistory>(`/history/gpus?node=${encodeURIComponent(a.node)}&window=6h&points=360`);
    const times = Array.from({ length: hist.columns }, (_, c) => hist.start_ms + c * hist.step_ms);
    const series = hist.gpus
      .filter((g) => a.gpu_indices.includes(g.index))
      .flatMap((g) => [
        { name: `GPU ${g.index} util %`, type: "line", showSymbol: false, data: g.util.map((v, i) => [times[i], v]) },
        { name: `GPU ${g.index} memory %`, type: "line", showSymbol: false, lineStyle: { type: "dashed" }, data: g.mem.map((v, i) => [times[i], v]) },
      ]);
    chartIn(chartHost).setOption(
      {
        animation: false,
        title: sim ? { text: "simulated GPUs", right: 10, top: 0, textStyle: { fontSize: 12, color: "#b59cff" } } : { show: false },
        tooltip: { trigger: "axis" },
        legend: {},
        grid: { left: 40, right: 20, top: 40, bottom: 60 },
        xAxis: { type: "time", min: job.start_ms || undefined },
        yAxis: { type: "value", min: 0, max: 100 },
        dataZoom: [{ type: "inside" }, { type: "slider" }],
        series,
      },
      { replaceMerge: ["series"] },
    );
  };
}

export function queueView(root: HTMLElement): Refresh {
  const host = el("div");
  root.append(host);
  const sort = { key: 0, desc: false };
  let rows: QueueEntry[] = [];
  const draw = () => {
    const cols: Column<QueueEntry>[] = [
      { title: "position", value: (q) => q.position, numeric: true },
      { title: "job", value: (q) => q.job, numeric: true, render: (q) => el("a", { href: `#/jobs/${q.job}` }, String(q.job)) },
      { title: "user", value: (q) => q.user },
      { title: "name", value: (q) => q.name },
      { title: "priority", value: (q) => q.priority, numeric: true },
      { title: "why it waits", value: (q) => q.reason || "next pass" },
    ];
    host.replaceChildren(rows.length ? sortableTable(cols, rows, sort, draw, { id: "queue-table" }) : el("p", { class: "muted" }, "Nothing waits."));
  };
  return async () => {
    rows = await get<QueueEntry[]>("/queue");
    draw();
  };
}

export function fragmentationView(root: HTMLElement): Refresh {
  const note = el("div");
  const over = el("div", { class: "chart", id: "frag-chart" });
  const where = el("div", { class: "chart", id: "frag-where" });
  root.append(
    el("p", { class: "muted" }, "Fragmented GPUs: free GPU capacity that the typical request shapes of the current workload cannot use (FGD's measure, sampled by the scheduler at most once a minute)."),
    note,
    over,
    el("h3", {}, "Where the free capacity is now"),
    where,
  );
  return async () => {
    const [frag, nodes, allocs] = await Promise.all([
      get<FragSample[]>("/history/fragmentation?window=24h"),
      get<Node[]>("/nodes"),
      get<Allocation[]>("/allocations"),
    ]);
    const sims = nodes.filter((n) => n.simulated);
    note.replaceChildren(sims.length ? simulatedNote(`${sims.length} of ${nodes.length} nodes are simulated; their GPUs count in these figures (marked "(sim)" below).`) : "");
    chartIn(over).setOption({
      animation: false,
      tooltip: { trigger: "axis" },
      legend: {},
      grid: { left: 50, right: 20, top: 40, bottom: 60 },
      xAxis: { type: "time" },
      yAxis: { type: "value", name: "GPUs" },
      dataZoom: [{ type: "inside" }, { type: "slider" }],
      series: [
        { name: "fragmented", type: "line", showSymbol: frag.length < 3, data: frag.map((f) => [f.ts_ms, f.fragmented_gpu_milli / 1000]) },
        { name: "free", type: "line", showSymbol: frag.length < 3, data: frag.map((f) => [f.ts_ms, f.free_gpu_milli / 1000]) },
        { name: "total", type: "line", showSymbol: false, lineStyle: { type: "dotted" }, data: frag.map((f) => [f.ts_ms, f.total_gpu_milli / 1000]) },
      ],
    }, { replaceMerge: ["series"] });
    over.dataset.samples = String(frag.length);
    // Free GPU share per node: whole GPUs minus what the active jobs hold (admins see every job;
    // a user's view counts only what they can see).
    const held = new Map<string, number>();
    for (const a of allocs) held.set(a.node, (held.get(a.node) ?? 0) + (a.gpu_indices.length * (a.gpu_milli || 1000)) / 1000);
    const names = nodes.map((n) => n.name + (n.simulated ? " (sim)" : ""));
    chartIn(where).setOption({
      animation: false,
      tooltip: { trigger: "axis" },
      legend: {},
      grid: { left: 50, right: 20, top: 40, bottom: 40, containLabel: true },
      xAxis: { type: "category", data: names },
      yAxis: { type: "value", name: "GPUs" },
      series: [
        { name: "held", type: "bar", stack: "g", data: nodes.map((n) => held.get(n.name) ?? 0) },
        { name: "free", type: "bar", stack: "g", data: nodes.map((n) => Math.max(0, n.gpus.length - (held.get(n.name) ?? 0))) },
      ],
    }, { replaceMerge: ["series"] });
  };
}

function unixTime(s: number | null | undefined): string {
  return s ? fmtTime(s * 1000) : "never";
}

// A silence for what an alert is about: its rule and the label that names its subject (the GPU's
// UUID, else the job, else the node).
function silenceFor(a: Alert): Record<string, string> {
  const m: Record<string, string> = { alertname: a.rule };
  const k = ["uuid", "job", "hostname"].find((x) => a.labels[x] !== undefined);
  if (k) m[k] = a.labels[k];
  return m;
}

export function alertsView(root: HTMLElement, me: Whoami, simulatedNodes: Simulated): Refresh {
  const note = el("div");
  const active = el("div", { id: "alerts" });
  const silences = el("div", { id: "silences" });
  const reclaim = el("div", { id: "reclaim" });
  const msg = el("p", { class: "muted", id: "alerts-msg" });
  root.append(
    note,
    el("h3", {}, "Active alerts"),
    active,
    msg,
    el("h3", {}, "Silences"),
    silences,
    el("h3", {}, "Idle reclaim log"),
    el("p", { class: "muted" }, "What idle reclaim did to jobs (warn, then requeue or cancel), with the evidence it acted on: the window it looked at, the samples in it, the highest activity seen and how many of the job's GPUs were idle."),
    reclaim,
  );
  const sort = { key: 0, desc: true };
  let alerts: Alert[] = [];
  const order: Record<string, number> = { red: 3, orange: 2, yellow: 1 };
  const admin = me.role === "admin";
  let refresh: Refresh = async () => {};
  const act = (p: Promise<unknown>, done: string) =>
    void p
      .then(() => {
        msg.textContent = done;
        return refresh();
      })
      .catch((e: Error) => (msg.textContent = e.message));
  const draw = () => {
    const sim = simulatedNodes();
    const cols: Column<Alert>[] = [
      { title: "grade", value: (a) => order[a.grade] ?? 0, numeric: true, render: (a) => badge(a.grade, a.grade) },
      { title: "rule", value: (a) => a.rule },
      {
        title: "subject",
        value: (a) => a.subject,
        render: (a) => el("span", {}, a.subject, a.labels.hostname && sim.has(a.labels.hostname) ? simulatedBadge() : ""),
      },
      { title: "state", value: (a) => a.state + (a.inhibited ? " (inhibited)" : "") + (a.silenced ? " (silenced)" : "") },
      { title: "summary", value: (a) => a.summary ?? "" },
      { title: "since", value: (a) => a.starts_at ?? a.pending_since ?? "", render: (a) => fmtRfc3339(a.starts_at ?? a.pending_since) },
    ];
    if (admin) {
      cols.push({
        title: "silence",
        value: (a) => (a.silenced ? 1 : 0),
        render: (a) => {
          if (a.silenced) return "silenced";
          const b = el("button", { class: "silence-alert", "data-rule": a.rule }, "Silence 2h");
          b.addEventListener("click", () =>
            act(post("/silences", { matchers: silenceFor(a), duration: "2h", comment: `from the dashboard by ${me.name}` }), `silenced ${a.rule} on ${a.subject} for 2h`),
          );
          return b;
        },
      });
    }
    active.replaceChildren(alerts.length ? sortableTable(cols, alerts, sort, draw, { id: "alerts-table" }) : el("p", { class: "muted" }, "No alert is active."));
  };
  refresh = async () => {
    const [a, s, r, nodes] = await Promise.all([
      get<Alert[]>("/alerts"),
      get<Silence[]>("/silences"),
      get<ReclaimRecord[]>("/reclaim"),
      get<Node[]>("/nodes"),
    ]);
    alerts = a;
    const sim = new Set(nodes.filter((n) => n.simulated).map((n) => n.name));
    note.replaceChildren(
      a.some((x) => x.labels.hostname && sim.has(x.labels.hostname)) ? simulatedNote("Alerts marked so were raised by simulated GPUs.") : "",
    );
    draw();
    const silenceRow = (x: Silence) => {
      const remove = el("button", { class: "silence-delete", "data-silence": x.id }, "Delete");
      remove.addEventListener("click", () =>
        act(del(`/silences/${encodeURIComponent(x.id)}`), `silence ${x.id} deleted`),
      );
      const matchers = Object.entries((x.matchers ?? {}) as Record<string, string>).map(([k, v]) => `${k}="${v}"`).join(", ");
      return el(
        "tr",
        {},
        el("td", {}, x.id),
        el("td", {}, el("code", {}, matchers)),
        el("td", {}, unixTime(x.starts_at)),
        el("td", {}, unixTime(x.ends_at)),
        el("td", {}, x.comment),
        admin ? el("td", {}, remove) : "",
      );
    };
    silences.replaceChildren(
      s.length
        ? el(
            "table",
            { class: "grid", id: "silences-table" },
            el("thead", {}, el("tr", {}, ...["id", "matchers", "from", "until", "comment", ...(admin ? [""] : [])].map((h) => el("th", {}, h)))),
            el("tbody", {}, ...s.map(silenceRow)),
          )
        : el("p", { class: "muted" }, admin ? "No silence. Silence an alert with its button above." : "No silence (admins set them)."),
    );
    reclaim.replaceChildren(
      r.length
        ? el(
            "table",
            { class: "grid", id: "reclaim-table" },
            el(
              "thead",
              {},
              el("tr", {}, ...["time", "job", "user", "action", "result", "why", "window", "samples", "highest activity", "idle GPUs", "rule"].map((h) => el("th", {}, h))),
            ),
            el(
              "tbody",
              {},
              ...[...r].reverse().map((x) =>
                el(
                  "tr",
                  {},
                  el("td", {}, fmtRfc3339(x.at)),
                  el("td", {}, el("a", { href: `#/jobs/${x.job}` }, x.job)),
                  el("td", {}, x.user),
                  el("td", {}, badge(x.action + (x.dry_run ? " (dry run)" : ""), x.action === "warn" ? "yellow" : "orange")),
                  el("td", {}, x.result),
                  el("td", {}, x.reason),
                  el("td", {}, `${fmtRfc3339(x.evidence.window_start)} – ${fmtRfc3339(x.evidence.window_end)}`),
                  el("td", {}, String(x.evidence.samples)),
                  el("td", {}, `${x.evidence.max_activity_pct.toFixed(1)} %`),
                  el("td", {}, `${x.evidence.idle_gpus} of ${x.evidence.gpus}`),
                  el("td", {}, `below ${x.evidence.idle_threshold_pct} %: warn after ${x.evidence.warn_after}, act after ${x.evidence.act_after}`),
                ),
              ),
            ),
          )
        : el("p", { class: "muted" }, me.role === "admin" ? "No reclaim action yet." : "No reclaim action on your jobs."),
    );
  };
  return () => refresh();
}

// Cost and the compute market: team budgets and balances, the ledger of grants and charges, the
// balance of each team over time, and what each user and team cost in the report's prices. A
// user sees their own team only (the API says so); an admin sees every team and may pick one.
export function costView(root: HTMLElement, me: Whoami, simulatedNodes: Simulated): Refresh {
  const teamPick = el("select", { id: "cost-team" }) as HTMLSelectElement;
  const note = el("div");
  const budgets = el("div", { id: "budgets" });
  const balance = el("div", { class: "chart", id: "balance-chart" });
  const ledger = el("div", { id: "ledger" });
  const owners = el("div", { id: "cost-owners" });
  root.append(
    me.role === "admin" ? el("div", { class: "controls" }, el("label", {}, "team ", teamPick)) : "",
    note,
    el("h3", {}, "Budgets"),
    budgets,
    el("h3", {}, "Balance over time"),
    balance,
    el("h3", {}, "Ledger"),
    ledger,
    el("h3", {}, "Cost by user and team (report prices)"),
    owners,
  );
  teamPick.append(el("option", { value: "" }, "all teams"));
  let refresh: Refresh = async () => {};
  teamPick.onchange = () => void refresh();
  const ledgerSort = { key: 0, desc: true };
  refresh = async () => {
    const team = teamPick.value ? `?team=${encodeURIComponent(teamPick.value)}` : "";
    let b: Budget[] = [];
    let l: LedgerEntry[] = [];
    let market = "";
    try {
      [b, l] = await Promise.all([get<Budget[]>(`/budgets${team}`), get<LedgerEntry[]>(`/ledger${team}`)]);
    } catch (e) {
      if (!(e instanceof ApiError) || e.status >= 500 || e.status === 401) throw e;
      market = e.message;
    }
    const [report, jobs] = await Promise.all([recentReport(), get<Job[]>("/jobs?limit=1000").catch(() => [] as Job[])]);
    // Which charges came from simulated GPUs: the job's node.
    const sim = simulatedNodes();
    const simJobs = new Set(jobs.filter((j) => j.assignment && sim.has(j.assignment.node)).map((j) => String(j.id)));
    note.replaceChildren(
      l.some((e) => simJobs.has(e.job)) || (report?.jobs ?? []).some((j) => simJobs.has(j.id))
        ? simulatedNote("Charges and costs marked so are for jobs on simulated GPUs.")
        : "",
    );
    if (me.role === "admin" && teamPick.options.length === 1) {
      for (const x of b) teamPick.append(el("option", { value: x.team }, x.team));
    }
    if (market) {
      budgets.replaceChildren(el("p", { class: "muted", id: "market-off" }, `The compute market is off: ${market}. Budgets, balances and the ledger appear once the efficiency configuration sets market.budgets (docs/efficiency.md).`));
      balance.style.display = "none";
      ledger.replaceChildren();
    } else {
      const bcols: Column<Budget>[] = [
        { title: "team", value: (x) => x.team },
        { title: "balance", value: (x) => x.balance, numeric: true, render: (x) => el("span", { class: x.balance <= 0 ? "error" : "" }, credits(x.balance)) },
        { title: "granted", value: (x) => x.granted, numeric: true, render: (x) => credits(x.granted) },
        { title: "charged", value: (x) => x.charged, numeric: true, render: (x) => credits(x.charged) },
        { title: "of it while idle", value: (x) => x.idle_charged, numeric: true, render: (x) => credits(x.idle_charged) },
        { title: "on reclaimed GPUs", value: (x) => x.reclaimed_charged, numeric: true, render: (x) => credits(x.reclaimed_charged) },
        { title: "may submit", value: (x) => x.allowed_tier, render: (x) => badge(x.allowed_tier, x.allowed_tier === "guaranteed" ? "running" : "orange") },
      ];
      const bsort = { key: 0, desc: false };
      const drawBudgets = () => budgets.replaceChildren(b.length ? sortableTable(bcols, b, bsort, drawBudgets, { id: "budgets-table" }) : el("p", { class: "muted" }, "No team has a budget."));
      drawBudgets();
      // Each team's balance after every entry, in ledger order.
      const byTeam = new Map<string, [number, number][]>();
      const running = new Map<string, number>();
      for (const e of [...l].sort((x, y) => x.seq - y.seq)) {
        const v = (running.get(e.team) ?? 0) + e.credits;  // + grants and refunds, - charges
        running.set(e.team, v);
        if (!byTeam.has(e.team)) byTeam.set(e.team, []);
        byTeam.get(e.team)!.push([Date.parse(e.at), Number(v.toFixed(6))]);
      }
      balance.style.display = "";
      chartIn(balance).setOption(
        {
          animation: false,
          tooltip: { trigger: "axis" },
          legend: {},
          grid: { left: 60, right: 20, top: 40, bottom: 80 },
          xAxis: { type: "time" },
          yAxis: { type: "value", name: "credits", splitLine: { lineStyle: { color: "#263047" } } },
          dataZoom: [{ type: "inside" }, { type: "slider" }],
          series: [...byTeam.entries()].map(([t, pts]) => ({ name: t, type: "line", step: "end", showSymbol: pts.length < 30, data: pts })),
        },
        { replaceMerge: ["series"] },
      );
      const lcols: Column<LedgerEntry>[] = [
        { title: "seq", value: (e) => e.seq, numeric: true },
        { title: "time", value: (e) => e.at, render: (e) => fmtRfc3339(e.at) },
        { title: "team", value: (e) => e.team },
        { title: "kind", value: (e) => e.kind },
        { title: "credits", value: (e) => e.credits, numeric: true, render: (e) => credits(e.credits) },
        {
          title: "job",
          value: (e) => Number(e.job) || 0,
          numeric: true,
          render: (e) => (e.job ? el("span", {}, el("a", { href: `#/jobs/${e.job}` }, e.job), simJobs.has(e.job) ? simulatedBadge() : "") : "–"),
        },
        { title: "tier", value: (e) => e.tier },
        { title: "GPU", value: (e) => e.gpu_model || "–" },
        { title: "GPU-h", value: (e) => e.gpu_hours, numeric: true, render: (e) => e.gpu_hours.toFixed(3) },
        { title: "reclaimed", value: (e) => (e.reclaimed ? 1 : 0), render: (e) => (e.reclaimed ? "yes" : "") },
        { title: "note", value: (e) => e.note },
      ];
      const drawLedger = () =>
        ledger.replaceChildren(l.length ? sortableTable(lcols, l.slice(-2000), ledgerSort, drawLedger, { id: "ledger-table" }) : el("p", { class: "muted" }, "The ledger is empty."));
      drawLedger();
    }
    const ocols: Column<{ kind: string; o: NonNullable<Report>["users"][number] }>[] = [
      { title: "", value: (x) => x.kind },
      { title: "name", value: (x) => x.o.name },
      { title: "jobs", value: (x) => x.o.jobs, numeric: true },
      { title: "GPU-h allocated", value: (x) => x.o.alloc_gpu_hours, numeric: true, render: (x) => x.o.alloc_gpu_hours.toFixed(3) },
      { title: "GPU-h used", value: (x) => x.o.used_gpu_hours, numeric: true, render: (x) => x.o.used_gpu_hours.toFixed(3) },
      { title: "GPU-h idle", value: (x) => x.o.idle_gpu_hours, numeric: true, render: (x) => x.o.idle_gpu_hours.toFixed(3) },
      { title: "cost", value: (x) => x.o.cost, numeric: true, render: (x) => credits(x.o.cost) },
    ];
    const rows = [
      ...(report?.users ?? []).map((o) => ({ kind: "user", o })),
      ...(report?.teams ?? []).map((o) => ({ kind: "team", o })),
    ];
    const osort = { key: 0, desc: false };
    const drawOwners = () =>
      owners.replaceChildren(
        rows.length ? sortableTable(ocols, rows, osort, drawOwners, { id: "owners-table" }) : el("p", { class: "muted" }, "No job has run on GPUs yet."),
      );
    drawOwners();
  };
  return () => refresh();
}

export function nodesView(root: HTMLElement, me: Whoami): Refresh {
  const host = el("div");
  const msg = el("p", { class: "muted" });
  root.append(host, msg);
  const sort = { key: 0, desc: false };
  let nodes: Node[] = [];
  const act = (n: Node, verb: "drain" | "undrain") => {
    void post(`/nodes/${encodeURIComponent(n.name)}/${verb}`)
      .then(() => {
        msg.textContent = `${n.name}: ${verb}ed`;
        return refresh();
      })
      .catch((e: Error) => (msg.textContent = e.message));
  };
  const draw = () => {
    const cols: Column<Node>[] = [
      { title: "name", value: (n) => n.name, render: (n) => el("span", {}, n.name, n.simulated ? simulatedBadge() : "") },
      { title: "state", value: (n) => n.state, render: (n) => badge(n.state, n.state) },
      { title: "GPUs", value: (n) => n.gpus.length, numeric: true, render: (n) => `${n.gpus.length} × ${n.gpus[0]?.model ?? "–"}` },
      { title: "MIG", value: (n) => n.gpus.filter((g) => g.mig_enabled).length, numeric: true },
      { title: "CPUs", value: (n) => n.cpu_milli / 1000, numeric: true },
      { title: "active jobs", value: (n) => n.active_jobs, numeric: true },
      { title: "last heartbeat", value: (n) => n.last_heartbeat_ms, numeric: true, render: (n) => fmtTime(n.last_heartbeat_ms) },
    ];
    if (me.role === "admin") {
      cols.push({
        title: "action",
        value: (n) => (n.drained ? 1 : 0),
        render: (n) => {
          const b = el("button", { class: "node-action", "data-node": n.name }, n.drained ? "Undrain" : "Drain");
          b.addEventListener("click", () => act(n, n.drained ? "undrain" : "drain"));
          return b;
        },
      });
    }
    host.replaceChildren(sortableTable(cols, nodes, sort, draw, { id: "nodes-table" }));
  };
  const refresh = async () => {
    nodes = await get<Node[]>("/nodes");
    draw();
  };
  return refresh;
}
