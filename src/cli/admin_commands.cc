// The administration commands: nodes, drain, undrain, token create|list|revoke, audit.

#include <fmt/core.h>

#include "cli/common.h"
#include "cli/table.h"

namespace stoker::cli {

void RegisterAdminCommands(CLI::App& app, int& exit_code) {
  // stoker nodes
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* cmd = app.add_subcommand("nodes", "List nodes");
    AddClientFlags(cmd, c);
    cmd->callback([c, &exit_code] {
      exit_code = RunGetAndPrint(*c, "/api/v1/nodes", [](const json& nodes) {
        const Table t({{"NODE", 20},
                       {"STATE", 8},
                       {"CPUS", 6},
                       {"MEM(GiB)", 9},
                       {"JOBS", 5},
                       {"GPUS", 30},
                       {"SOURCE"}});
        fmt::print("{}", t.Header());
        for (const json& n : nodes) {
          std::string gpus = std::to_string(n["gpus"].size());
          if (!n["gpus"].empty()) gpus += " x " + n["gpus"][0].value("model", "");
          fmt::print("{}",
                     t.Line({n["name"].get<std::string>(), n["state"].get<std::string>(),
                             fmt::format("{}", n["cpu_milli"].get<int64_t>() / 1000),
                             fmt::format("{}", n["memory_mib"].get<int64_t>() / 1024),
                             fmt::format("{}", n.value("active_jobs", 0)), gpus.substr(0, 30),
                             n.value("simulated", false) ? "SIMULATED" : n.value("source", "")}));
        }
        // What each node enforces for its jobs (cgroups, or process tracking only).
        for (const json& n : nodes) {
          if (n.contains("isolation")) {
            fmt::print("{}: jobs run with {}\n", n["name"].get<std::string>(),
                       n["isolation"].get<std::string>());
          }
        }
      });
    });
  }
  // stoker drain / undrain NODE
  for (const char* verb : {"drain", "undrain"}) {
    auto* c = FlagStorage<ClientFlags>();
    auto* node = FlagStorage<std::string>();
    auto* cmd = app.add_subcommand(verb, std::string(verb) == "drain"
                                             ? "Stop placing new jobs on a node (admin)"
                                             : "Resume placing jobs on a node (admin)");
    AddClientFlags(cmd, c);
    cmd->add_option("node", *node, "Node name")->required();
    const std::string v = verb;
    cmd->callback([c, node, v, &exit_code] {
      exit_code =
          RunAndPrint(*c, "POST", "/api/v1/nodes/" + *node + "/" + v, nullptr, [&](const json& r) {
            fmt::print("node {}: {}\n", *node, r["state"].get<std::string>());
          });
    });
  }
  // stoker token create|list|revoke, stoker audit
  {
    auto* tok = app.add_subcommand("token", "Manage API tokens (admin): create, list, revoke");
    tok->require_subcommand(1);
    auto* c = FlagStorage<ClientFlags>();
    auto* role = FlagStorage<std::string>("user");
    auto* name = FlagStorage<std::string>();
    auto* expires = FlagStorage<std::string>();
    auto* create = tok->add_subcommand("create", "Create a token; it is printed once");
    AddClientFlags(create, c);
    create->add_option("--role", *role, "admin, agent, user or scheduler")
        ->check(CLI::IsMember({"admin", "agent", "user", "scheduler"}))
        ->capture_default_str();
    create->add_option("--name", *name, "User name, or the node name for an agent token")
        ->required();
    create->add_option("--expires-in", *expires,
                       "Stop accepting the token after this long (e.g. 90d, 12h); default never");
    create->callback([c, role, name, expires, &exit_code] {
      json body{{"role", *role}, {"name", *name}};
      if (!expires->empty()) body["expires_in"] = *expires;
      exit_code = RunAndPrint(*c, "POST", "/api/v1/tokens", body, [](const json& r) {
        fmt::print("{}\n", r["token"].get<std::string>());
      });
    });
    auto* lc = FlagStorage<ClientFlags>();
    auto* list = tok->add_subcommand("list", "List tokens: id, name, role, created, expiry");
    AddClientFlags(list, lc);
    list->callback([lc, &exit_code] {
      exit_code = RunGetAndPrint(*lc, "/api/v1/tokens", [](const json& ts) {
        const Table table({{"ID", 13}, {"NAME", 20}, {"ROLE", 6}, {"CREATED", 20}, {"EXPIRES"}});
        fmt::print("{}", table.Header());
        for (const json& t : ts) {
          fmt::print(
              "{}",
              table.Line({t["id"].get<std::string>(), t["name"].get<std::string>(),
                          t["role"].get<std::string>(), FormatMs(t["created_ms"].get<int64_t>()),
                          t["expires_ms"].is_null() ? "never"
                                                    : FormatMs(t["expires_ms"].get<int64_t>())}));
        }
      });
    });
    auto* rc = FlagStorage<ClientFlags>();
    auto* id = FlagStorage<std::string>();
    auto* revoke = tok->add_subcommand("revoke", "Revoke a token by its id (see token list)");
    AddClientFlags(revoke, rc);
    revoke->add_option("id", *id, "Token id")->required();
    revoke->callback([rc, id, &exit_code] {
      exit_code = RunAndPrint(*rc, "DELETE", "/api/v1/tokens/" + *id, nullptr, [&](const json& r) {
        fmt::print("revoked token {} ({}, {})\n", *id, r["name"].get<std::string>(),
                   r["role"].get<std::string>());
      });
    });
    auto* ac = FlagStorage<ClientFlags>();
    auto* audit = app.add_subcommand("audit", "Show the audit log (admin)");
    AddClientFlags(audit, ac);
    audit->callback([ac, &exit_code] {
      exit_code = RunGetAndPrint(*ac, "/api/v1/audit", [](const json& rows) {
        const Table t({{"TIME", 20}, {"ACTOR", 16}, {"ACTION", 13}, {"SUBJECT"}});
        fmt::print("{}", t.Header());
        for (const json& a : rows) {
          fmt::print("{}",
                     t.Line({FormatMs(a["ts_ms"].get<int64_t>()), a["actor"].get<std::string>(),
                             a["action"].get<std::string>(), a["subject"].get<std::string>()},
                            " (" + a["detail"].get<std::string>() + ")"));
        }
      });
    });
  }
}

}  // namespace stoker::cli
