// The Stoker dashboard: log in with a token, then the cluster heatmap, jobs (and each job's
// page), the queue, fragmentation, alerts and nodes, refreshed every few seconds. Every call
// goes through the API with the token, so what a view shows is what the token may see.
import "./style.css";
import { ApiError, get, setToken, token, type Node, type Whoami } from "./api";
import { drawHeatmap, heatmapControls, type HeatmapState } from "./heatmap";
import { alertsView, costView, forgetReport, fragmentationView, jobView, jobsView, nodesView, queueView, type Refresh } from "./views";
import { el, fmtClock, viewerZone } from "./util";

const REFRESH_MS = 5000;
const app = document.getElementById("app")!;
const heatmapState: HeatmapState = { metric: "util", window: "1h" };
let simulated = new Set<string>();
let timer: number | undefined;
let current: Refresh | null = null;
let me: Whoami | null = null;

function loginView(message = ""): void {
  stopRefresh();
  const input = el("input", { type: "password", id: "token", placeholder: "API token", autocomplete: "off", size: "48" }) as HTMLInputElement;
  const form = el(
    "form",
    { class: "login", id: "login" },
    el("h1", {}, "Stoker"),
    el("p", {}, "Log in with an API token (the admin token is in the data directory's admin.token; admins make user tokens with stoker token create)."),
    input,
    el("button", { type: "submit" }, "Log in"),
    message ? el("p", { class: "error" }, message) : null,
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    void start();
  });
  app.replaceChildren(form);
  input.focus();
}

function stopRefresh(): void {
  if (timer !== undefined) window.clearInterval(timer);
  timer = undefined;
}

const ROUTES: { hash: string; title: string }[] = [
  { hash: "#/", title: "Cluster" },
  { hash: "#/jobs", title: "Jobs" },
  { hash: "#/queue", title: "Queue" },
  { hash: "#/fragmentation", title: "Fragmentation" },
  { hash: "#/alerts", title: "Alerts" },
  { hash: "#/cost", title: "Cost" },
  { hash: "#/nodes", title: "Nodes" },
];

function shell(): { main: HTMLElement; status: HTMLElement } {
  const hash = location.hash || "#/";
  const nav = el(
    "nav",
    {},
    el("span", { class: "brand" }, "Stoker"),
    ...ROUTES.map((r) => el("a", { href: r.hash, class: hash === r.hash || (r.hash !== "#/" && hash.startsWith(r.hash)) ? "active" : "" }, r.title)),
  );
  const status = el("span", { class: "status", id: "status" });
  const logout = el("button", { id: "logout" }, "Log out");
  logout.addEventListener("click", () => {
    setToken("");
    loginView();
  });
  const auto = el("input", { type: "checkbox", id: "auto-refresh", checked: "" }) as HTMLInputElement;
  auto.addEventListener("change", () => (auto.checked ? startRefresh() : stopRefresh()));
  const who = el("span", { class: "who", id: "who" }, `${me!.name} (${me!.role})`);
  const header = el(
    "header",
    {},
    nav,
    el("div", { class: "right" }, status, el("label", {}, auto, " auto-refresh"), el("span", { class: "muted" }, `times in ${viewerZone}`), who, logout),
  );
  const main = el("main", { id: "view" });
  app.replaceChildren(header, main);
  return { main, status };
}

let statusEl: HTMLElement | null = null;
let simulatedAt = 0;

async function runRefresh(): Promise<void> {
  if (!current) return;
  try {
    // Which nodes are simulated (for the labels), at most every 30 s.
    if (Date.now() - simulatedAt > 30000) await refreshSimulated();
    await current();
    if (statusEl) {
      statusEl.textContent = `updated ${fmtClock(Date.now())}`;
      statusEl.className = "status";
    }
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      setToken("");
      loginView(`The server refused the token: ${e.message}`);
      return;
    }
    if (statusEl) {
      statusEl.textContent = e instanceof Error ? e.message : String(e);
      statusEl.className = "status error";
    }
  }
}

function startRefresh(): void {
  stopRefresh();
  timer = window.setInterval(() => void runRefresh(), REFRESH_MS);
}

async function refreshSimulated(): Promise<void> {
  const nodes = await get<Node[]>("/nodes");
  simulated = new Set(nodes.filter((n) => n.simulated).map((n) => n.name));
  simulatedAt = Date.now();
}

function route(): void {
  if (!me) return;
  forgetReport();  // a new view reads a fresh report
  const { main, status } = shell();
  statusEl = status;
  const hash = location.hash || "#/";
  const job = /^#\/jobs\/(\d+)$/.exec(hash);
  const sims = () => simulated;
  if (job) {
    current = jobView(main, Number(job[1]), me, sims);
  } else if (hash === "#/jobs") {
    current = jobsView(main, sims);
  } else if (hash === "#/queue") {
    current = queueView(main);
  } else if (hash === "#/fragmentation") {
    current = fragmentationView(main);
  } else if (hash === "#/alerts") {
    current = alertsView(main, me, sims);
  } else if (hash === "#/cost") {
    current = costView(main, me, sims);
  } else if (hash === "#/nodes") {
    current = nodesView(main, me);
  } else {
    // Links may set the heatmap's span and colour: #/?span=4m&metric=sm
    const q = new URLSearchParams(hash.split("?")[1] ?? "");
    const span = q.get("span");
    if (span && /^\d{1,4}[smhd]$/.test(span)) heatmapState.window = span;
    const metric = q.get("metric");
    if (metric === "util" || metric === "sm" || metric === "mem") heatmapState.metric = metric;
    const info = el("div", { class: "info", id: "heatmap-info" });
    const host = el("div", { class: "chart heatmap", id: "heatmap" });
    main.append(heatmapControls(heatmapState, () => void runRefresh()), info, host);
    current = () => drawHeatmap(host, info, heatmapState);
  }
  void runRefresh();
  startRefresh();
}

async function start(): Promise<void> {
  if (!token()) {
    loginView();
    return;
  }
  try {
    me = await get<Whoami>("/whoami");
    if (me.role === "agent") {
      setToken("");
      loginView("That is a node agent's token; log in with a user or admin token.");
      return;
    }
    await refreshSimulated();
  } catch (e) {
    setToken("");
    loginView(e instanceof Error ? `Login failed: ${e.message}` : "Login failed");
    return;
  }
  route();
}

window.addEventListener("hashchange", () => route());
void start();
