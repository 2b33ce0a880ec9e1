#pragma once
// Deterministic, seedable random numbers for placement policies and simulators. Every random
// choice in the scheduler goes through an injected Rng so that a run is reproducible for a seed.

#include <cstdint>

namespace stoker::scheduler {

// xoshiro256** seeded through splitmix64. Small, fast, and identical on every platform (unlike
// std::uniform_int_distribution, whose output is implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed = 42) { Seed(seed); }

  void Seed(uint64_t seed) {
    uint64_t x = seed;
    for (uint64_t& s : s_) {
      x += 0x9e3779b97f4a7c15ULL;
      uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      s = z ^ (z >> 31);
    }
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform integer in [0, n); n must be > 0. Rejection sampling keeps it unbiased.
  uint64_t Uniform(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    for (;;) {
      const uint64_t x = Next();
      if (x >= threshold) return x % n;
    }
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace stoker::scheduler
