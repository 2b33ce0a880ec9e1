#pragma once
// Bearer-token authentication. Tokens are random ("stk_" + 64 hex digits), stored only as their
// SHA-256, and compared in constant time. Each token has a role (admin | agent | user) and a
// name: the user name for users, the node name an agent may report for, the admin's name.

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "server/model.h"
#include "store/store.h"

namespace stoker::server {

struct Principal {
  std::string name;
  Role role = Role::kUser;
};

std::string Sha256Hex(std::string_view data);
// A new random token (OpenSSL RAND_bytes).
Result<std::string> GenerateToken();

// Thread-safe registry of token hashes, mirrored in the store.
class TokenRegistry {
 public:
  void Load(const std::vector<store::TokenRow>& rows);
  void Put(const store::TokenRow& row);
  void RemoveByName(const std::string& name);
  // Unauthenticated for a missing, malformed or unknown token.
  Result<Principal> Authenticate(std::string_view authorization_header) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, store::TokenRow> by_hash_;  // hex hash -> row
};

}  // namespace stoker::server
