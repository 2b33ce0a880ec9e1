#!/usr/bin/env python3
"""Checks Stoker's Grafana dashboards (deploy/grafana/dashboards).

  check_dashboards.py structure
      schemaVersion 41 or 42; unique panel ids; panels inside the 24-column grid and not
      overlapping; no hard-coded data source (every panel and query uses ${datasource}, and a
      datasource variable exists); every rate()/increase()/irate() over $__rate_interval; the
      committed files are what scripts/grafana-dashboards.py writes; stoker_gpu_job_info never
      the "one" side of a group_left join (a shared GPU has a series per job, and Prometheus
      refuses such a join: put job_info on the left, `job_info * on(uuid) group_left() x`).

  check_dashboards.py live --stoker BIN [--prometheus /usr/bin/prometheus]
      starts `stoker server`, a simulated `stoker agent` (h100-mig-node: MIG, jobs) joined to
      it, a job submitted through the API, and Debian's Prometheus scraping both; then runs
      every panel's query (variables filled the way Grafana fills them: each query variable
      with its first value) and fails for any query that returns no series.
"""
import argparse
import importlib.util
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
DASH_DIR = ROOT / "deploy/grafana/dashboards"
RATE = re.compile(r"\b(rate|irate|increase)\(([^()]|\([^()]*\))*?\[([^\]]+)\]")
JOB_INFO_ONE_SIDE = re.compile(r"group_left\s*\([^)]*\)\s*\(?\s*stoker_gpu_job_info\b")


def load():
    return {p.name: json.loads(p.read_text()) for p in sorted(DASH_DIR.glob("*.json"))}


def panels_of(d):
    for p in d["panels"]:
        yield p
        yield from p.get("panels", [])


def structure():
    problems = []
    dashboards = load()
    if len(dashboards) < 4:
        problems.append(f"{DASH_DIR}: expected at least 4 dashboards, found {len(dashboards)}")
    spec = importlib.util.spec_from_file_location("gen", ROOT / "scripts/grafana-dashboards.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for name, text in gen.render().items():
        path = DASH_DIR / name
        if not path.exists() or path.read_text() != text:
            problems.append(f"{path}: not what scripts/grafana-dashboards.py writes (run it)")
    uids = set()
    for name, d in dashboards.items():
        where = lambda what: f"{name}: {what}"
        if d.get("schemaVersion") not in (41, 42):
            problems.append(where(f"schemaVersion {d.get('schemaVersion')}, want 41 or 42"))
        if d.get("uid") in uids:
            problems.append(where(f"uid {d.get('uid')} used twice"))
        uids.add(d.get("uid"))
        variables = d.get("templating", {}).get("list", [])
        if not any(v.get("type") == "datasource" and v.get("query") == "prometheus"
                   for v in variables):
            problems.append(where("no Prometheus datasource template variable"))
        for v in variables:
            ds = v.get("datasource")
            if ds is not None and (not isinstance(ds, dict) or ds.get("uid") != "${datasource}"):
                problems.append(where(f"variable {v['name']}: hard-coded datasource {ds}"))
        ids = set()
        boxes = []
        for p in panels_of(d):
            title = p.get("title", "?")
            if p.get("id") in ids:
                problems.append(where(f"panel id {p.get('id')} ({title}) used twice"))
            ids.add(p.get("id"))
            g = p.get("gridPos", {})
            x, y, w, h = g.get("x", -1), g.get("y", -1), g.get("w", 0), g.get("h", 0)
            if x < 0 or y < 0 or w <= 0 or h <= 0 or x + w > 24:
                problems.append(where(f"panel '{title}': gridPos {g} outside the 24-column grid"))
            for (ox, oy, ow, oh, other) in boxes:
                if x < ox + ow and ox < x + w and y < oy + oh and oy < y + h:
                    problems.append(where(f"panels '{title}' and '{other}' overlap"))
            boxes.append((x, y, w, h, title))
            if p.get("type") == "row":
                continue
            if p.get("datasource") != {"type": "prometheus", "uid": "${datasource}"}:
                problems.append(where(f"panel '{title}': datasource {p.get('datasource')} "
                                      "is not the ${datasource} variable"))
            if not p.get("targets"):
                problems.append(where(f"panel '{title}': no query"))
            for t in p.get("targets", []):
                if t.get("datasource") != {"type": "prometheus", "uid": "${datasource}"}:
                    problems.append(where(f"panel '{title}' {t.get('refId')}: hard-coded datasource"))
                expr = t.get("expr", "")
                if JOB_INFO_ONE_SIDE.search(expr):
                    problems.append(where(f"panel '{title}': stoker_gpu_job_info as the one side "
                                          "of group_left fails on a GPU shared by two jobs"))
                for m in RATE.finditer(expr):
                    if m.group(3) != "$__rate_interval":
                        problems.append(where(f"panel '{title}': {m.group(1)}() over "
                                              f"[{m.group(3)}], want [$__rate_interval]"))
    return problems


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url, token=None, data=None):
    req = urllib.request.Request(url, data=None if data is None else json.dumps(data).encode())
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"null")


def wait(what, fn, timeout=60):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - keep trying until the deadline
            last = e
        time.sleep(0.5)
    raise SystemExit(f"FAIL: timed out waiting for {what} (last: {last})")


def live(stoker, prometheus):
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="stoker-grafana-"))
    procs = []
    env = {k: v for k, v in os.environ.items() if k not in ("STOKER_SERVER", "STOKER_TOKEN")}
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    env["XDG_STATE_HOME"] = str(tmp / "state")

    def start(args, log):
        p = subprocess.Popen(args, stdout=open(tmp / log, "w"), stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        procs.append(p)
        return p

    try:
        sp, ap, pp = free_port(), free_port(), free_port()
        server = f"http://127.0.0.1:{sp}"
        start([stoker, "server", "--data-dir", str(tmp / "data"), "--listen", f"127.0.0.1:{sp}"],
              "server.log")
        admin = wait("the admin token", lambda: (tmp / "data/admin.token").exists() and
                     (tmp / "data/admin.token").read_text().strip())
        wait("the server", lambda: http(f"{server}/api/v1/health"))
        agent_tok = http(f"{server}/api/v1/tokens", admin,
                         {"role": "agent", "name": "simnode"})["token"]
        prom_tok = http(f"{server}/api/v1/tokens", admin,
                        {"role": "user", "name": "prometheus"})["token"]
        start([stoker, "agent", "--simulate", "h100-mig-node", "--hostname", "simnode",
               "--listen", f"127.0.0.1:{ap}", "--interval", "1s", "--server", server,
               "--token", agent_tok, "--state-dir", str(tmp / "node"), "--allow-root-jobs"],
              "agent.log")
        wait("the node to register", lambda: http(f"{server}/api/v1/nodes", admin))
        job = http(f"{server}/api/v1/jobs", admin, {"command": ["sleep", "120"], "gpus": 1})
        (tmp / "server.token").write_text(prom_tok + "\n")
        (tmp / "prometheus.yml").write_text(f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: stoker-agent
    static_configs: [{{targets: ["127.0.0.1:{ap}"]}}]
  - job_name: stoker-server
    authorization: {{type: Bearer, credentials_file: {tmp}/server.token}}
    static_configs: [{{targets: ["127.0.0.1:{sp}"]}}]
""")
        start([prometheus, f"--config.file={tmp}/prometheus.yml", f"--storage.tsdb.path={tmp}/tsdb",
               f"--web.listen-address=127.0.0.1:{pp}"], "prometheus.log")
        prom = f"http://127.0.0.1:{pp}/api/v1"

        def query(expr):
            q = urllib.parse.urlencode({"query": expr})
            return http(f"{prom}/query?{q}")["data"]["result"]

        wait("Prometheus to scrape both targets", lambda: len(query("up == 1")) == 2)
        wait("the job to run", lambda: http(f"{server}/api/v1/jobs/{job['id']}", admin)["state"]
             == "running")
        # The alert panels need an alert: the simulated node's idle GPUs raise one some seconds
        # after the job starts (8 s was not always enough), so wait for it to be scraped.
        wait("Prometheus to scrape an active efficiency alert",
             lambda: len(query("stoker_efficiency_alerts")) > 0, timeout=120)
        # A few scrapes, so rates have two points, and a minute boundary after the first one,
        # so the [24h:1m] subqueries (aligned to whole minutes) have a step with data.
        first = time.time()
        time.sleep(max(8.0, 60 - first % 60 + 3))
        failures, count = [], 0
        for name, d in load().items():
            values = {"__rate_interval": "15s", "datasource": "prometheus"}
            for v in d["templating"]["list"]:
                if v["type"] == "textbox":
                    values[v["name"]] = v["query"]
            # Query variables in order, each with its first value (as Grafana does by default).
            for v in d["templating"]["list"]:
                if v["type"] != "query":
                    continue
                m = re.match(r"label_values\((.*),\s*(\w+)\)$", v["query"]["query"])
                series = query(substitute(m.group(1), values))
                found = sorted({s["metric"].get(m.group(2)) for s in series} - {None})
                if not found:
                    failures.append(f"{name}: variable {v['name']} has no value")
                    continue
                values[v["name"]] = found[0]
            for p in panels_of(d):
                for t in p.get("targets", []):
                    expr = substitute(t["expr"], values)
                    count += 1
                    try:
                        res = query(expr)
                    except urllib.error.HTTPError as e:
                        failures.append(f"{name} '{p['title']}': {expr}: {e.read()[:300]}")
                        continue
                    if not res:
                        failures.append(f"{name} '{p['title']}': no series for {expr}")
        for f in failures:
            print("FAIL:", f)
        print(f"{count} panel queries run against Prometheus, {len(failures)} without series")
        return 1 if failures else 0
    finally:
        for p in reversed(procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(p.pid, signal.SIGKILL)
        if os.environ.get("STOKER_KEEP_TMP"):
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def substitute(expr, values):
    return re.sub(r"\$\{?(\w+)\}?", lambda m: values.get(m.group(1), m.group(0)), expr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["structure", "live"])
    ap.add_argument("--stoker")
    ap.add_argument("--prometheus", default=shutil.which("prometheus") or "/usr/bin/prometheus")
    a = ap.parse_args()
    if a.mode == "structure":
        problems = structure()
        for p in problems:
            print("FAIL:", p)
        print(f"{len(load())} dashboards checked, {len(problems)} problems")
        return 1 if problems else 0
    if not a.stoker or not os.path.exists(a.stoker):
        print(f"FAIL: --stoker: no binary at {a.stoker}")
        return 1
    if not os.path.exists(a.prometheus):
        print(f"FAIL: no prometheus at {a.prometheus} (Debian: apt-get install prometheus)")
        return 1
    return live(a.stoker, a.prometheus)


if __name__ == "__main__":
    sys.exit(main())
