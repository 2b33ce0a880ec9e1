// Small DOM and formatting helpers shared by the views. Times are shown in the viewer's zone.

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return e;
}

export const viewerZone = Intl.DateTimeFormat().resolvedOptions().timeZone;

export function fmtTime(ms: number | null | undefined): string {
  if (!ms) return "–";
  return new Date(ms).toLocaleString(undefined, {
    year: "numeric",
    month: "short",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
  });
}

export function fmtClock(ms: number): string {
  return new Date(ms).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

export function fmtDuration(ms: number): string {
  if (ms <= 0) return "–";
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${m % 60}m`;
}

export function fmtRfc3339(s: string | null | undefined): string {
  if (!s) return "–";
  const t = Date.parse(s);
  return Number.isNaN(t) ? s : fmtTime(t);
}

// A table whose columns sort on click; numbers (job ids, GPUs) sort as numbers, text as text.
export interface Column<T> {
  title: string;
  value: (row: T) => string | number;
  render?: (row: T) => Node | string;
  numeric?: boolean;
}

export function sortableTable<T>(
  columns: Column<T>[],
  rows: T[],
  state: { key: number; desc: boolean },
  onSort: () => void,
  attrs: Record<string, string> = {},
): HTMLTableElement {
  const sorted = [...rows];
  const col = columns[state.key];
  if (col) {
    sorted.sort((a, b) => {
      const va = col.value(a);
      const vb = col.value(b);
      const r =
        col.numeric || (typeof va === "number" && typeof vb === "number")
          ? Number(va) - Number(vb)
          : String(va).localeCompare(String(vb), undefined, { numeric: true });
      return state.desc ? -r : r;
    });
  }
  const head = el(
    "tr",
    {},
    ...columns.map((c, i) => {
      const th = el("th", { class: "sortable", "data-col": c.title }, c.title + (i === state.key ? (state.desc ? " ▼" : " ▲") : ""));
      th.addEventListener("click", () => {
        if (state.key === i) state.desc = !state.desc;
        else {
          state.key = i;
          state.desc = false;
        }
        onSort();
      });
      return th;
    }),
  );
  const body = sorted.map((r) => el("tr", {}, ...columns.map((c) => el("td", {}, c.render ? c.render(r) : String(c.value(r))))));
  return el("table", { class: "grid", ...attrs }, el("thead", {}, head), el("tbody", {}, ...body));
}

export function badge(text: string, kind: string): HTMLElement {
  return el("span", { class: `badge badge-${kind}` }, text);
}

export function simulatedBadge(): HTMLElement {
  return el("span", { class: "badge badge-sim", title: "These GPUs are simulated (no real hardware)" }, "simulated data");
}
