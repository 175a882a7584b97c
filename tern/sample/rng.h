// Rng: the sampler's seeded random stream, Philox4x32-10 (Salmon et al., SC'11; the generator of
// cuRAND and Random123). Counter-based, so a GPU sampler can reproduce any draw from (seed, position).
#pragma once
#include <array>
#include <cstdint>

namespace tern {

// One Philox4x32-10 block: ten rounds over a 128-bit counter under a 64-bit key. Bit-exact with
// Random123's philox4x32_R(10, ctr, key) known-answer vectors.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// The stream of 32-bit words for one seed. Word i (i = 0, 1, ...) is element i % 4 of
// philox4x32_10(counter = {lo32(i / 4), hi32(i / 4), 0, 0}, key = {lo32(seed), hi32(seed)}).
// The same seed gives the same sequence on every machine and compiler; copies continue independently.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : seed_(seed) {}

  // The next 32-bit word of the stream.
  uint32_t next_u32();
  // A float in [0, 1) with 24 random bits: (next_u32() >> 8) * 2^-24. Every value is exact in f32
  // and the largest is 1 - 2^-24, so u * total never reaches total. Consumes one word.
  float uniform();

  uint64_t seed() const { return seed_; }
  // Words consumed so far (the index of the next word).
  uint64_t position() const { return position_; }
  // Moves to word index `position` of the stream (forward or back).
  void seek(uint64_t position);

 private:
  uint64_t seed_;
  uint64_t position_ = 0;
  uint64_t block_index_ = ~uint64_t{0};  // which block block_ holds; ~0 = none yet
  std::array<uint32_t, 4> block_{};
};

}  // namespace tern
