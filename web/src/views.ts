// The dashboard's views other than the heatmap. Each view renders into `root` and returns a
// refresh function that the auto-refresh calls (views keep their own state between refreshes).
import {
  ApiError,
  get,
  post,
  type Alert,
  type Allocation,
  type FragSample,
  type GpuHistory,
  type Job,
  type JobEvent,
  type LogChunk,
  type Node,
  type QueueEntry,
  type Silence,
  type Whoami,
  type Zones,
} from "./api";
import { chartIn } from "./charts";
import { badge, el, fmtDuration, fmtRfc3339, fmtTime, simulatedBadge, sortableTable, type Column } from "./util";

export type Refresh = () => Promise<void>;

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

export function jobsView(root: HTMLElement, simulatedNodes: () => Set<string>): Refresh {
  const filter = el("select", { id: "job-state" }) as HTMLSelectElement;
  for (const s of ["all", "queued", "running", "succeeded", "failed", "cancelled"]) filter.append(el("option", { value: s }, s));
  const host = el("div");
  root.append(el("div", { class: "controls" }, el("label", {}, "state ", filter)), host);
  let jobs: Job[] = [];
  let zones: Zones | null = null;
  const draw = () => {
    const zoneOf = new Map((zones?.jobs ?? []).map((z) => [z.key, z]));
    const sim = simulatedNodes();
    const cols: Column<Job>[] = [
      { title: "id", value: (j) => j.id, numeric: true, render: (j) => el("a", { href: `#/jobs/${j.id}` }, String(j.id)) },
      { title: "name", value: (j) => j.name || j.spec.command.join(" ").slice(0, 40) },
      { title: "user", value: (j) => j.user },
      { title: "state", value: (j) => j.state, render: (j) => stateBadge(j.state) },
      {
        title: "GPUs",
        value: (j) => gpusOf(j),
        render: (j) => el("span", {}, gpusOf(j), j.assignment && sim.has(j.assignment.node) ? simulatedBadge() : ""),
      },
      { title: "zone", value: (j) => zoneOf.get(String(j.id))?.zone ?? "–" },
      {
        title: "efficiency %",
        value: (j) => zoneOf.get(String(j.id))?.mean_pct ?? -1,
        numeric: true,
        render: (j) => {
          const z = zoneOf.get(String(j.id));
          return z ? z.mean_pct.toFixed(0) : "–";
        },
      },
      { title: "submitted", value: (j) => j.submit_ms, numeric: true, render: (j) => fmtTime(j.submit_ms) },
      { title: "runtime", value: (j) => runtime(j), numeric: true, render: (j) => fmtDuration(runtime(j)) },
    ];
    host.replaceChildren(sortableTable(cols, jobs, jobsSort, draw, { id: "jobs-table" }));
  };
  return async () => {
    const q = filter.value === "all" ? "" : `&state=${filter.value}`;
    [jobs, zones] = await Promise.all([get<Job[]>(`/jobs?limit=1000${q}`), get<Zones>("/zones").catch(() => null)]);
    draw();
    filter.onchange = () => void get<Job[]>(`/jobs?limit=1000${filter.value === "all" ? "" : "&state=" + filter.value}`).then((j) => {
      jobs = j;
      draw();
    });
  };
}

export function jobView(root: HTMLElement, id: number, me: Whoami, simulatedNodes: () => Set<string>): Refresh {
  const head = el("div", { id: "job-head" });
  const chartHost = el("div", { class: "chart", id: "job-gpus" });
  const events = el("div", { id: "job-events" });
  const stdout = el("pre", { class: "log", id: "job-stdout" });
  const stderr = el("pre", { class: "log", id: "job-stderr" });
  root.append(
    head,
    el("h3", {}, "GPUs over time"),
    chartHost,
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
  return async () => {
    let job: Job;
    try {
      job = await get<Job>(`/jobs/${id}`);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        head.replaceChildren(el("p", { class: "error", id: "job-missing" }, `Job ${id} was not found (or is not yours).`));
        chartHost.remove();
        return;
      }
      throw e;
    }
    const canCancel = ["queued", "assigned", "running"].includes(job.state) && (me.role === "admin" || me.name === job.user);
    const cancel = el("button", { id: "cancel" }, "Cancel job");
    cancel.addEventListener("click", () => void post(`/jobs/${id}/cancel`).then(() => location.reload()));
    const sim = job.assignment && simulatedNodes().has(job.assignment.node);
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
    const [ev] = await Promise.all([
      get<JobEvent[]>(`/jobs/${id}/events`),
      readLog("stdout", stdout),
      readLog("stderr", stderr),
    ]);
    events.replaceChildren(
      el("table", { class: "grid" }, ...ev.map((e) => el("tr", {}, el("td", {}, fmtTime(e.ts_ms)), el("td", {}, e.kind), el("td", {}, e.message)))),
    );
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
  const over = el("div", { class: "chart", id: "frag-chart" });
  const where = el("div", { class: "chart", id: "frag-where" });
  root.append(
    el("p", { class: "muted" }, "Fragmented GPUs: free GPU capacity that the typical request shapes of the current workload cannot use (FGD's measure, sampled by the scheduler at most once a minute)."),
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

export function alertsView(root: HTMLElement): Refresh {
  const active = el("div", { id: "alerts" });
  const silences = el("div");
  const reclaim = el("div");
  root.append(el("h3", {}, "Active alerts"), active, el("h3", {}, "Silences"), silences, el("h3", {}, "Idle reclaim log"), reclaim);
  const sort = { key: 0, desc: true };
  let alerts: Alert[] = [];
  const order: Record<string, number> = { red: 3, orange: 2, yellow: 1 };
  const draw = () => {
    const cols: Column<Alert>[] = [
      { title: "grade", value: (a) => order[a.grade] ?? 0, numeric: true, render: (a) => badge(a.grade, a.grade) },
      { title: "rule", value: (a) => a.rule },
      { title: "subject", value: (a) => a.subject },
      { title: "state", value: (a) => a.state + (a.inhibited ? " (inhibited)" : "") + (a.silenced ? " (silenced)" : "") },
      { title: "summary", value: (a) => a.summary ?? "" },
      { title: "since", value: (a) => a.starts_at ?? a.pending_since ?? "", render: (a) => fmtRfc3339(a.starts_at ?? a.pending_since) },
    ];
    active.replaceChildren(alerts.length ? sortableTable(cols, alerts, sort, draw, { id: "alerts-table" }) : el("p", { class: "muted" }, "No alert is active."));
  };
  return async () => {
    const [a, s, r] = await Promise.all([
      get<Alert[]>("/alerts"),
      get<Silence[]>("/silences"),
      get<Record<string, unknown>[]>("/reclaim"),
    ]);
    alerts = a;
    draw();
    silences.replaceChildren(
      s.length
        ? el("table", { class: "grid" }, ...s.map((x) => el("tr", {}, el("td", {}, x.id), el("td", {}, JSON.stringify(x.matchers)), el("td", {}, fmtRfc3339(x.starts_at)), el("td", {}, fmtRfc3339(x.ends_at)), el("td", {}, x.comment))))
        : el("p", { class: "muted" }, "No silence."),
    );
    reclaim.replaceChildren(
      r.length
        ? el("table", { class: "grid" }, ...r.map((x) => el("tr", {}, el("td", {}, el("code", {}, JSON.stringify(x))))))
        : el("p", { class: "muted" }, "No reclaim action yet."),
    );
  };
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
