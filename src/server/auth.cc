#include "server/auth.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <tuple>

namespace stoker::server {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 0xf];
  }
  return out;
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return Hex(digest, sizeof(digest));
}

Result<std::string> GenerateToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return Internal("RAND_bytes failed");
  return "stk_" + Hex(bytes, sizeof(bytes));
}

void TokenRegistry::Load(const std::vector<store::TokenRow>& rows) {
  std::lock_guard lock(mu_);
  by_hash_.clear();
  for (const auto& r : rows) by_hash_[r.hash_hex] = r;
}

void TokenRegistry::Put(const store::TokenRow& row) {
  std::lock_guard lock(mu_);
  by_hash_[row.hash_hex] = row;
}

std::string TokenId(const store::TokenRow& row) { return row.hash_hex.substr(0, 12); }

std::optional<store::TokenRow> TokenRegistry::Revoke(const std::string& id) {
  std::lock_guard lock(mu_);
  for (auto it = by_hash_.begin(); it != by_hash_.end(); ++it) {
    if (TokenId(it->second) == id) {
      store::TokenRow row = it->second;
      by_hash_.erase(it);
      return row;
    }
  }
  return std::nullopt;
}

std::optional<store::TokenRow> TokenRegistry::Find(const std::string& id) const {
  std::lock_guard lock(mu_);
  for (const auto& [hash, row] : by_hash_) {
    if (TokenId(row) == id) return row;
  }
  return std::nullopt;
}

std::vector<store::TokenRow> TokenRegistry::List() const {
  std::lock_guard lock(mu_);
  std::vector<store::TokenRow> out;
  for (const auto& [hash, row] : by_hash_) out.push_back(row);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.name, a.created_unix_ms, a.hash_hex) <
           std::tie(b.name, b.created_unix_ms, b.hash_hex);
  });
  return out;
}

size_t TokenRegistry::size() const {
  std::lock_guard lock(mu_);
  return by_hash_.size();
}

Result<Principal> TokenRegistry::Authenticate(std::string_view header, int64_t now_ms) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (header.empty()) return Unauthenticated("missing Authorization: Bearer <token> header");
  if (header.substr(0, kBearer.size()) != kBearer) {
    return Unauthenticated("Authorization header must be 'Bearer <token>'");
  }
  const std::string_view token = header.substr(kBearer.size());
  if (token.empty() || token.size() > 256) return Unauthenticated("malformed token");
  const std::string hash = Sha256Hex(token);
  std::lock_guard lock(mu_);
  auto it = by_hash_.find(hash);
  // The map lookup is on the hash (which leaks nothing usable about the token); the final
  // comparison is constant-time anyway.
  if (it == by_hash_.end() || it->first.size() != hash.size() ||
      CRYPTO_memcmp(it->first.data(), hash.data(), hash.size()) != 0) {
    return Unauthenticated("unknown token");
  }
  if (it->second.expires_unix_ms != 0 && now_ms >= it->second.expires_unix_ms) {
    return Unauthenticated("token expired");
  }
  auto role = ParseRole(it->second.role);
  if (!role) return Unauthenticated("token has an unknown role");
  return Principal{it->second.name, *role};
}

}  // namespace stoker::server
