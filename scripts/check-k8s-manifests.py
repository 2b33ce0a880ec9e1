#!/usr/bin/env python3
"""Renders deploy/kubernetes with `kubectl kustomize` and checks what comes out.

What is checked (each failure names the object and the field):
  - the objects the guide relies on exist, in the namespace, with service accounts that exist;
  - every container is bounded (memory limit) and hardened (no privilege escalation, all
    capabilities dropped unless it adds a named few, never privileged), and mounts only volumes
    its pod declares;
  - kube-scheduler's configuration (the ConfigMap) is a KubeSchedulerConfiguration whose extender
    points at the server's Service and port and at the routes the server serves
    (src/integration/k8s_extender_service.cc), with the verbs, a positive weight, HTTPS with a
    client certificate mounted in the scheduler's pod, nodeCacheCapable, and managedResources that
    are Stoker's resource names (src/k8s/resources.h);
  - the server requires client certificates and maps kube-scheduler's CN to the scheduler role;
  - the device plugin's MPS directories are the ones its mps-control container serves;
  - the agent reports to the Service;
  - every flag the manifests pass to `stoker` exists (`stoker <command> --help`).

Usage: scripts/check-k8s-manifests.py [--kubectl KUBECTL] [--stoker STOKER] [REPO_ROOT]
"""
import argparse
import pathlib
import re
import subprocess
import sys

import yaml

NAMESPACE = "stoker-system"


class Checker:
    def __init__(self):
        self.problems = []

    def fail(self, where, what):
        self.problems.append(f"{where}: {what}")

    def expect(self, cond, where, what):
        if not cond:
            self.fail(where, what)
        return cond


def objects_by_kind(docs):
    out = {}
    for d in docs:
        if not d:
            continue
        out.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    return out


def check_pod_template(c, where, spec, service_accounts):
    sa = spec.get("serviceAccountName")
    c.expect(sa in service_accounts, where, f"serviceAccountName {sa!r} is not defined")
    volumes = {v["name"] for v in spec.get("volumes", [])}
    for container in spec.get("containers", []):
        cw = f"{where} container {container['name']}"
        limits = container.get("resources", {}).get("limits", {})
        c.expect("memory" in limits, cw, "no memory limit")
        sc = container.get("securityContext", {})
        c.expect(sc.get("allowPrivilegeEscalation") is False, cw,
                 "allowPrivilegeEscalation must be false")
        c.expect(not sc.get("privileged", False), cw, "must not be privileged")
        caps = sc.get("capabilities", {})
        c.expect(caps.get("drop") == ["ALL"], cw, "must drop ALL capabilities")
        for add in caps.get("add", []):
            c.expect(add in {"SYS_PTRACE", "DAC_READ_SEARCH"}, cw, f"adds capability {add}")
        for m in container.get("volumeMounts", []):
            c.expect(m["name"] in volumes, cw, f"mounts undeclared volume {m['name']!r}")


def flag_values(args, name):
    prefix = f"--{name}="
    return [a[len(prefix):] for a in args if a.startswith(prefix)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--stoker", default="")
    ap.add_argument("root", nargs="?", default=".")
    a = ap.parse_args()
    root = pathlib.Path(a.root)
    out = subprocess.run([a.kubectl, "kustomize", str(root / "deploy/kubernetes")],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(f"k8s manifests: kubectl kustomize failed:\n{out.stderr}")
        return 1
    docs = list(yaml.safe_load_all(out.stdout))
    c = Checker()
    kinds = objects_by_kind(docs)

    # The objects, and where they live.
    want = {
        "Namespace": [NAMESPACE],
        "ServiceAccount": ["stoker-server", "stoker-agent", "stoker-device-plugin",
                           "stoker-scheduler"],
        "Service": ["stoker-server"],
        "Deployment": ["stoker-server", "stoker-scheduler"],
        "DaemonSet": ["stoker-agent", "stoker-device-plugin"],
        "ConfigMap": ["stoker-scheduler-config"],
        "ClusterRole": ["stoker-server"],
    }
    for kind, names in want.items():
        for n in names:
            c.expect(n in kinds.get(kind, {}), f"{kind}/{n}", "missing")
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for d in docs:
        if d and d["kind"] not in cluster_scoped:
            c.expect(d["metadata"].get("namespace") == NAMESPACE,
                     f"{d['kind']}/{d['metadata']['name']}", f"not in namespace {NAMESPACE}")
    if c.problems:
        return report(c)

    rules = kinds["ClusterRole"]["stoker-server"]["rules"]
    c.expect(any("pods/eviction" in r.get("resources", []) and "create" in r.get("verbs", [])
                 for r in rules), "ClusterRole/stoker-server", "cannot create pods/eviction")
    for kind in ("Deployment", "DaemonSet"):
        for name, obj in kinds[kind].items():
            check_pod_template(c, f"{kind}/{name}", obj["spec"]["template"]["spec"],
                               kinds["ServiceAccount"])

    # The server: HTTPS, client certificates, kube-scheduler's CN as the scheduler role.
    svc = kinds["Service"]["stoker-server"]
    port = svc["spec"]["ports"][0]["port"]
    server = kinds["Deployment"]["stoker-server"]["spec"]["template"]["spec"]["containers"][0]
    sargs = server["args"]
    c.expect(sargs[0] == "server", "Deployment/stoker-server", "does not run `stoker server`")
    c.expect(flag_values(sargs, "listen") == [f"0.0.0.0:{port}"], "Deployment/stoker-server",
             f"--listen is not the Service's port {port}")
    for f in ("tls-cert", "tls-key", "tls-client-ca"):
        c.expect(len(flag_values(sargs, f)) == 1, "Deployment/stoker-server", f"no --{f}")
    c.expect("kube-scheduler=scheduler" in flag_values(sargs, "tls-client-role"),
             "Deployment/stoker-server", "kube-scheduler's CN is not mapped to the scheduler role")

    # kube-scheduler's configuration and the extender.
    cfg = yaml.safe_load(kinds["ConfigMap"]["stoker-scheduler-config"]["data"]
                         ["scheduler-config.yaml"])
    w = "ConfigMap/stoker-scheduler-config"
    c.expect(cfg.get("apiVersion") == "kubescheduler.config.k8s.io/v1", w, "apiVersion")
    c.expect(cfg.get("kind") == "KubeSchedulerConfiguration", w, "kind")
    c.expect([p.get("schedulerName") for p in cfg.get("profiles", [])] == ["stoker"], w,
             "one profile, schedulerName stoker")
    exts = cfg.get("extenders", [])
    if c.expect(len(exts) == 1, w, "one extender"):
        e = exts[0]
        service_url = f"https://stoker-server.{NAMESPACE}.svc:{port}"
        c.expect(e.get("urlPrefix") == service_url + "/api/v1/k8s/extender", w,
                 f"urlPrefix {e.get('urlPrefix')!r} is not the server's extender")
        routes = (root / "src/integration/k8s_extender_service.cc").read_text()
        for verb in ("filterVerb", "prioritizeVerb"):
            c.expect(f'"/k8s/extender/{e.get(verb)}"' in routes, w,
                     f"{verb} {e.get(verb)!r} is not a route the server serves")
        c.expect(int(e.get("weight", 0)) > 0, w, "weight must be > 0 with prioritizeVerb")
        c.expect(e.get("enableHTTPS") is True, w, "enableHTTPS")
        c.expect(e.get("nodeCacheCapable") is True, w, "nodeCacheCapable")
        c.expect(not e.get("bindVerb"), w, "Stoker does not bind")
        tls = e.get("tlsConfig", {})
        sched = kinds["Deployment"]["stoker-scheduler"]["spec"]["template"]["spec"]
        mounts = {m["mountPath"] for m in sched["containers"][0].get("volumeMounts", [])}
        for key in ("caFile", "certFile", "keyFile"):
            path = tls.get(key, "")
            c.expect(any(path.startswith(m + "/") for m in mounts), w,
                     f"tlsConfig.{key} {path!r} is not in a volume the scheduler mounts")
        resources = (root / "src/k8s/resources.h").read_text()
        names = dict(re.findall(r'inline constexpr std::string_view (k\w+) = "([^"]+)";',
                                resources))
        for r in e.get("managedResources", []):
            n = r.get("name", "")
            ok = n in (names.get("kGpuResource"), names.get("kGpuMilliResource")) or (
                n.startswith(names.get("kMigResourcePrefix", "?")) and
                re.fullmatch(r"[1-7]g\.\d+gb", n[len(names["kMigResourcePrefix"]):]))
            c.expect(ok, w, f"managedResources {n!r} is not a Stoker resource")
        c.expect(names.get("kGpuMilliResource") in
                 [r.get("name") for r in e.get("managedResources", [])], w,
                 "the share resource is not managed")
    cmd = sched["containers"][0]["command"]
    c.expect("--config=/etc/stoker/scheduler/scheduler-config.yaml" in cmd,
             "Deployment/stoker-scheduler", "does not read the ConfigMap's file")

    # The agent reports to the Service; the device plugin's MPS directories are mps-control's.
    agent = kinds["DaemonSet"]["stoker-agent"]["spec"]["template"]["spec"]
    aargs = agent["containers"][0]["args"]
    c.expect(flag_values(aargs, "server") == [f"https://stoker-server.{NAMESPACE}.svc:{port}"],
             "DaemonSet/stoker-agent", "--server is not the Service")
    c.expect(agent.get("hostPID") is True, "DaemonSet/stoker-agent",
             "hostPID (attribution reads the GPU processes' /proc)")
    dp = kinds["DaemonSet"]["stoker-device-plugin"]["spec"]["template"]["spec"]
    dpc = {x["name"]: x for x in dp["containers"]}
    dargs = dpc["device-plugin"]["args"]
    env = {x["name"]: x.get("value") for x in dpc["mps-control"].get("env", [])}
    c.expect(flag_values(dargs, "mps-pipe-dir") == [env.get("CUDA_MPS_PIPE_DIRECTORY")],
             "DaemonSet/stoker-device-plugin", "--mps-pipe-dir is not mps-control's pipe")
    hostpaths = {v["name"]: v["hostPath"]["path"] for v in dp["volumes"] if "hostPath" in v}
    shm = [m for m in dpc["mps-control"]["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    c.expect(len(shm) == 1 and flag_values(dargs, "mps-shm-dir") == [hostpaths.get(
        shm[0]["name"] if shm else "")], "DaemonSet/stoker-device-plugin",
        "--mps-shm-dir is not the host directory mps-control uses as /dev/shm")
    c.expect("/var/lib/kubelet/device-plugins" in hostpaths.values(),
             "DaemonSet/stoker-device-plugin", "does not mount the kubelet's device-plugin dir")

    # Every flag given to stoker exists.
    if a.stoker:
        for where, container in (("Deployment/stoker-server", server),
                                 ("DaemonSet/stoker-agent", agent["containers"][0]),
                                 ("DaemonSet/stoker-device-plugin", dpc["device-plugin"])):
            args = container["args"]
            helptext = subprocess.run([a.stoker, args[0], "--help"], capture_output=True,
                                      text=True).stdout
            for arg in args[1:]:
                flag = arg.split("=", 1)[0]
                c.expect(re.search(re.escape(flag) + r"(?![\w-])", helptext) is not None, where,
                         f"`stoker {args[0]}` has no flag {flag}")
    return report(c, len(docs))


def report(c, n=0):
    for p in c.problems:
        print("k8s manifests:", p)
    if c.problems:
        print(f"k8s manifests: {len(c.problems)} problem(s)")
        return 1
    print(f"k8s manifests: {n} objects rendered by kubectl kustomize and checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
