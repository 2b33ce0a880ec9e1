// The dashboard in Debian's headless Chromium, against a real `stoker up` on a free port:
// the page loads without console errors, the heatmap has a cell per GPU of the simulated node,
// a job submitted through the API appears in the jobs table (ids sorted as numbers) and its
// page shows its logs, another user's token cannot see the job (API and page), and an admin can
// drain and undrain the node from the nodes view. Screenshots go to --artifacts.
//
//   node dashboard.test.mjs --stoker BUILD/bin/stoker --artifacts DIR [--chromium /usr/bin/chromium]
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const stokerBin = args.stoker;
const artifacts = args.artifacts ?? path.join(os.tmpdir(), "stoker-browser-artifacts");
const chromiumBin = args.chromium ?? "/usr/bin/chromium";
if (!stokerBin || !fs.existsSync(stokerBin)) fail(`--stoker: no stoker binary at '${stokerBin}'`);
if (!fs.existsSync(chromiumBin)) fail(`--chromium: no browser at ${chromiumBin} (Debian: apt-get install chromium; scripts/install-deps.sh installs it)`);
fs.mkdirSync(artifacts, { recursive: true });

function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exitCode = 1;
  throw new Error(msg);
}
function check(cond, msg) {
  if (!cond) fail(msg);
  console.log(`ok: ${msg}`);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

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

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stoker-browser-"));
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const env = { ...process.env, XDG_CONFIG_HOME: path.join(dir, "config") };
delete env.STOKER_SERVER;
delete env.STOKER_TOKEN;
const log = fs.openSync(path.join(dir, "up.log"), "w");
// --allow-root-jobs: CI runs as root, and the test's jobs run as the user running the test.
const up = spawn(
  stokerBin,
  ["up", "--data-dir", path.join(dir, "data"), "--listen", `127.0.0.1:${port}`, "--node-timeout", "60", "--allow-root-jobs"],
  { env, stdio: ["ignore", log, log] },
);
let upExited = false;
up.on("exit", () => (upExited = true));

async function api(method, p, tok, body) {
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
}

async function waitFor(what, fn, timeoutMs = 60000) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    if (upExited) fail(`stoker up exited while waiting for ${what}; log:\n${fs.readFileSync(path.join(dir, "up.log"), "utf8")}`);
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await sleep(250);
  }
  fail(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
}

let browser;
try {
  const admin = await waitFor("the admin token", () => {
    const f = path.join(dir, "data", "admin.token");
    return fs.existsSync(f) && fs.readFileSync(f, "utf8").trim();
  });
  const nodes = await waitFor("the simulated node", async () => {
    const r = await api("GET", "/nodes", admin);
    return r.status === 200 && r.body.length > 0 && r.body;
  });
  const node = nodes[0];
  check(node.simulated === true, `the node '${node.name}' of stoker up is simulated`);
  check(node.gpus.length > 0, `it has ${node.gpus.length} GPUs`);
  const me = os.userInfo().username;
  const userTok = (await api("POST", "/tokens", admin, { role: "user", name: me })).body.token;
  const otherTok = (await api("POST", "/tokens", admin, { role: "user", name: "someone-else" })).body.token;
  check(userTok && otherTok, "user tokens made through the API");

  // Static files are public; data calls need the token.
  const index = await fetch(`${base}/`);
  check(index.status === 200 && (await index.text()).includes('id="app"'), "GET / serves the dashboard without a token");
  check((await fetch(`${base}/api/v1/jobs`)).status === 401, "GET /api/v1/jobs without a token is refused");

  browser = await chromium.launch({
    executablePath: chromiumBin,
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
  });
  const consoleErrors = [];
  const watch = (page, who) => {
    page.on("console", (m) => m.type() === "error" && consoleErrors.push(`${who}: ${m.text()}`));
    page.on("pageerror", (e) => consoleErrors.push(`${who}: ${e.message}`));
  };
  const login = async (page, tok) => {
    await page.goto(`${base}/`);
    await page.fill("#token", tok);
    await page.click("#login button[type=submit]");
    await page.waitForSelector("#who");
  };

  const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await ctx.newPage();
  watch(page, "user");
  await login(page, userTok);
  check((await page.textContent("#who")).includes(me), "logged in as the user");

  // The heatmap: a row with cells for every GPU of the simulated node.
  const want = node.gpus.map((g) => `${node.name}/${g.index}`).sort();
  const rows = await waitFor(
    "a heatmap cell for every GPU",
    async () => {
      const r = JSON.parse((await page.getAttribute("#heatmap", "data-rows")) ?? "[]");
      return want.every((k) => r.includes(k)) && r;
    },
    60000,
  );
  check(want.every((k) => rows.includes(k)), `the heatmap has cells for all ${want.length} GPUs of ${node.name}`);
  check((await page.textContent("#heatmap-info")).includes("simulated data"), "the heatmap says its data is simulated");
  await page.selectOption("#metric", "mem");
  await page.waitForTimeout(500);
  await page.screenshot({ path: path.join(artifacts, "heatmap.png"), fullPage: true });

  // A job through the API, then the jobs table and its page with its logs.
  const marker = `hello-from-the-browser-test-${process.pid}`;
  const sub = await api("POST", "/jobs", userTok, {
    name: "browser-test",
    command: ["sh", "-c", `echo ${marker}; echo to-stderr >&2`],
  });
  check(sub.status === 201, `job submitted through the API (id ${sub.body.id})`);
  const id = sub.body.id;
  // More jobs, so ids run past 9 and a text sort would put 10 before 9.
  for (let i = 0; i < 10; i++) await api("POST", "/jobs", userTok, { name: `filler-${i}`, command: ["true"] });
  await waitFor("the job to succeed", async () => (await api("GET", `/jobs/${id}`, userTok)).body.state === "succeeded");

  await page.goto(`${base}/#/jobs`);
  await page.waitForSelector(`#jobs-table a[href="#/jobs/${id}"]`);
  await page.click('#jobs-table th[data-col="id"]');
  const ids = (await page.$$eval("#jobs-table tbody tr td:first-child", (tds) => tds.map((t) => Number(t.textContent))));
  const sorted = [...ids].sort((a, b) => a - b);
  check(ids.length >= 11 && JSON.stringify(ids) === JSON.stringify(sorted), `job ids sort as numbers (${ids.join(",")})`);
  await page.screenshot({ path: path.join(artifacts, "jobs.png"), fullPage: true });

  await page.goto(`${base}/#/jobs/${id}`);
  await waitFor("the job's logs on its page", async () => (await page.textContent("#job-stdout")).includes(marker));
  check((await page.textContent("#job-stderr")).includes("to-stderr"), "the job page shows its stderr");
  check((await page.textContent("#job-events")).length > 0, "the job page shows its events");
  await page.screenshot({ path: path.join(artifacts, "job.png"), fullPage: true });

  for (const view of ["queue", "fragmentation", "alerts", "nodes"]) {
    await page.goto(`${base}/#/${view}`);
    await page.waitForSelector("#status:not(:empty)");
    await page.screenshot({ path: path.join(artifacts, `${view}.png`), fullPage: true });
  }
  check((await page.$$("button.node-action")).length === 0, "a user gets no drain buttons");
  check(consoleErrors.length === 0, `no console errors while using the dashboard${consoleErrors.length ? ": " + consoleErrors.join(" | ") : ""}`);

  // Another user's token sees neither the job through the API nor on the page.
  check((await api("GET", `/jobs/${id}`, otherTok)).status === 404, "another user's token gets 404 for the job");
  const other = await (await browser.newContext()).newPage();
  await login(other, otherTok);
  await other.goto(`${base}/#/jobs`);
  await other.waitForSelector("#jobs-table");
  check((await other.$$(`#jobs-table a[href="#/jobs/${id}"]`)).length === 0, "the other user's jobs table does not list the job");
  await other.goto(`${base}/#/jobs/${id}`);
  await other.waitForSelector("#job-missing");
  check(!(await other.textContent("body")).includes(marker), "the other user's job page shows no log of it");
  await other.screenshot({ path: path.join(artifacts, "other-user.png"), fullPage: true });

  // An admin drains and undrains the node from the nodes view.
  const adminPage = await (await browser.newContext()).newPage();
  watch(adminPage, "admin");
  await login(adminPage, admin);
  await adminPage.goto(`${base}/#/nodes`);
  await adminPage.click(`button.node-action[data-node="${node.name}"]`);
  await waitFor("the node to be drained", async () => (await api("GET", `/nodes/${node.name}`, admin)).body.drained === true);
  check(true, "an admin drained the node from the page");
  await adminPage.waitForSelector(`button.node-action[data-node="${node.name}"]:has-text("Undrain")`);
  await adminPage.click(`button.node-action[data-node="${node.name}"]`);
  await waitFor("the node to be ready again", async () => (await api("GET", `/nodes/${node.name}`, admin)).body.drained === false);
  check(true, "and undrained it");
  await adminPage.screenshot({ path: path.join(artifacts, "nodes-admin.png"), fullPage: true });
  check(consoleErrors.length === 0, `no console errors at all${consoleErrors.length ? ": " + consoleErrors.join(" | ") : ""}`);
  console.log(`PASS (screenshots in ${artifacts})`);
} catch (e) {
  process.exitCode = 1;
  if (!String(e.message).startsWith("FAIL")) console.error(e);
  try {
    console.error("stoker up log (tail):\n" + fs.readFileSync(path.join(dir, "up.log"), "utf8").slice(-4000));
  } catch {}
} finally {
  if (browser) await browser.close().catch(() => {});
  if (!upExited) {
    up.kill("SIGTERM");
    await new Promise((r) => {
      const t = setTimeout(() => {
        up.kill("SIGKILL");
        r();
      }, 15000);
      up.on("exit", () => {
        clearTimeout(t);
        r();
      });
    });
  }
  fs.rmSync(dir, { recursive: true, force: true });
}
