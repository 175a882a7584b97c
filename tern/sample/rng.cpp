// Philox4x32-10 block function and the Rng stream built on it.
#include "tern/sample/rng.h"

namespace tern {

namespace {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kPhiloxM0, ctr[0], hi0, lo0);
    mulhilo(kPhiloxM1, ctr[2], hi1, lo1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

uint32_t Rng::next_u32() {
  uint64_t block = position_ >> 2;
  if (block != block_index_) {
    block_ = philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u},
                           {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)});
    block_index_ = block;
  }
  return block_[position_++ & 3];
}

float Rng::uniform() {
  return static_cast<float>(next_u32() >> 8) * 0x1.0p-24f;
}

void Rng::seek(uint64_t position) { position_ = position; }

}  // namespace tern
