// What the dashboard's browser tests share: a real `stoker up` on a free port in a scratch
// directory, API calls with a token, waiting with a deadline, checks that fail with a message,
// and headless Chromium pages that log in and record console errors.
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

export function parseArgs(argv) {
  return Object.fromEntries(argv.reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
}

export function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exitCode = 1;
  throw new Error(`FAIL: ${msg}`);
}

export function check(cond, msg) {
  if (!cond) fail(msg);
  console.log(`ok: ${msg}`);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

// Starts `stoker up` with `extraArgs` (a scratch data directory and a free port are added; an
// argument that names one of `files` becomes its path). `files` are written into the scratch
// directory first; their paths are in `up.file[name]`.
export async function startUp(stokerBin, extraArgs = [], files = {}, { nodeTimeoutS = 60 } = {}) {
  if (!stokerBin || !fs.existsSync(stokerBin)) fail(`--stoker: no stoker binary at '${stokerBin}'`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stoker-browser-"));
  const file = {};
  for (const [name, text] of Object.entries(files)) {
    file[name] = path.join(dir, name);
    fs.writeFileSync(file[name], text);
  }
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = { ...process.env, XDG_CONFIG_HOME: path.join(dir, "config") };
  delete env.STOKER_SERVER;
  delete env.STOKER_TOKEN;
  const logPath = path.join(dir, "up.log");
  const log = fs.openSync(logPath, "w");
  // --allow-root-jobs: CI runs as root, and the test's jobs run as the user running the test.
  const child = spawn(
    stokerBin,
    ["up", "--data-dir", path.join(dir, "data"), "--listen", `127.0.0.1:${port}`, "--node-timeout", String(nodeTimeoutS), "--allow-root-jobs", ...extraArgs.map((a) => (a in file ? file[a] : a))],
    { env, stdio: ["ignore", log, log] },
  );
  const up = { dir, base, file, child, exited: false, logPath };
  child.on("exit", () => (up.exited = true));
  up.log = () => {
    try {
      return fs.readFileSync(logPath, "utf8");
    } catch {
      return "";
    }
  };
  up.api = async (method, p, tok, body) => {
    const res = await fetch(`${base}/api/v1${p}`, {
      method,
      headers: { Authorization: `Bearer ${tok}`, "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let doc = null;
    try {
      doc = JSON.parse(text);
    } catch {
      doc = text;
    }
    return { status: res.status, body: doc };
  };
  up.waitFor = async (what, fn, timeoutMs = 60000) => {
    const end = Date.now() + timeoutMs;
    let last;
    while (Date.now() < end) {
      if (up.exited) fail(`stoker up exited while waiting for ${what}; log:\n${up.log()}`);
      try {
        last = await fn();
        if (last) return last;
      } catch (e) {
        last = e;
      }
      await sleep(250);
    }
    fail(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
  };
  up.adminToken = () =>
    up.waitFor("the admin token", () => {
      const f = path.join(dir, "data", "admin.token");
      return fs.existsSync(f) && fs.readFileSync(f, "utf8").trim();
    });
  up.stop = async () => {
    if (process.exitCode) console.error(`stoker up log (tail):\n${up.log().slice(-4000)}`);
    if (!up.exited) {
      child.kill("SIGTERM");
      await new Promise((r) => {
        const t = setTimeout(() => {
          child.kill("SIGKILL");
          r();
        }, 15000);
        child.on("exit", () => {
          clearTimeout(t);
          r();
        });
      });
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  return up;
}

// Headless Chromium; pages made by `page()` record console errors and uncaught exceptions in
// `errors`, and `login(page, token)` logs in through the form.
export async function startBrowser(chromiumBin, base) {
  if (!fs.existsSync(chromiumBin)) fail(`--chromium: no browser at ${chromiumBin} (Debian: apt-get install chromium; scripts/install-deps.sh installs it)`);
  const browser = await chromium.launch({
    executablePath: chromiumBin,
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
  });
  const b = { browser, errors: [] };
  // `watch: false` for a page that is expected to meet refusals (another user's job: 404).
  b.page = async (who, viewport = { width: 1400, height: 900 }, { watch = true } = {}) => {
    const page = await (await browser.newContext({ viewport })).newPage();
    if (!watch) return page;
    page.on("console", (m) => {
      if (m.type() !== "error") return;
      // The one refusal a view expects: without a compute market, /budgets and /ledger answer
      // 409 and the cost view says the market is off (the browser still logs the status).
      const url = m.location()?.url ?? "";
      if (m.text().includes("status of 409") && /\/api\/v1\/(budgets|ledger)(\?|$)/.test(url)) return;
      b.errors.push(`${who}: ${m.text()} (${url})`);
    });
    page.on("pageerror", (e) => b.errors.push(`${who}: ${e.message}`));
    return page;
  };
  b.login = async (page, tok) => {
    await page.goto(`${base}/`);
    await page.fill("#token", tok);
    await page.click("#login button[type=submit]");
    await page.waitForSelector("#who");
  };
  b.noErrors = (when) => check(b.errors.length === 0, `no console errors ${when}${b.errors.length ? ": " + b.errors.join(" | ") : ""}`);
  b.close = () => browser.close().catch(() => {});
  return b;
}

// Runs `body` and reports: PASS, or the failure with the tail of the server's log; always stops
// the browser and the server.
export async function runTest(name, body, cleanup) {
  try {
    await body();
    console.log(`PASS: ${name}`);
  } catch (e) {
    process.exitCode = 1;
    if (!String(e.message).startsWith("FAIL")) console.error(e);
  } finally {
    await cleanup();
  }
}
