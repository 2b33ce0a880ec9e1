// A scripted fake-NVML scenario through the real agent path, seen on the dashboard in Debian's
// headless Chromium: `stoker up --simulate SCENARIO` loads the fake NVML library by dlopen and
// plays a node whose GPU 1 falls off the bus 3 s in (NVML answers GPU_IS_LOST), so the
// efficiency engine raises its red GpuLost alert from the heartbeats' samples. The test checks
// that the alert appears on the alerts page and on the heatmap, that an admin can silence it and
// a user cannot, and, with idle GPUs and a compute market configured, that the reclaim log shows
// an idle job's reclaim with its evidence, the cost view shows budgets and the ledger by role, and
// the HTML report draws its charts. Screenshots go to --artifacts.
//
//   node alert.test.mjs --stoker BUILD/bin/stoker --artifacts DIR [--chromium /usr/bin/chromium]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { check, parseArgs, runTest, startBrowser, startUp } from "./harness.mjs";

const args = parseArgs(process.argv.slice(2));
const artifacts = args.artifacts ?? path.join(os.tmpdir(), "stoker-browser-artifacts");
fs.mkdirSync(artifacts, { recursive: true });
const me = os.userInfo().username;

const scenario = `
name: alert-scenario
description: "3x A100; GPU 1 is lost from t=3s on; GPUs 0 and 2 sit idle"
hostname: alert-node
gpus:
  - &a100
    model: NVIDIA A100-SXM4-80GB
    uuid: GPU-a1e70000-0000-4000-8000-000000000000
    pci_bus_id: "00000000:07:00.0"
    architecture: 7
    memory_total_mib: 81920
    power_limit_w: 400
    sm_clock_max_mhz: 1410
    mem_clock_max_mhz: 1593
    util: 0
  - <<: *a100
    uuid: GPU-a1e70000-0001-4000-8000-000000000001
    pci_bus_id: "00000000:0F:00.0"
    minor: 1
    util: 50
    lost: [{from: 3, to: 1000000}]
  - <<: *a100
    uuid: GPU-a1e70000-0002-4000-8000-000000000002
    pci_bus_id: "00000000:47:00.0"
    minor: 2
`;
// Fast evaluation, idle reclaim within seconds, and a market with two teams.
const efficiency = `
service: {evaluate_every: 1s}
idle_reclaim: {warn_after: 3s, act_after: 6s, action: cancel, idle_threshold: 5}
market:
  guaranteed_price: {"*": 3600}
  budgets: {team-a: 1000, team-b: 500}
  teams: {${JSON.stringify(me)}: team-a, someone-else: team-b}
  charge_interval: 1s
price_per_gpu_hour: {"*": 2}
`;

const up = await startUp(args.stoker, ["--simulate", "scenario.yaml", "--efficiency-config", "efficiency.yaml"], {
  "scenario.yaml": scenario,
  "efficiency.yaml": efficiency,
});
let b;

await runTest(
  "alert scenario",
  async () => {
    const admin = await up.adminToken();
    const node = await up.waitFor("the scenario's node", async () => {
      const r = await up.api("GET", "/nodes", admin);
      return r.status === 200 && r.body.find((n) => n.gpus.length === 3);
    });
    check(node.simulated, `the node '${node.name}' plays the scenario (simulated, 3 GPUs)`);
    const userTok = (await up.api("POST", "/tokens", admin, { role: "user", name: me })).body.token;
    const otherTok = (await up.api("POST", "/tokens", admin, { role: "user", name: "someone-else" })).body.token;

    // The alert, raised from the lost GPU's samples (NVML said GPU_IS_LOST through dlopen).
    const lost = await up.waitFor(
      "the GpuLost alert to fire",
      async () => (await up.api("GET", "/alerts", admin)).body.find((a) => a.rule === "GpuLost" && a.state === "firing"),
      60000,
    );
    check(lost.grade === "red" && lost.labels.hostname === node.name && lost.labels.uuid === node.gpus[1].uuid, `GpuLost fires, red, on GPU 1 (${lost.subject})`);

    b = await startBrowser(args.chromium ?? "/usr/bin/chromium", up.base);
    const adminPage = await b.page("admin");
    await b.login(adminPage, admin);
    await adminPage.goto(`${up.base}/#/alerts`);
    const row = adminPage.locator("#alerts-table tbody tr", { hasText: "GpuLost" });
    await row.waitFor();
    const text = await row.textContent();
    check(text.includes("red") && text.includes("firing") && text.includes(lost.subject), `the alerts page lists it: ${text.replace(/\s+/g, " ").slice(0, 120)}`);
    check(text.includes("simulated data"), "the alert is labelled as coming from a simulated GPU");
    await adminPage.screenshot({ path: path.join(artifacts, "alert-firing.png"), fullPage: true });

    // On the heatmap, the lost GPU's row carries the alert mark.
    await adminPage.goto(`${up.base}/#/`);
    const alerted = await up.waitFor("the heatmap's alert marks", async () => {
      const a = JSON.parse((await adminPage.getAttribute("#heatmap", "data-alerted")) ?? "[]");
      return a.length > 0 && a;
    }, 20000);
    check(alerted.includes(`${node.name}/1`), `the heatmap marks GPU 1's row (${alerted.join(", ")})`);
    await adminPage.screenshot({ path: path.join(artifacts, "alert-heatmap.png"), fullPage: true });

    // An admin silences it from the page; a user has no silence button.
    await adminPage.goto(`${up.base}/#/alerts`);
    await adminPage.locator('button.silence-alert[data-rule="GpuLost"]').first().click();
    await up.waitFor("the alert to be silenced", async () => (await up.api("GET", "/alerts", admin)).body.find((a) => a.rule === "GpuLost")?.silenced === true, 20000);
    check(true, "an admin silenced the alert from the page");
    await adminPage.waitForSelector("#silences-table button.silence-delete");
    await adminPage.screenshot({ path: path.join(artifacts, "alert-silenced.png"), fullPage: true });
    await adminPage.click("#silences-table button.silence-delete");
    await up.waitFor("the silence to be gone", async () => (await up.api("GET", "/silences", admin)).body.length === 0, 20000);
    check(true, "and deleted the silence");

    // Two idle GPU jobs of the user: each lands on an idle GPU or the lost one, so at least one
    // is idle on a live GPU and is warned, then cancelled, by idle reclaim.
    const jobs = [];
    for (let i = 0; i < 2; i++) {
      const r = await up.api("POST", "/jobs", userTok, { name: `idle-${i}`, gpus: 1, command: ["sleep", "120"] });
      check(r.status === 201, `idle GPU job ${r.body.id} submitted`);
      jobs.push(String(r.body.id));
    }
    const reclaimed = await up.waitFor(
      "idle reclaim to act on a job",
      async () => (await up.api("GET", "/reclaim", userTok)).body.find((r) => jobs.includes(r.job) && r.action === "cancel"),
      60000,
    );
    check(reclaimed.evidence.samples > 0, `job ${reclaimed.job} was cancelled as idle with evidence (${reclaimed.evidence.samples} samples)`);
    const userPage = await b.page("user");
    await b.login(userPage, userTok);
    await userPage.goto(`${up.base}/#/alerts`);
    const rrow = userPage.locator("#reclaim-table tbody tr", { hasText: "cancel" }).first();
    await rrow.waitFor();
    const rtext = (await rrow.textContent()).replace(/\s+/g, " ");
    check(rtext.includes(reclaimed.job) && rtext.includes(`${reclaimed.evidence.samples}`) && rtext.includes("warn after 3s"), `the user's reclaim log shows it with its evidence: ${rtext.slice(0, 160)}`);
    check((await userPage.$$("button.silence-alert")).length === 0, "a user gets no silence buttons");
    await userPage.screenshot({ path: path.join(artifacts, "reclaim-log.png"), fullPage: true });
    const otherPage = await b.page("other user");
    await b.login(otherPage, otherTok);
    await otherPage.goto(`${up.base}/#/alerts`);
    await otherPage.waitForSelector("#reclaim p, #reclaim-table");
    check(!(await otherPage.textContent("#reclaim")).includes(`#/jobs/${reclaimed.job}`) && (await otherPage.$$(`#reclaim a[href="#/jobs/${reclaimed.job}"]`)).length === 0, "another user's reclaim log does not show it");

    // Cost and market: the user sees their team's budget and the charges for their jobs; the
    // other user only their own team; the admin every team.
    await up.waitFor("a charge for the user's jobs", async () => (await up.api("GET", "/ledger", userTok)).body.some((e) => e.kind === "charge" && jobs.includes(e.job)), 30000);
    await userPage.goto(`${up.base}/#/cost`);
    await userPage.waitForSelector("#budgets-table");
    const userTeams = await userPage.$$eval("#budgets-table tbody tr td:first-child", (tds) => tds.map((t) => t.textContent));
    check(JSON.stringify(userTeams) === JSON.stringify(["team-a"]), `the user's cost view shows their team only (${userTeams.join(",")})`);
    await userPage.waitForSelector("#ledger-table");
    const ledgerText = await userPage.textContent("#ledger-table");
    check(ledgerText.includes("charge") && jobs.some((j) => ledgerText.includes(j)), "their ledger lists the charges for their jobs");
    check((await userPage.textContent("main")).includes("simulated data"), "the cost view labels charges for simulated GPUs");
    await userPage.waitForSelector("#balance-chart canvas");
    await userPage.screenshot({ path: path.join(artifacts, "cost-user.png"), fullPage: true });
    await otherPage.goto(`${up.base}/#/cost`);
    await otherPage.waitForSelector("#budgets-table");
    const otherTeams = await otherPage.$$eval("#budgets-table tbody tr td:first-child", (tds) => tds.map((t) => t.textContent));
    check(JSON.stringify(otherTeams) === JSON.stringify(["team-b"]), `the other user's shows team-b only (${otherTeams.join(",")})`);
    check(!(await otherPage.textContent("#ledger")).includes("team-a"), "and none of team-a's ledger");
    await adminPage.goto(`${up.base}/#/cost`);
    await adminPage.waitForSelector("#budgets-table");
    const adminTeams = await adminPage.$$eval("#budgets-table tbody tr td:first-child", (tds) => tds.map((t) => t.textContent).sort());
    check(JSON.stringify(adminTeams) === JSON.stringify(["team-a", "team-b"]), `the admin's shows every team (${adminTeams.join(",")})`);
    await adminPage.screenshot({ path: path.join(artifacts, "cost-admin.png"), fullPage: true });

    // The HTML report draws its charts with the same library, offline, from one file.
    const res = await fetch(`${up.base}/api/v1/report?format=html`, { headers: { Authorization: `Bearer ${userTok}` } });
    check(res.status === 200, "GET /report?format=html answers");
    const reportFile = path.join(artifacts, "report.html");
    fs.writeFileSync(reportFile, await res.text());
    const reportPage = await b.page("report");
    await reportPage.route("**/*", (route) => (route.request().url().startsWith("file:") ? route.continue() : route.abort()));
    await reportPage.goto(`file://${reportFile}`);
    await reportPage.waitForSelector('body[data-charts="drawn"]', { timeout: 20000 });
    for (const id of ["chart-cluster", "chart-owners", "chart-cost"]) {
      check((await reportPage.$$(`#${id} canvas`)).length > 0, `the report file draws #${id} with no network`);
    }
    await reportPage.screenshot({ path: path.join(artifacts, "report.png"), fullPage: true });
    b.noErrors("on any page");
    console.log(`screenshots in ${artifacts}`);
  },
  async () => {
    if (b) await b.close();
    await up.stop();
  },
);
