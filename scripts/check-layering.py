#!/usr/bin/env python3
"""The layering check: fails when a module of src/ includes what it must not.

Each module may include only the modules listed for it (its own headers always), and
third-party headers stay at the edges that own them. docs/architecture.md shows the picture;
change both together. Usage: scripts/check-layering.py [repo root]
"""
import pathlib
import re
import sys

# module -> the modules of ours it may include
ALLOWED = {
    "core": set(),
    # The document reader (JSON and YAML trees with positions, typed fields with their paths).
    "doc": {"core"},
    "json": {"core"},  # nlohmann-json glue for our types (enums through their name tables)
    "scheduler": {"core"},
    # The scheduling pass (src/scheduler/pass): placement, preemption and oversubscription over
    # a cluster view; the scheduler library (and its queue policies) below it, nothing else.
    "scheduler/pass": {"core", "scheduler"},
    # The simulators call the scheduling pass the server runs.
    "sim": {"core", "scheduler", "scheduler/pass", "json"},
    # The wire types; the GPU shapes a job spec is checked against (whole GPUs, MIG profiles) are
    # core's, shared with the scheduler.
    "protocol": {"core", "json"},
    "http": {"core", "protocol", "json"},
    "client": {"core", "json"},
    "store": {"core"},
    "runner": {"core", "json"},
    "nvml": {"core", "fakenvml"},  # --simulate embeds the fake library
    "fakenvml": {"core", "nvml", "doc"},  # the same C ABI declarations; scenarios read via doc
    "telemetry": {"core", "protocol", "json"},
    "agent": {"core", "protocol", "telemetry", "http", "fakenvml", "json"},
    "node": {"core", "protocol", "client", "runner", "json"},
    "efficiency": {"core", "scheduler", "sim", "doc", "json"},
    "server": {"core", "protocol", "scheduler", "scheduler/pass", "store", "http", "json"},
    "batch": {"core"},
    # The Slurm engine adapter: an edge that decides through the scheduling pass and uses the
    # efficiency engine; nothing but the wiring (integration, cli, apps) may include it.
    "slurm": {"core", "scheduler", "scheduler/pass", "efficiency", "telemetry", "doc", "json"},
    "inference": {"core", "batch", "http", "json"},  # the example service: model + batcher + HTTP
    # Kubernetes: the extender's wire format and decisions over the agents' measurements (the
    # placement policy, the efficiency engine's zones and idle reclaim), the device plugin and
    # PodResources over gRPC, the Eviction API client; the server wiring is in integration.
    "k8s": {"core", "scheduler", "efficiency", "telemetry", "client", "json"},
}
# Sub-modules with rules of their own (a path below src/ -> its module name).
SUBMODULES = ("scheduler/pass",)
# Modules with no rule beyond "not the CLI": the adapters and the wiring.
OPEN = {"integration", "cli", "apps", "web"}
# third-party header -> the modules that may include it
EDGES = {
    # YAML is read through the document reader (src/doc) only: configurations, records,
    # scenarios and the CLI's client configuration alike.
    "yaml-cpp/": {"doc"},
    "sqlite3.h": {"store"},
    "httplib.h": set(),  # tests only: src/ speaks HTTP through http (server) and client
    "boost/": {"http", "client"},
    "nvml_abi.h": {"nvml", "fakenvml"},
    "grpcpp/": {"k8s"},
    "google/protobuf/": {"k8s"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    src = root / "src"
    problems = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in {".h", ".cc", ".in"} or not path.is_file():
            continue
        rel_src = path.relative_to(src).as_posix()
        module = next((m for m in SUBMODULES if rel_src.startswith(m + "/")),
                      path.relative_to(src).parts[0])
        text = path.read_text(errors="replace")
        for kind, target in INCLUDE.findall(text):
            rel = path.relative_to(root)
            if kind == '"' and "/" in target:
                dep = next((m for m in SUBMODULES if target.startswith(m + "/")),
                           target.split("/")[0])
                if dep == module or not (src / dep).is_dir():
                    continue
                if module in OPEN:
                    if dep == "cli" and module != "apps":
                        problems.append(f"{rel}: {module} includes the CLI ({target})")
                    continue
                if module not in ALLOWED:
                    problems.append(f"{rel}: module '{module}' has no layering rule; add one")
                    continue
                if dep not in ALLOWED[module]:
                    problems.append(f"{rel}: {module} must not include {dep} ({target})")
            for header, owners in EDGES.items():
                name = target.split("/")[-1] if not header.endswith("/") else target
                hit = target.startswith(header) if header.endswith("/") else name == header
                if hit and module not in owners:
                    problems.append(f"{rel}: {module} must not include <{target}> "
                                    f"(only {', '.join(sorted(owners))})")
    for p in problems:
        print("layering:", p)
    if problems:
        print(f"layering: {len(problems)} problem(s); the rules are in scripts/check-layering.py "
              "and docs/architecture.md")
        return 1
    print("layering: every module includes only what it may")
    return 0


if __name__ == "__main__":
    sys.exit(main())
