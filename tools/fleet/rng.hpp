// A small seedable random generator (xoshiro256**) with hand-written distributions.
//
// Contract: for one seed the sequence is the same on every platform and standard library (the
// std:: distributions do not promise that), which is what makes `--seed` reproducible. Not
// thread-safe; one per generator.
#pragma once

#include <cstdint>

namespace trackd::fleet {

class Rng {
  public:
    explicit Rng(std::uint64_t seed) {
        // splitmix64 spreads any seed (even 0) over the whole state.
        for (auto& word : s_) {
            seed += 0x9e3779b97f4a7c15ULL;
            std::uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
            word = z ^ (z >> 31);
        }
    }

    std::uint64_t next() {
        const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const std::uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

    // Uniform in [0, 1), 53 random bits.
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

    // Uniform in [lo, hi).
    double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

    // Uniform in [0, n); n > 0. The tiny modulo bias is irrelevant for a simulation.
    std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(next() % n); }

  private:
    static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

    std::uint64_t s_[4]{};
};

}  // namespace trackd::fleet
