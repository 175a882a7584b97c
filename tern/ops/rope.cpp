// Rotary embeddings: the HF rope-type frequency tables (float32 semantics of transformers'
// ROPE_INIT_FUNCTIONS) and validation for rope(); the rotation lives in the backends.
#include "tern/ops/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tern::ops {
namespace {

// f32 product rounded on its own, never contracted into an fma with a neighbouring add (the
// volatile forces the rounding): transformers runs every step as its own f32 tensor op.
inline float mul_f32(float a, float b) {
  volatile float p = a * b;
  return p;
}

// base ** (arange(0, dim, 2).float() / dim) as f32 tensors: the exponent is an f32 quotient, the
// power correctly rounded to f32.
std::vector<float> pos_freqs(double theta, int64_t dim) {
  std::vector<float> out(static_cast<size_t>(dim / 2));
  const double base = static_cast<float>(theta);
  for (int64_t i = 0; i < dim / 2; ++i) {
    float e = static_cast<float>(2 * i) / static_cast<float>(dim);
    out[i] = static_cast<float>(std::pow(base, static_cast<double>(e)));
  }
  return out;
}

double yarn_get_mscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

// Dimension at which a frequency makes num_rotations turns over max_pos positions.
double yarn_correction_dim(double num_rotations, int64_t dim, double base, double max_pos) {
  return (static_cast<double>(dim) * std::log(max_pos / (num_rotations * 2.0 * std::numbers::pi))) /
         (2.0 * std::log(base));
}

void llama3_scale(const RopeConfig& cfg, std::vector<float>& inv) {
  TERN_CHECK(cfg.original_max_position > 0, "[rope] expected original_max_position > 0 for llama3, got {}",
             cfg.original_max_position);
  TERN_CHECK(cfg.high_freq_factor > cfg.low_freq_factor,
             "[rope] expected high_freq_factor > low_freq_factor for llama3, got {} and {}", cfg.high_freq_factor,
             cfg.low_freq_factor);
  const double old_len = static_cast<double>(cfg.original_max_position);
  const float factor = static_cast<float>(cfg.factor);
  const float low_wavelen = static_cast<float>(old_len / cfg.low_freq_factor);
  const float high_wavelen = static_cast<float>(old_len / cfg.high_freq_factor);
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  const float low_ff = static_cast<float>(cfg.low_freq_factor);
  const float ff_span = static_cast<float>(cfg.high_freq_factor - cfg.low_freq_factor);
  for (float& f : inv) {
    // 2 * math.pi / inv_freq is inv_freq.reciprocal() * 2pi in torch.
    const float wavelen = mul_f32(1.0f / f, two_pi);
    const float scaled = wavelen > low_wavelen ? f / factor : f;
    float smooth = mul_f32(1.0f / wavelen, static_cast<float>(old_len));
    smooth = (smooth - low_ff) / ff_span;
    const float smoothed = mul_f32(1.0f - smooth, scaled) / factor + mul_f32(smooth, scaled);
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    f = medium ? smoothed : scaled;
  }
}

// YaRN: blend interpolated and extrapolated frequencies over the correction range; returns the
// attention factor. factor is taken as given (HF derives it from max/original positions when the
// config carries original_max_position_embeddings; callers pass that ratio).
double yarn_scale(const RopeConfig& cfg, int64_t dim, std::vector<float>& inv) {
  TERN_CHECK(cfg.original_max_position > 0, "[rope] expected original_max_position > 0 for yarn, got {}",
             cfg.original_max_position);
  const double factor = cfg.factor;
  double attention = cfg.attention_factor;
  if (attention == 0.0) {
    attention = (cfg.mscale != 0.0 && cfg.mscale_all_dim != 0.0)
                    ? yarn_get_mscale(factor, cfg.mscale) / yarn_get_mscale(factor, cfg.mscale_all_dim)
                    : yarn_get_mscale(factor, 1.0);
  }
  const double beta_fast = cfg.beta_fast != 0.0 ? cfg.beta_fast : 32.0;
  const double beta_slow = cfg.beta_slow != 0.0 ? cfg.beta_slow : 1.0;
  const double max_pos = static_cast<double>(cfg.original_max_position);
  double low = yarn_correction_dim(beta_fast, dim, cfg.theta, max_pos);
  double high = yarn_correction_dim(beta_slow, dim, cfg.theta, max_pos);
  if (cfg.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // HF's guard against a zero-width ramp
  const float ramp_lo = static_cast<float>(low);
  const float ramp_span = static_cast<float>(high - low);
  const std::vector<float> pos = pos_freqs(cfg.theta, dim);
  const float factor_f = static_cast<float>(factor);
  for (size_t i = 0; i < inv.size(); ++i) {
    const float extrapolation = 1.0f / pos[i];
    const float interpolation = 1.0f / mul_f32(pos[i], factor_f);
    const float ramp = std::clamp((static_cast<float>(i) - ramp_lo) / ramp_span, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    inv[i] = mul_f32(interpolation, 1.0f - extrapolation_factor) + mul_f32(extrapolation, extrapolation_factor);
  }
  return attention;
}

}  // namespace

RopeTable rope_table(const RopeConfig& cfg) {
  TERN_CHECK(cfg.head_dim > 0, "[rope] expected head_dim > 0, got {}", cfg.head_dim);
  const int64_t dim = cfg.rotary_dim != 0 ? cfg.rotary_dim : cfg.head_dim;
  TERN_CHECK(dim > 0 && dim % 2 == 0 && dim <= cfg.head_dim,
             "[rope] expected an even rotary_dim in (0, {}], got {}", cfg.head_dim, dim);
  TERN_CHECK(cfg.theta > 0.0, "[rope] expected theta > 0, got {}", cfg.theta);
  const bool known = cfg.type == "default" || cfg.type == "linear" || cfg.type == "llama3" || cfg.type == "yarn" ||
                     cfg.type == "proportional";
  TERN_CHECK(known, "[rope] expected type default, linear, llama3, yarn or proportional, got '{}'", cfg.type);
  TERN_CHECK(cfg.type == "default" || cfg.factor > 0.0, "[rope] expected factor > 0 for {}, got {}", cfg.type,
             cfg.factor);

  RopeTable table;
  if (cfg.type == "proportional") {
    // Frequencies with exponents over the whole head (2i / head_dim) for the first dim/2 pairs, zero for
    // the rest: the rotation spans every dim (pairing i with i + head_dim/2), the zero-frequency pairs
    // staying unchanged.
    table.rotary_dim = cfg.head_dim;
    table.inv_freq = pos_freqs(cfg.theta, cfg.head_dim);
    const float factor = static_cast<float>(cfg.factor);
    for (int64_t i = 0; i < cfg.head_dim / 2; ++i) {
      float& f = table.inv_freq[static_cast<size_t>(i)];
      f = i < dim / 2 ? (1.0f / f) / factor : 0.0f;
    }
    return table;
  }
  table.rotary_dim = dim;
  table.inv_freq = pos_freqs(cfg.theta, dim);
  for (float& f : table.inv_freq) f = 1.0f / f;
  if (cfg.type == "linear") {
    const float factor = static_cast<float>(cfg.factor);
    for (float& f : table.inv_freq) f /= factor;
  } else if (cfg.type == "llama3") {
    llama3_scale(cfg, table.inv_freq);
  } else if (cfg.type == "yarn") {
    table.attention_scale = static_cast<float>(yarn_scale(cfg, dim, table.inv_freq));
  }
  return table;
}

void check_rope_args(const Tensor& x, const Tensor& positions, const RopeTable& table) {
  TERN_CHECK(x.defined() && positions.defined(), "[rope] expected defined x and positions, got an undefined one");
  TERN_CHECK(is_floating(x.dtype()), "[rope] expected a float dtype (f32, bf16, f16), got {}", dtype_name(x.dtype()));
  TERN_CHECK(x.rank() == 4, "[rope] expected x of shape [B, H, L, D], got {}", shape_str(x.shape()));
  TERN_CHECK(positions.dtype() == Dtype::i32 || positions.dtype() == Dtype::i64,
             "[rope] expected positions of dtype i32 or i64, got {}", dtype_name(positions.dtype()));
  const int64_t b = x.size(0), l = x.size(2), d = x.size(3);
  const bool flat = positions.shape() == Shape{l};
  const bool per_row = positions.shape() == Shape{b, l};
  TERN_CHECK(flat || per_row, "[rope] expected positions of shape [{}] or [{}, {}], got {}",
             l, b, l, shape_str(positions.shape()));
  TERN_CHECK(positions.device() == x.device(), "[rope] expected positions on {}, got {}", x.device().str(),
             positions.device().str());
  TERN_CHECK(table.rotary_dim > 0 && table.rotary_dim % 2 == 0 && table.rotary_dim <= d,
             "[rope] expected an even rotary_dim in (0, {}], got {}", d, table.rotary_dim);
  TERN_CHECK(static_cast<int64_t>(table.inv_freq.size()) == table.rotary_dim / 2,
             "[rope] expected {} inverse frequencies, got {}", table.rotary_dim / 2, table.inv_freq.size());
}

Tensor rope(const Tensor& x, const Tensor& positions, const RopeTable& table) {
  check_rope_args(x, positions, table);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  if (x.device().is_cpu()) {
    cpu::rope(x, positions, table, out);
  } else {
    cuda::rope(x, positions, table, out);
  }
  return out;
}

}  // namespace tern::ops
