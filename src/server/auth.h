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
#include "protocol/model.h"
#include "store/store.h"

namespace stoker::server {

using protocol::ParseRole;
using protocol::Principal;
using protocol::Role;
using protocol::RoleName;

std::string Sha256Hex(std::string_view data);
// A new random token (OpenSSL RAND_bytes).
Result<std::string> GenerateToken();

// A token's public id: the first 12 hex digits of its hash (names a token in listings, audit
// rows and revocations without revealing anything usable).
std::string TokenId(const store::TokenRow& row);

// Thread-safe registry of token hashes, mirrored in the store.
class TokenRegistry {
 public:
  void Load(const std::vector<store::TokenRow>& rows);
  void Put(const store::TokenRow& row);
  // Removes the token with this id; its row (nullopt when there is none).
  std::optional<store::TokenRow> Revoke(const std::string& id);
  std::optional<store::TokenRow> Find(const std::string& id) const;
  // Unauthenticated for a missing, malformed, unknown or (at `now_unix_ms`) expired token.
  Result<Principal> Authenticate(std::string_view authorization_header, int64_t now_unix_ms) const;
  std::vector<store::TokenRow> List() const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, store::TokenRow> by_hash_;  // hex hash -> row
};

}  // namespace stoker::server
