// The dashboard in Debian's headless Chromium, against a real `stoker up` on a free port:
// the page loads without console errors, the heatmap has a cell per GPU of the simulated node,
// a job submitted through the API appears in the jobs table (ids sorted as numbers) and its
// page shows its logs, another user's token cannot see the job (API and page), and an admin can
// drain and undrain the node from the nodes view. Screenshots go to --artifacts.
//
//   node dashboard.test.mjs --stoker BUILD/bin/stoker --artifacts DIR [--chromium /usr/bin/chromium]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { check, parseArgs, runTest, startBrowser, startUp } from "./harness.mjs";

const args = parseArgs(process.argv.slice(2));
const artifacts = args.artifacts ?? path.join(os.tmpdir(), "stoker-browser-artifacts");
fs.mkdirSync(artifacts, { recursive: true });
const up = await startUp(args.stoker);
let b;

await runTest(
  "dashboard",
  async () => {
    const admin = await up.adminToken();
    const nodes = await up.waitFor("the simulated node", async () => {
      const r = await up.api("GET", "/nodes", admin);
      return r.status === 200 && r.body.length > 0 && r.body;
    });
    const node = nodes[0];
    check(node.simulated === true, `the node '${node.name}' of stoker up is simulated`);
    check(node.gpus.length > 0, `it has ${node.gpus.length} GPUs`);
    const me = os.userInfo().username;
    const userTok = (await up.api("POST", "/tokens", admin, { role: "user", name: me })).body.token;
    const otherTok = (await up.api("POST", "/tokens", admin, { role: "user", name: "someone-else" })).body.token;
    check(userTok && otherTok, "user tokens made through the API");

    // Static files are public; data calls need the token.
    const index = await fetch(`${up.base}/`);
    check(index.status === 200 && (await index.text()).includes('id="app"'), "GET / serves the dashboard without a token");
    check((await fetch(`${up.base}/api/v1/jobs`)).status === 401, "GET /api/v1/jobs without a token is refused");

    b = await startBrowser(args.chromium ?? "/usr/bin/chromium", up.base);
    const page = await b.page("user");
    await b.login(page, userTok);
    check((await page.textContent("#who")).includes(me), "logged in as the user");

    // The heatmap: a row with cells for every GPU of the simulated node.
    const want = node.gpus.map((g) => `${node.name}/${g.index}`).sort();
    const rows = await up.waitFor("a heatmap cell for every GPU", async () => {
      const r = JSON.parse((await page.getAttribute("#heatmap", "data-rows")) ?? "[]");
      return want.every((k) => r.includes(k)) && r;
    });
    check(want.every((k) => rows.includes(k)), `the heatmap has cells for all ${want.length} GPUs of ${node.name}`);
    check((await page.textContent("#heatmap-info")).includes("simulated data"), "the heatmap says its data is simulated");
    // Every GPU's row carries its zone (the engine names GPUs by UUID, the rows by node/index);
    // this early they are unknown, and the page says how much of the window is covered.
    const zones = await up.waitFor("a zone mark on every GPU's row", async () => {
      const z = JSON.parse((await page.getAttribute("#heatmap", "data-zones")) ?? "{}");
      return want.every((k) => z[k]) && z;
    });
    check(Object.values(zones).includes("unknown") ? (await page.textContent("#unknown-zones")).includes("covered") : true, `zone marks on all rows (${[...new Set(Object.values(zones))].join(", ")}), unknown ones with their coverage`);
    // The cells are painted: the chart's canvas is not blank where the grid is.
    const painted = await page.evaluate(() => {
      const c = document.querySelector("#heatmap canvas");
      const ctx = c.getContext("2d");
      const d = ctx.getImageData(0, 0, c.width, c.height).data;
      const colours = new Set();
      for (let i = 0; i < d.length; i += 4 * 97) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      return colours.size;
    });
    check(painted > 4, `the heatmap's canvas holds the painted cells (${painted} colours sampled)`);
    // Hovering a cell names its GPU and time in the tooltip.
    const box = await page.locator("#heatmap canvas").first().boundingBox();
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height * 0.4);
    const tip = await up.waitFor("the cell's tooltip", async () => {
      const t = await page.evaluate(() => [...document.querySelectorAll("#heatmap div")].map((d) => d.textContent).find((t) => t && t.includes("GPU")));
      return t;
    }, 10000);
    check(tip.includes(node.name) && tip.includes("simulated GPU"), `hovering a cell shows its GPU (${tip.slice(0, 80)}...)`);
    // Power efficiency per GPU: the rows carry the estimates of each GPU's latest sample (the
    // simulated agent reports SM and tensor activity and power), and the tooltip shows them. A
    // GPU's SM activity (GPM) needs two samples a period apart, so the node's first report may
    // carry none: the rows are read until one has an estimate, for several report intervals.
    const withEstimates = (h) => h.gpus.filter((g) => !g.mig_instance && typeof g.tflops_per_watt_estimate === "number");
    let hist;
    await up.waitFor("GPU rows with a TFLOPS/W estimate", async () => {
      hist = (await up.api("GET", "/history/gpus?window=1h&points=120", userTok)).body;
      return withEstimates(hist).length > 0;
    }, 15000).catch(() => {});
    const estimated = withEstimates(hist);
    check(estimated.length > 0, `GPU rows carry a TFLOPS/W estimate (${estimated.length} of ${node.gpus.length} GPUs; e.g. ${estimated[0]?.tflops_per_watt_estimate})`);
    // Down the chart until the pointer is on a whole GPU's row (not a MIG instance's).
    let gpuTip = "";
    let gpuTipY = 0;
    for (let f = 0.1; f < 0.9 && !gpuTip; f += 0.05) {
      await page.mouse.move(box.x + box.width * 0.6, box.y + box.height * f);
      await page.waitForTimeout(150);
      const t = await page.evaluate(() => [...document.querySelectorAll("#heatmap div")].map((d) => d.textContent).find((t) => t && t.includes("GPU")));
      if (t && !t.includes("MIG instance") && t.includes(node.name)) {
        gpuTip = t;
        gpuTipY = box.y + box.height * f;
      }
    }
    const hovered = hist.gpus.find((g) => !g.mig_instance && gpuTip.includes(`${g.node} GPU ${g.index} `));
    check(hovered, `the pointer found a GPU's row (${gpuTip.slice(0, 60)}...)`);
    // The page draws what its last refresh fetched (every 5 s), which may predate the API call
    // above: a GPU's first samples carry no estimate yet. So the tooltip is compared with the
    // API's answer for the same GPU until the two agree or two refreshes have passed.
    const tipAt = gpuTipY;
    let agreed = null;
    for (const deadline = Date.now() + 12000; Date.now() < deadline && !agreed; ) {
      await page.mouse.move(box.x + box.width * 0.6 + 1, tipAt);
      await page.mouse.move(box.x + box.width * 0.6, tipAt);
      await page.waitForTimeout(250);
      const t = await page.evaluate(() => [...document.querySelectorAll("#heatmap div")].map((d) => d.textContent).find((t) => t && t.includes("GPU")));
      const now = (await up.api("GET", "/history/gpus?window=1h&points=120", userTok)).body.gpus.find((g) => g.node === hovered.node && g.index === hovered.index && !g.mig_instance);
      const has = typeof now?.tflops_per_watt_estimate === "number";
      if (t && t.includes(`${hovered.node} GPU ${hovered.index} `) && t.includes("TFLOPS/W (estimates)") === has) agreed = { t, has };
      else gpuTip = t ?? "";
    }
    check(agreed, `the tooltip of GPU ${hovered.index} ${agreed?.has ? "shows" : "has no"} its TFLOPS/W estimate, as the API says (${(agreed?.t ?? gpuTip).match(/latest sample:[^(]*/)?.[0] ?? "none"})`);
    // Coloured by memory, every MIG instance has a row of its own under its GPU.
    await page.selectOption("#metric", "mem");
    const slices = node.gpus.flatMap((g) => (g.mig ?? []).map((m) => `${node.name}/${g.index}/${m.uuid}`));
    check(slices.length > 0, `the simulated node has MIG instances (${slices.length})`);
    await up.waitFor("a heatmap row for every MIG instance", async () => {
      const r = JSON.parse((await page.getAttribute("#heatmap", "data-rows")) ?? "[]");
      return slices.every((k) => r.includes(k));
    });
    check(true, "the heatmap has a row for every MIG instance");
    await page.screenshot({ path: path.join(artifacts, "heatmap.png"), fullPage: true });

    // A job through the API, then the jobs table and its page with its logs.
    const marker = `hello-from-the-browser-test-${process.pid}`;
    const sub = await up.api("POST", "/jobs", userTok, {
      name: "browser-test",
      command: ["sh", "-c", `echo ${marker}; echo to-stderr >&2`],
    });
    check(sub.status === 201, `job submitted through the API (id ${sub.body.id})`);
    const id = sub.body.id;
    // More jobs, so ids run past 9 and a text sort would put 10 before 9.
    for (let i = 0; i < 10; i++) await up.api("POST", "/jobs", userTok, { name: `filler-${i}`, command: ["true"] });
    await up.waitFor("the job to succeed", async () => (await up.api("GET", `/jobs/${id}`, userTok)).body.state === "succeeded");

    await page.goto(`${up.base}/#/jobs`);
    await page.waitForSelector(`#jobs-table a[href="#/jobs/${id}"]`);
    await page.click('#jobs-table th[data-col="id"]');
    const ids = await page.$$eval("#jobs-table tbody tr td:first-child", (tds) => tds.map((t) => Number(t.textContent)));
    const sorted = [...ids].sort((x, y) => x - y);
    check(ids.length >= 11 && JSON.stringify(ids) === JSON.stringify(sorted), `job ids sort as numbers (${ids.join(",")})`);
    check((await page.$$('#jobs-table th[data-col="cost"]')).length === 1, "the jobs table has a cost column");
    await page.screenshot({ path: path.join(artifacts, "jobs.png"), fullPage: true });

    await page.goto(`${up.base}/#/jobs/${id}`);
    await up.waitFor("the job's logs on its page", async () => (await page.textContent("#job-stdout")).includes(marker));
    check((await page.textContent("#job-stderr")).includes("to-stderr"), "the job page shows its stderr");
    check((await page.textContent("#job-events")).length > 0, "the job page shows its events");
    await page.screenshot({ path: path.join(artifacts, "job.png"), fullPage: true });

    for (const view of ["queue", "fragmentation", "alerts", "cost", "nodes"]) {
      await page.goto(`${up.base}/#/${view}`);
      await page.waitForSelector("#status:not(:empty)");
      await page.screenshot({ path: path.join(artifacts, `${view}.png`), fullPage: true });
      if (view === "cost") check((await page.$$("#market-off")).length === 1, "without a market, the cost view says the market is off");
    }
    check((await page.$$("button.node-action")).length === 0, "a user gets no drain buttons");
    b.noErrors("while using the dashboard");

    // Another user's token sees neither the job through the API nor on the page.
    check((await up.api("GET", `/jobs/${id}`, otherTok)).status === 404, "another user's token gets 404 for the job");
    const other = await b.page("other user", undefined, { watch: false });  // meets 404s
    await b.login(other, otherTok);
    await other.goto(`${up.base}/#/jobs`);
    await other.waitForSelector("#jobs-table");
    check((await other.$$(`#jobs-table a[href="#/jobs/${id}"]`)).length === 0, "the other user's jobs table does not list the job");
    await other.goto(`${up.base}/#/jobs/${id}`);
    await other.waitForSelector("#job-missing");
    check(!(await other.textContent("body")).includes(marker), "the other user's job page shows no log of it");
    await other.screenshot({ path: path.join(artifacts, "other-user.png"), fullPage: true });

    // An admin drains and undrains the node from the nodes view.
    const adminPage = await b.page("admin");
    await b.login(adminPage, admin);
    await adminPage.goto(`${up.base}/#/nodes`);
    await adminPage.click(`button.node-action[data-node="${node.name}"]`);
    await up.waitFor("the node to be drained", async () => (await up.api("GET", `/nodes/${node.name}`, admin)).body.drained === true);
    check(true, "an admin drained the node from the page");
    await adminPage.waitForSelector(`button.node-action[data-node="${node.name}"]:has-text("Undrain")`);
    await adminPage.click(`button.node-action[data-node="${node.name}"]`);
    await up.waitFor("the node to be ready again", async () => (await up.api("GET", `/nodes/${node.name}`, admin)).body.drained === false);
    check(true, "and undrained it");
    await adminPage.screenshot({ path: path.join(artifacts, "nodes-admin.png"), fullPage: true });
    b.noErrors("at all");
    console.log(`screenshots in ${artifacts}`);
  },
  async () => {
    if (b) await b.close();
    await up.stop();
  },
);
