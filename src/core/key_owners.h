#pragma once
// Which owner holds each key (the job on a GPU or a MIG instance), with each owner's keys kept
// beside, so that forgetting an owner costs what it holds rather than a walk of every key: a
// large scheduling pass changes 80,000 jobs at once, each forgetting its GPUs. A key set by
// another owner is that owner's from then on; the first owner forgetting its keys later leaves it
// alone. KeyOwners keeps both sides in tables of its own; ForgetHeld and ForEachStillHeld apply
// the rule where the owner lives in the key's own slot.

#include <cstddef>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace stoker {

// The hash of a key: std::hash, or a pair's two hashes combined (a GPU: node and index).
struct KeyOwnersHash {
  template <typename K>
  size_t operator()(const K& k) const {
    return std::hash<K>{}(k);
  }
  template <typename A, typename B>
  size_t operator()(const std::pair<A, B>& k) const {
    const size_t h = std::hash<A>{}(k.first);
    return h ^ (std::hash<B>{}(k.second) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  }
};

template <typename Key, typename Owner>
class KeyOwners {
 public:
  void Set(const Key& key, const Owner& owner) {
    owner_of_[key] = owner;
    keys_of_[owner].push_back(key);
  }

  // Drops every key `owner` still holds, calling `dropped(key)` after each (in the order they
  // were set); `dropped` must not change this KeyOwners.
  template <typename Dropped>
  void Forget(const Owner& owner, Dropped&& dropped) {
    auto held = keys_of_.find(owner);
    if (held == keys_of_.end()) return;
    for (const Key& key : held->second) {
      auto it = owner_of_.find(key);
      if (it == owner_of_.end() || !(it->second == owner)) continue;  // gone, or taken since
      owner_of_.erase(it);
      dropped(key);
    }
    keys_of_.erase(held);
  }
  void Forget(const Owner& owner) {
    Forget(owner, [](const Key&) {});
  }

  // The owner of `key`, or null.
  const Owner* Find(const Key& key) const {
    auto it = owner_of_.find(key);
    return it == owner_of_.end() ? nullptr : &it->second;
  }
  size_t size() const { return owner_of_.size(); }  // keys held

 private:
  std::unordered_map<Key, Owner, KeyOwnersHash> owner_of_;
  std::unordered_map<Owner, std::vector<Key>, KeyOwnersHash> keys_of_;  // may list keys taken since
};

// The same rule where each key's owner lives in the key's own slot (a GPU's state, the entry for
// a GPU index) and each owner's keys are kept by the caller, in the order they were set: no table
// of its own, so holding a key costs nothing beyond its slot and its place in `held`.
// `slot(key)` is a pointer to the key's owner, or null where the key has no slot (any more).

// Calls `each(key)` for every key of `held` whose slot still names `owner` (not taken since).
template <typename Key, typename Owner, typename Slot, typename Each>
void ForEachStillHeld(const std::vector<Key>& held, const Owner& owner, Slot&& slot, Each&& each) {
  for (const Key& key : held) {
    const auto* now = slot(key);
    if (now != nullptr && *now == owner) each(key);
  }
}

// Clears the slot of every key of `held` that still names `owner` (a key another owner took since
// is that owner's), then empties `held`.
template <typename Key, typename Owner, typename Slot>
void ForgetHeld(std::vector<Key>& held, const Owner& owner, Slot&& slot) {
  for (const Key& key : held) {
    auto* now = slot(key);
    if (now != nullptr && *now == owner) *now = Owner{};
  }
  held.clear();
}

}  // namespace stoker
