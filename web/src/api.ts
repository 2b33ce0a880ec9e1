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
  starts_at: string;
  ends_at: string;
  comment: string;
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
    util: (number | null)[];
    sm: (number | null)[];
    mem: (number | null)[];
    job: number[];
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
