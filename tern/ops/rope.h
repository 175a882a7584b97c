// Rotary position embeddings: frequency tables for the HF rope types (default, linear, llama3, yarn,
// proportional) and the rotate-half application on the first rotary_dim dims of each head.
#pragma once
#include <string>
#include <vector>

#include "tern/core/tensor.h"

namespace tern::ops {

struct RopeConfig {
  std::string type = "default";  // default | linear | llama3 | yarn | proportional
  double theta = 10000.0;
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // head_dim * partial_rotary_factor (even); 0 means head_dim
  double factor = 1.0;     // linear, llama3, yarn
  // llama3
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_position = 0;
  // yarn
  double beta_fast = 32.0, beta_slow = 1.0;
  double attention_factor = 0.0;  // 0: derived as HF does (0.1 * ln(factor) + 1)
  double mscale = 0.0, mscale_all_dim = 0.0;
  bool truncate = true;
};

// inv_freq [rotary_dim / 2] and the cos/sin scale (yarn's attention factor; 1 otherwise),
// exactly as transformers' ROPE_INIT_FUNCTIONS compute them.
struct RopeTable {
  std::vector<float> inv_freq;
  float attention_scale = 1.0f;
  int64_t rotary_dim = 0;
};
RopeTable rope_table(const RopeConfig& cfg);

// x [B, H, L, D] with positions [L] or [B, L] (i32 or i64): returns x with
// x[..., :rot] rotated (rotate_half pairing i with i + rot/2) and x[..., rot:] unchanged.
Tensor rope(const Tensor& x, const Tensor& positions, const RopeTable& table);
// The argument checks of rope (its "[rope] expected ..." errors), for ops that fuse it.
void check_rope_args(const Tensor& x, const Tensor& positions, const RopeTable& table);

}  // namespace tern::ops

namespace tern::cpu {
void rope(const Tensor& x, const Tensor& positions, const ops::RopeTable& table, Tensor& out);
}
namespace tern::cuda {
void rope(const Tensor& x, const Tensor& positions, const ops::RopeTable& table, Tensor& out);
}
