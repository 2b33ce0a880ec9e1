// Every data call of the dashboard goes through the server's API with the user's token, so the
// API's roles and scopes decide what each view shows. The token lives in sessionStorage: it is
// gone when the tab closes and is never sent anywhere but this server.

const TOKEN_KEY = "stoker.token";

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
  ) {
    super(message);
  }
}

export function token(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? "";
}

export function setToken(t: string): void {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Authorization: `Bearer ${token()}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(`/api/v1${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  const text = await res.text();
  let doc: unknown = null;
  try {
    doc = text ? JSON.parse(text) : null;
  } catch {
    doc = null;
  }
  if (!res.ok) {
    const err = (doc as { error?: { code?: string; message?: string } } | null)?.error;
    throw new ApiError(res.status, err?.code ?? "http_" + res.status, err?.message ?? text.slice(0, 200));
  }
  return doc as T;
}

export const get = <T>(path: string) => call<T>("GET", path);
export const post = <T>(path: string, body?: unknown) => call<T>("POST", path, body ?? {});
export const del = <T>(path: string) => call<T>("DELETE", path);

// The shapes the dashboard reads (docs/api.md; GET /api/v1/openapi.json has the full schemas).
export interface Whoami {
  name: string;
  role: "admin" | "user" | "agent";
}
export interface GpuInfo {
  index: number;
  uuid: string;
  model: string;
  memory_mib: number;
  mig_enabled: boolean;
  mig: { uuid: string; profile: string; slices: number }[];
}
export interface Node {
  name: string;
  simulated: boolean;
  source: string;
  state: "ready" | "drained" | "lost";
  drained: boolean;
  cpu_milli: number;
  memory_mib: number;
  gpus: GpuInfo[];
  active_jobs: number;
  last_heartbeat_ms: number;
}
export interface Assignment {
  node: string;
  gpu_indices: number[];
  gpu_milli: number;
  mig_slices: number;
  mig_uuid: string;
}
export interface Job {
  id: number;
  user: string;
  name: string;
  state: string;
  spec: { command: string[]; gpus?: number; gpu_milli?: number; [k: string]: unknown };
  assignment?: Assignment;
  exit_code?: number;
  signal?: number;
  reason: string;
  submit_ms: number;
  start_ms: number;
  end_ms: number;
  requeues: number;
  preemptions: number;
}
export interface JobEvent {
  ts_ms: number;
  kind: string;
  message: string;
}
export interface LogChunk {
  data: string;
  next_offset: number;
  finished: boolean;
}
export interface QueueEntry {
  position: number;
  job: number;
  user: string;
  name: string;
  priority: number;
  reason: string;
}
export interface Allocation {
  job: number;
  user: string;
  state: string;
  node: string;
  gpu_indices: number[];
  gpu_milli: number;
  mig_uuid: string;
}
export interface ZoneStatus {
  key: string;
  zone: "unknown" | "bronze" | "silver" | "gold" | "hot";
  mean_pct: number;
  peak_pct: number;
  samples: number;
  covered_s: number;
  metric: string;
}
export interface Zones {
  gpus: ZoneStatus[];
  jobs: ZoneStatus[];
  window: string;
  min_coverage?: string;  // a zone stays unknown until its window holds this much of samples
  gpus_freed: number;
}
export interface Alert {
  rule: string;
  grade: "yellow" | "orange" | "red";
  state: string;
  subject: string;
  labels: Record<string, string>;
  summary?: string;
  starts_at: string | null;
  pending_since?: string;
  inhibited?: boolean;
  silenced?: boolean;
  value?: number;
}
export interface Silence {
  id: string;
  matchers: unknown;
  starts_at: number;  // Unix seconds
  ends_at: number | null;
  comment: string;
}
export interface ReclaimRecord {
  at: string;
  job: string;
  user: string;
  action: "warn" | "requeue" | "cancel" | string;
  dry_run: boolean;
  result: string;
  reason: string;
  evidence: {
    window_start: string;
    window_end: string;
    samples: number;
    max_activity_pct: number;
    gpus: number;
    idle_gpus: number;
    idle_threshold_pct: number;
    warn_after: string;
    act_after: string;
  };
}
export interface Budget {
  team: string;
  balance: number;
  granted: number;
  charged: number;
  idle_charged: number;
  reclaimed_charged: number;
  allowed_tier: "guaranteed" | "preemptible";
}
export interface LedgerEntry {
  seq: number;
  at: string;
  team: string;
  kind: "grant" | "charge" | "idle_charge" | "refund";
  credits: number;
  job: string;
  tier: string;
  gpu_model: string;
  gpu_hours: number;
  reclaimed: boolean;
  note: string;
}
// GET /report (JSON): the efficiency report over what the server recorded (a user's covers their
// own jobs). Estimates are labelled as such by their names.
export interface ReportJob {
  id: string;
  user: string;
  team: string;
  model: string;
  gpus: number;
  start: string;
  end: string;
  samples: number;
  alloc_gpu_hours: number;
  used_gpu_hours: number;
  idle_gpu_hours: number;
  avg_util_pct: number;
  peak_util_pct: number;
  avg_sm_pct: number | null;
  avg_tensor_pct: number | null;
  mem_peak_bytes: number;
  mem_total_bytes: number;
  energy_kwh: number | null;
  achieved_tflops_estimate: number | null;
  tflops_per_watt_estimate: number | null;
  peak_tflops: number | null;
  zone: string;
  zone_history: { at: string; zone: string }[];
  cost: number;
}
export interface ReportOwner {
  name: string;
  jobs: number;
  alloc_gpu_hours: number;
  used_gpu_hours: number;
  idle_gpu_hours: number;
  cost: number;
}
export interface Report {
  from: string;
  to: string;
  jobs: ReportJob[];
  users: ReportOwner[];
  teams: ReportOwner[];
  advice: { job: string; kind: string; text: string; evidence: string }[];
  notes: string[];
}
export interface GpuHistory {
  start_ms: number;
  step_ms: number;
  bucket_ms: number;
  columns: number;
  now_ms: number;
  dropped_gpus: number;
  gpus: {
    node: string;
    index: number;
    name: string;
    mig: boolean;
    // A MIG instance's row (after its GPU's): its util is its SM activity.
    mig_instance?: { uuid: string; profile: string; slices: number };
    util: (number | null)[];
    sm: (number | null)[];
    mem: (number | null)[];
    job: number[];
    // ESTIMATES from the GPU's latest sample (absent on MIG instance rows; null when unknown).
    tflops_estimate?: number | null;
    tflops_per_watt_estimate?: number | null;
  }[];
  job_users: Record<string, string>;
}
export interface FragSample {
  ts_ms: number;
  fragmented_gpu_milli: number;
  free_gpu_milli: number;
  total_gpu_milli: number;
  typical_shapes: number;
}
