#!/usr/bin/env python3
"""Writes Stoker's Grafana dashboards (deploy/grafana/dashboards/*.json, classic JSON model,
schemaVersion 41) from the panel lists below: grafana-dashboards.py [OUT_DIR].

Every dashboard takes its Prometheus data source as the template variable `datasource`
(no data source is hard-coded), lays panels on a 24-column grid without overlap, and uses
$__rate_interval wherever a rate is taken. tests/grafana/check_dashboards.py checks all of
that, that the committed files are what this script writes, and runs every panel's query
against a real Prometheus scraping a simulated agent and a server with jobs."""
import json
import pathlib
import sys

DS = {"type": "prometheus", "uid": "${datasource}"}
SCHEMA_VERSION = 41


def var_datasource():
    return {"name": "datasource", "label": "Data source", "type": "datasource",
            "query": "prometheus", "current": {}, "hide": 0, "refresh": 1, "regex": "",
            "options": []}


def var_query(name, query, label, multi=True, include_all=True, all_value=".*"):
    v = {"name": name, "label": label, "type": "query", "datasource": DS,
         "query": {"query": query, "refId": f"{name}-var"}, "definition": query,
         "refresh": 2, "sort": 1, "multi": multi, "includeAll": include_all,
         "current": {}, "options": [], "hide": 0, "regex": ""}
    if include_all:
        v["allValue"] = all_value
    return v


def var_custom(name, label, value):
    return {"name": name, "label": label, "type": "textbox", "query": value,
            "current": {"text": value, "value": value}, "options": [], "hide": 0}


class Layout:
    """Places panels left to right in rows of 24 columns."""

    def __init__(self):
        self.x = 0
        self.y = 0
        self.row_h = 0
        self.next_id = 1
        self.panels = []

    def add(self, panel, w, h):
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        panel["id"] = self.next_id
        self.next_id += 1
        panel["gridPos"] = {"x": self.x, "y": self.y, "w": w, "h": h}
        self.x += w
        self.row_h = max(self.row_h, h)
        self.panels.append(panel)

    def row(self, title):
        if self.x:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        self.add({"type": "row", "title": title, "collapsed": False, "panels": []}, 24, 1)
        self.x, self.y, self.row_h = 0, self.y + 1, 0


def target(expr, legend="", ref="A", instant=False):
    t = {"datasource": DS, "expr": expr, "refId": ref, "legendFormat": legend or "__auto"}
    if instant:
        t["instant"] = True
        t["range"] = False
    return t


def panel(kind, title, targets, unit="", description="", extra=None, max_=None):
    p = {"type": kind, "title": title, "description": description, "datasource": DS,
         "targets": [target(*t) if isinstance(t, tuple) else target(t) for t in targets],
         "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}, "options": {}}
    if max_ is not None:
        p["fieldConfig"]["defaults"]["min"] = 0
        p["fieldConfig"]["defaults"]["max"] = max_
    if kind == "stat":
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area", "textMode": "auto"}
    if kind == "state-timeline":
        p["options"] = {"showValue": "never", "mergeValues": False, "rowHeight": 0.9,
                        "legend": {"showLegend": True, "displayMode": "list",
                                   "placement": "bottom"}}
        p["fieldConfig"]["defaults"]["color"] = {"mode": "continuous-GrYlRd"}
    if extra:
        p.update(extra)
    return p


def dashboard(uid, title, description, variables, layout, tags):
    return {"uid": uid, "title": title, "description": description, "tags": ["stoker"] + tags,
            "schemaVersion": SCHEMA_VERSION, "version": 1, "editable": True,
            "graphTooltip": 1, "timezone": "browser", "refresh": "30s",
            "time": {"from": "now-6h", "to": "now"}, "timepicker": {},
            "templating": {"list": variables}, "annotations": {"list": []},
            "links": [{"title": "Stoker", "type": "dashboards", "tags": ["stoker"],
                       "asDropdown": True, "includeVars": True, "keepTime": True}],
            "panels": layout.panels}


H = 'hostname=~"$hostname"'


def fleet():
    L = Layout()
    L.row("Fleet")
    L.add(panel("stat", "GPUs up", [f"sum(stoker_gpu_up{{{H}}})"]), 4, 4)
    L.add(panel("stat", "Mean GPU utilization", [f"avg(stoker_gpu_utilization_ratio{{{H}}})"],
                "percentunit", max_=1), 4, 4)
    L.add(panel("stat", "Idle GPU-hours (24 h)",
                [f"sum(sum_over_time((stoker_gpu_utilization_ratio{{{H}}} < bool 0.05)[24h:1m])) / 60"],
                "h", "GPU-hours in which the GPU ran kernels less than 5 % of the time"), 4, 4)
    L.add(panel("stat", "Wasted cost (24 h)",
                [f"sum(sum_over_time((stoker_gpu_utilization_ratio{{{H}}} < bool 0.05)[24h:1m])) / 60 * $price"],
                "currencyUSD", "Idle GPU-hours times the price per GPU-hour (variable price)"), 4, 4)
    L.add(panel("stat", "Fleet power", [f"sum(stoker_gpu_power_watts{{{H}}})"], "watt"), 4, 4)
    L.add(panel("stat", "Nodes by data source",
                [("count by (simulated) (stoker_agent_info{%s})" % H, "simulated={{simulated}}")],
                description="simulated=true: the readings come from the fake NVML, not hardware"),
          4, 4)
    L.add(panel("timeseries", "Allocation next to utilization", [
        ('sum(stoker_server_gpus{commitment=~"full|partial|oversubscribed"}) / sum(stoker_server_gpus)',
         "allocated (server)"),
        (f"avg(stoker_gpu_utilization_ratio{{{H}}})", "utilized (agents)"),
        (f"avg(stoker_gpu_sm_active_ratio{{{H}}})", "SM active (agents)", "C")],
        "percentunit", "Share of GPUs that jobs hold, against how busy the GPUs are", max_=1), 12, 8)
    L.add(panel("piechart", "GPUs by efficiency zone",
                [("sum by (zone) (stoker_efficiency_gpu_zone)", "{{zone}}")],
                description="Zones of the efficiency engine (window mean activity)"), 6, 8)
    L.add(panel("timeseries", "Jobs by state",
                [("sum by (state) (stoker_server_jobs)", "{{state}}")]), 6, 8)
    L.add(panel("timeseries", "Utilization per node",
                [(f"avg by (hostname) (stoker_gpu_utilization_ratio{{{H}}})", "{{hostname}}")],
                "percentunit", max_=1), 12, 8)
    L.add(panel("timeseries", "Energy use per node",
                [(f"sum by (hostname) (rate(stoker_gpu_energy_joules_total{{{H}}}[$__rate_interval]))",
                  "{{hostname}}")], "watt"), 12, 8)
    L.add(panel("timeseries", "GPU commitments (server)",
                [("sum by (commitment) (stoker_server_gpus)", "{{commitment}}")]), 12, 7)
    L.add(panel("timeseries", "Nodes by state (server)",
                [("sum by (state) (stoker_server_nodes)", "{{state}}")]), 12, 7)
    return dashboard("stoker-fleet", "Stoker / Fleet",
                     "Zones, idle GPU-hours, wasted cost, allocation next to utilization",
                     [var_datasource(),
                      var_query("hostname", "label_values(stoker_gpu_up, hostname)", "Node"),
                      var_custom("price", "Price per GPU-hour", "2.5")], L, ["fleet"])


N = 'hostname=~"$hostname"'


def node_job():
    L = Layout()
    L.row("One row per GPU")
    L.add(panel("state-timeline", "GPU utilization, one row per GPU",
                [(f"stoker_gpu_utilization_ratio{{{N}}}", "{{hostname}} GPU {{gpu}}")],
                "percentunit", "gpudash-style grid: each row a GPU, colour its utilization",
                max_=1), 24, 10)
    L.add(panel("state-timeline", "GPU memory used, one row per GPU",
                [(f"stoker_gpu_memory_used_bytes{{{N}}} / stoker_gpu_memory_total_bytes{{{N}}}",
                  "{{hostname}} GPU {{gpu}}")], "percentunit", max_=1), 24, 10)
    L.row("Node")
    L.add(panel("timeseries", "SM active", [(f"stoker_gpu_sm_active_ratio{{{N}}}", "GPU {{gpu}}")],
                "percentunit", max_=1), 8, 8)
    L.add(panel("timeseries", "Tensor pipes active",
                [(f"stoker_gpu_tensor_active_ratio{{{N}}}", "GPU {{gpu}}")], "percentunit",
                max_=1), 8, 8)
    L.add(panel("timeseries", "DRAM bandwidth",
                [(f"stoker_gpu_dram_active_ratio{{{N}}}", "GPU {{gpu}}")], "percentunit",
                "Memory-subsystem efficiency; L2 hit rate is not exposed by NVML or DCGM "
                "(docs/metrics.md)", max_=1), 8, 8)
    L.add(panel("timeseries", "Power", [(f"stoker_gpu_power_watts{{{N}}}", "GPU {{gpu}}"),
                                        (f"stoker_gpu_power_limit_watts{{{N}}}", "limit GPU {{gpu}}", "B")],
                "watt"), 8, 8)
    L.add(panel("timeseries", "Temperature",
                [(f"stoker_gpu_temperature_celsius{{{N}}}", "GPU {{gpu}}")], "celsius"), 8, 8)
    L.add(panel("timeseries", "NVLink transmit",
                [(f"rate(stoker_gpu_nvlink_transmit_bytes_total{{{N}}}[$__rate_interval])",
                  "GPU {{gpu}}")], "Bps"), 8, 8)
    L.add(panel("timeseries", "Host load", [(f"stoker_host_load1{{{N}}}", "{{hostname}}")]), 12, 6)
    L.add(panel("timeseries", "Energy", [(f"rate(stoker_gpu_energy_joules_total{{{N}}}[$__rate_interval])",
                                          "GPU {{gpu}}")], "watt"), 12, 6)
    # The server's estimates carry only the GPU's uuid: "(up >= bool 0)" is 1 for every GPU of
    # the chosen nodes and gives the product their hostname and index.
    on_node = f"(stoker_gpu_up{{{N}}} >= bool 0) * on(uuid) group_left()"
    L.add(panel("timeseries", "Achieved TFLOPS (estimate)",
                [(f"{on_node} stoker_efficiency_gpu_tflops_estimate", "{{hostname}} GPU {{gpu}}")],
                "", "ESTIMATE: tensor activity x tensor peak + the rest of SM activity x FP32 peak "
                "(data-sheet peaks of the model; docs/metrics.md)"), 12, 8)
    L.add(panel("timeseries", "Power efficiency: TFLOPS per watt (estimate)",
                [(f"{on_node} stoker_efficiency_gpu_tflops_per_watt_estimate",
                  "{{hostname}} GPU {{gpu}}")],
                "", "ESTIMATE: the achieved-TFLOPS estimate over the GPU's power draw"), 12, 8)
    L.row("Job")
    J = 'jobid=~"$jobid"'
    L.add(panel("table", "Jobs on these GPUs",
                [(f"stoker_gpu_job_info{{{N},{J}}}", "", "A", True)],
                extra={"transformations": [{"id": "labelsToFields", "options": {}}]}), 24, 6)
    L.add(panel("timeseries", "Job's GPU utilization",
                [(f"stoker_gpu_job_info{{{N},{J}}} * on(uuid) group_left() "
                  "stoker_gpu_utilization_ratio", "job {{jobid}} ({{user}}) GPU {{gpu}}")],
                "percentunit", max_=1), 12, 8)
    L.add(panel("timeseries", "Job's GPU memory",
                [(f"stoker_gpu_job_memory_used_bytes{{{N},{J}}}", "job {{jobid}} GPU {{gpu}}")],
                "bytes"), 12, 8)
    L.add(panel("timeseries", "Job's processes' SM use",
                [(f"stoker_gpu_process_sm_utilization_ratio{{{N},{J}}}",
                  "job {{jobid}} pid {{pid}} GPU {{gpu}}")], "percentunit", max_=1), 12, 8)
    L.add(panel("timeseries", "Job's TFLOPS per watt (estimate, per GPU)",
                [(f"stoker_gpu_job_info{{{N},{J}}} * on(uuid) group_left() "
                  "stoker_efficiency_gpu_tflops_per_watt_estimate", "job {{jobid}} GPU {{gpu}}")],
                "", "ESTIMATE: each of the job's GPUs' achieved-TFLOPS estimate over its power"),
          12, 8)
    L.add(panel("timeseries", "Job's power (its GPUs)",
                [(f"sum by (jobid) (stoker_gpu_job_info{{{N},{J}}} * on(uuid) group_left() "
                  "stoker_gpu_power_watts)", "job {{jobid}}")], "watt",
                "A GPU shared by several jobs counts in full for each of them"), 12, 8)
    return dashboard("stoker-node-job", "Stoker / Node and job",
                     "Drill-down to a node's GPUs (one row per GPU) and a job's GPUs",
                     [var_datasource(),
                      var_query("hostname", "label_values(stoker_gpu_up, hostname)", "Node"),
                      var_query("jobid", 'label_values(stoker_gpu_job_info{hostname=~"$hostname"}, jobid)',
                                "Job")], L, ["node", "job"])


def mig_shared():
    L = Layout()
    L.row("MIG instances")
    M = 'hostname=~"$hostname"'
    L.add(panel("table", "MIG layout", [(f"stoker_mig_slices{{{M}}}", "", "A", True)],
                extra={"transformations": [{"id": "labelsToFields", "options": {}}]}), 24, 7)
    L.add(panel("timeseries", "MIG SM active",
                [(f"stoker_mig_sm_active_ratio{{{M}}}", "GPU {{gpu}} {{mig_profile}} gi{{gpu_instance}}")],
                "percentunit", max_=1), 12, 8)
    L.add(panel("timeseries", "MIG memory used",
                [(f"stoker_mig_memory_used_bytes{{{M}}} / stoker_mig_memory_total_bytes{{{M}}}",
                  "GPU {{gpu}} {{mig_profile}} gi{{gpu_instance}}")], "percentunit", max_=1), 12, 8)
    L.add(panel("timeseries", "MIG DRAM bandwidth",
                [(f"stoker_mig_dram_active_ratio{{{M}}}", "GPU {{gpu}} {{mig_profile}} gi{{gpu_instance}}")],
                "percentunit", max_=1), 12, 8)
    L.add(panel("stat", "GPUs in MIG mode", [f"sum(stoker_gpu_mig_enabled{{{M}}})"]), 12, 8)
    L.row("Shared GPUs")
    L.add(panel("timeseries", "Processes per GPU",
                [(f"stoker_gpu_processes{{{M}}}", "{{hostname}} GPU {{gpu}}")]), 12, 8)
    L.add(panel("timeseries", "Memory per job on each GPU",
                [(f"stoker_gpu_job_memory_used_bytes{{{M}}}", "GPU {{gpu}} job {{jobid}}")], "bytes"),
          12, 8)
    L.add(panel("timeseries", "Jobs per GPU",
                [(f"count by (hostname, gpu) (stoker_gpu_job_info{{{M}}})", "{{hostname}} GPU {{gpu}}")]),
          12, 8)
    L.add(panel("timeseries", "GPU commitments (server)",
                [("sum by (commitment) (stoker_server_gpus)", "{{commitment}}"),
                 ("stoker_server_gpu_oversubscription_ratio", "oversubscription cap", "B")]), 12, 8)
    return dashboard("stoker-mig-shared", "Stoker / MIG and shared GPUs",
                     "MIG instances drawn as what they are; GPUs shared by several jobs",
                     [var_datasource(),
                      var_query("hostname", "label_values(stoker_gpu_up, hostname)", "Node")],
                     L, ["mig"])


def frag_alerts():
    L = Layout()
    L.row("Fragmentation")
    L.add(panel("timeseries", "Fragmented and free GPUs", [
        ("stoker_scheduler_fragmented_gpus", "fragmented (FGD)"),
        ("stoker_scheduler_free_gpus", "free", "B")], "",
        "Free GPU capacity the typical request shapes cannot use (sampled once a minute)"), 16, 8)
    L.add(panel("stat", "Fragmented share of free",
                ["stoker_scheduler_fragmented_gpus / clamp_min(stoker_scheduler_free_gpus, 1)"],
                "percentunit"), 8, 8)
    L.add(panel("timeseries", "Placements and preemptions", [
        ("rate(stoker_scheduler_placements_total[$__rate_interval])", "placements/s"),
        ("rate(stoker_scheduler_preemptions_total[$__rate_interval])", "preemptions/s", "B")],
        "ops"), 12, 8)
    L.add(panel("timeseries", "Queued jobs next to free GPUs", [
        ('sum(stoker_server_jobs{state="queued"})', "queued jobs"),
        ('sum(stoker_server_gpus{commitment="free"})', "free GPUs", "B")],
        description="Jobs waiting while whole GPUs are free: fragmentation or shapes that do not fit"),
          12, 8)
    L.row("Alerts")
    L.add(panel("timeseries", "Active alerts by grade",
                [("sum by (grade) (stoker_efficiency_alerts)", "{{grade}}")]), 12, 8)
    L.add(panel("table", "Active alerts", [("stoker_efficiency_alerts", "", "A", True)],
                extra={"transformations": [{"id": "labelsToFields", "options": {}}]}), 12, 8)
    L.add(panel("timeseries", "Idle-reclaim actions",
                [("sum by (action) (increase(stoker_efficiency_reclaim_actions_total[$__rate_interval]))",
                  "{{action}}")]), 12, 8)
    L.add(panel("timeseries", "XID errors", [
        ('sum by (hostname, grade) (increase(stoker_gpu_xid_errors_total{hostname=~"$hostname"}[$__rate_interval])) or '
         'sum by (hostname) (stoker_gpu_last_xid{hostname=~"$hostname"})', "{{hostname}} {{grade}}")]), 12, 8)
    return dashboard("stoker-fragmentation-alerts", "Stoker / Fragmentation and alerts",
                     "The scheduler's fragmentation, backlog, graded alerts and reclaim",
                     [var_datasource(),
                      var_query("hostname", "label_values(stoker_gpu_up, hostname)", "Node")],
                     L, ["alerts"])


DASHBOARDS = {"stoker-fleet.json": fleet, "stoker-node-job.json": node_job,
              "stoker-mig-shared.json": mig_shared,
              "stoker-fragmentation-alerts.json": frag_alerts}


def render():
    return {name: json.dumps(make(), indent=2, sort_keys=True) + "\n"
            for name, make in DASHBOARDS.items()}


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                       pathlib.Path(__file__).resolve().parent.parent / "deploy/grafana/dashboards")
    out.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        (out / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
