// TurboQuant building blocks: the Lloyd-Max codebooks against an independent Lloyd iteration that
// integrates the N(0,1) density numerically (and the published distortions), the sign constants
// against their generator, the rotation's orthogonality and inverse, and the key/value codec errors.
#include "tern/ops/turboquant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tern/base/error.h"
#include "tern/base/half.h"
#include "tern/ops/bit_pack.h"
#include <vector>

namespace tern {
namespace {

double phi(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI); }

// Composite Simpson integrals of phi, x phi and x^2 phi over [a, b] (clipped to [-12, 12]).
void moments(double a, double b, double& m0, double& m1, double& m2) {
  a = std::max(a, -12.0);
  b = std::min(b, 12.0);
  m0 = m1 = m2 = 0;
  if (b <= a) return;
  const int n = 2000;
  const double h = (b - a) / n;
  for (int i = 0; i <= n; ++i) {
    const double x = a + i * h, w = (i == 0 || i == n) ? 1 : (i % 2 ? 4 : 2), f = phi(x) * w * h / 3;
    m0 += f;
    m1 += x * f;
    m2 += x * x * f;
  }
}

// Distortion of a codebook under nearest-neighbour cells, by numerical integration.
double distortion(const std::vector<double>& c) {
  double d = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const double a = i == 0 ? -1e9 : 0.5 * (c[i - 1] + c[i]), b = i + 1 == c.size() ? 1e9 : 0.5 * (c[i] + c[i + 1]);
    double m0, m1, m2;
    moments(a, b, m0, m1, m2);
    d += m2 - 2 * c[i] * m1 + c[i] * c[i] * m0;
  }
  return d;
}

// Lloyd's iteration from evenly spread points, each step moving every point to its cell's mean.
std::vector<double> lloyd_max(int bits) {
  const int n = 1 << bits;
  std::vector<double> c(n);
  for (int i = 0; i < n; ++i) c[i] = -3.0 + 6.0 * (i + 0.5) / n;
  for (int it = 0; it < 5000; ++it) {
    double moved = 0;
    std::vector<double> next(n);
    for (int i = 0; i < n; ++i) {
      const double a = i == 0 ? -1e9 : 0.5 * (c[i - 1] + c[i]), b = i + 1 == n ? 1e9 : 0.5 * (c[i] + c[i + 1]);
      double m0, m1, m2;
      moments(a, b, m0, m1, m2);
      next[i] = m1 / m0;
      moved = std::max(moved, std::fabs(next[i] - c[i]));
    }
    c = next;
    if (moved < 1e-9) break;
  }
  return c;
}

TEST(TurboQuantCodebook, LloydMaxDistortionsOfTheGaussian) {
  const double published[] = {0.3634, 0.1175, 0.03454, 0.009497};  // Max (1960), 1..4 bits
  for (int bits = 1; bits <= 4; ++bits) {
    const std::vector<double> ours = lloyd_max(bits);
    EXPECT_NEAR(distortion(ours), published[bits - 1], 1e-3 * published[bits - 1]) << bits << " bits";
    const std::vector<float>& stored = turboquant::codebook(bits);
    ASSERT_EQ(stored.size(), ours.size());
    std::vector<double> s(stored.begin(), stored.end());
    for (size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(s[i], ours[i], 1e-5) << bits << " bits, centroid " << i;
    EXPECT_NEAR(distortion(s), published[bits - 1], 1e-3 * published[bits - 1]) << bits << " bits";
  }
}

TEST(TurboQuantCodebook, EightBitCodebookIsAFixedPointOfLloyd) {
  const std::vector<float>& c = turboquant::codebook(8);
  ASSERT_EQ(c.size(), 256u);
  for (size_t i = 0; i < c.size(); ++i) {
    if (i > 0) EXPECT_LT(c[i - 1], c[i]);
    EXPECT_FLOAT_EQ(c[i], -c[c.size() - 1 - i]);
    const double a = i == 0 ? -1e9 : 0.5 * (c[i - 1] + c[i]), b = i + 1 == c.size() ? 1e9 : 0.5 * (c[i] + c[i + 1]);
    double m0, m1, m2;
    moments(a, b, m0, m1, m2);
    EXPECT_NEAR(m1 / m0, c[i], 2e-4) << "centroid " << i;
  }
  // Panter-Dite: D ~ (sqrt(3) pi / 2) 4^-bits for the Gaussian at high rate.
  std::vector<double> s(c.begin(), c.end());
  EXPECT_NEAR(distortion(s), std::sqrt(3.0) * M_PI / 2 / 65536.0, 0.1 * std::sqrt(3.0) * M_PI / 2 / 65536.0);
}

// The generator the sign constants document: splitmix64 seeded with 42 + head_dim, bit i -> sign i.
std::vector<float> reference_signs(int64_t dim) {
  uint64_t state = 42 + static_cast<uint64_t>(dim);
  std::vector<float> s(dim);
  uint64_t word = 0;
  for (int64_t i = 0; i < dim; ++i) {
    if (i % 64 == 0) {
      state += 0x9E3779B97F4A7C15ull;
      uint64_t z = state;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      word = z ^ (z >> 31);
    }
    s[i] = (word >> (i % 64)) & 1 ? -1.0f : 1.0f;
  }
  return s;
}

TEST(TurboQuantRotation, SignsMatchTheirGenerator) {
  for (int64_t dim : {32, 64, 128, 256, 512}) EXPECT_EQ(turboquant::signs(dim), reference_signs(dim)) << dim;
  EXPECT_THROW(turboquant::signs(96), Error);
}

TEST(TurboQuantRotation, OrthogonalAndInvertedByUnrotate) {
  for (int64_t dim : {32, 64, 128}) {
    // R's columns: rotate(e_j). Check R^T R = I, unrotate(R e_j) = e_j, and R diag(s) = H symmetric, H H = I.
    std::vector<std::vector<double>> R(dim, std::vector<double>(dim));
    for (int64_t j = 0; j < dim; ++j) {
      std::vector<float> e(dim, 0.0f);
      e[j] = 1;
      turboquant::rotate(e.data(), dim);
      for (int64_t i = 0; i < dim; ++i) R[i][j] = e[i];
      turboquant::unrotate(e.data(), dim);
      for (int64_t i = 0; i < dim; ++i) ASSERT_NEAR(e[i], i == j ? 1.0 : 0.0, 1e-6);
    }
    const std::vector<float>& s = turboquant::signs(dim);
    for (int64_t i = 0; i < dim; ++i)
      for (int64_t j = 0; j < dim; ++j) {
        double rtr = 0, hh = 0;
        for (int64_t k = 0; k < dim; ++k) {
          rtr += R[k][i] * R[k][j];
          hh += R[i][k] * s[k] * R[k][j] * s[j];
        }
        ASSERT_NEAR(rtr, i == j ? 1.0 : 0.0, 1e-5);
        ASSERT_NEAR(hh, i == j ? 1.0 : 0.0, 1e-5);
        ASSERT_NEAR(std::fabs(R[i][j]), 1.0 / std::sqrt(double(dim)), 1e-6);
        ASSERT_NEAR(R[i][j] * s[j], R[j][i] * s[i], 1e-6);  // H symmetric
      }
  }
}

std::vector<float> gaussian(int64_t n, uint32_t seed, float sigma = 1.0f, float mean = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  return x;
}

TEST(TurboQuantKeys, Int8ErrorWithinHalfAStepPerGroup) {
  const int64_t dim = 128;
  for (float mean : {0.0f, 3.0f, -40.0f}) {
    std::vector<float> x = gaussian(dim, 3, 2.0f, mean), y(dim);
    x[5] = 25.0f;  // an outlier widens its group's step only
    std::vector<uint8_t> row(turboquant::key_row_bytes(dim));
    ASSERT_EQ(row.size(), size_t(dim + 4 * dim / 32));
    turboquant::encode_key(x.data(), dim, row.data());
    turboquant::decode_key(row.data(), dim, y.data());
    for (int64_t g = 0; g < dim / 32; ++g) {
      float lo = x[g * 32], hi = lo, amax = 0;
      for (int i = 0; i < 32; ++i) {
        lo = std::min(lo, x[g * 32 + i]);
        hi = std::max(hi, x[g * 32 + i]);
        amax = std::max(amax, std::fabs(x[g * 32 + i]));
      }
      const float step = std::max((hi - lo) / 254, amax / 2048);
      for (int i = 0; i < 32; ++i) EXPECT_LE(std::fabs(y[g * 32 + i] - x[g * 32 + i]), 0.6f * step) << g << " " << i;
    }
  }
  std::vector<float> zeros(dim, 0.0f), y(dim, 1.0f);
  std::vector<uint8_t> row(turboquant::key_row_bytes(dim));
  turboquant::encode_key(zeros.data(), dim, row.data());
  turboquant::decode_key(row.data(), dim, y.data());
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(TurboQuantValues, ErrorNearTheLloydMaxDistortion) {
  const int64_t dim = 128, rows = 400;
  const double dmax[] = {0, 0.3634, 0.1175, 0.03454, 0.009497};
  for (int bits : {2, 3, 4, 8}) {
    std::vector<float> x = gaussian(dim * rows, 11, 0.7f);
    double err = 0, sig = 0;
    std::vector<uint8_t> row(turboquant::value_row_bytes(bits, dim));
    ASSERT_EQ(row.size(), size_t(dim * bits / 8 + 2 * dim / 32));
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> v(x.begin() + r * dim, x.begin() + (r + 1) * dim), w = v;
      turboquant::rotate(w.data(), dim);
      turboquant::encode_rotated_value(w.data(), dim, bits, row.data());
      turboquant::decode_rotated_value(row.data(), dim, bits, w.data());
      turboquant::unrotate(w.data(), dim);
      for (int64_t i = 0; i < dim; ++i) {
        err += (w[i] - v[i]) * (w[i] - v[i]);
        sig += v[i] * v[i];
      }
    }
    // The rotation preserves norms, so the NMSE is the codebook's distortion on RMS-normalised
    // Gaussian groups (the 32-sample RMS estimate costs a little).
    const double expect = bits == 8 ? std::sqrt(3.0) * M_PI / 2 / 65536.0 : dmax[bits];
    EXPECT_LT(err / sig, 1.25 * expect) << bits << " bits";
    EXPECT_GT(err / sig, 0.75 * expect) << bits << " bits";
  }
}

// The decoders (vectorised where the build allows) return exactly the codec's arithmetic: codebook
// entry times the group's f16 scale for values, (code + zero point) times scale for keys.
TEST(TurboQuantValues, DecodeIsTheCodebookTimesTheScaleExactly) {
  for (int64_t dim : {32, 64, 128, 256, 512}) {
    for (int bits : {2, 3, 4, 8}) {
      std::vector<float> x = gaussian(dim, 7 + bits + dim, 1.3f);
      std::vector<uint8_t> row(turboquant::value_row_bytes(bits, dim));
      turboquant::encode_rotated_value(x.data(), dim, bits, row.data());
      std::vector<float> got(dim);
      turboquant::decode_rotated_value(row.data(), dim, bits, got.data());
      std::vector<uint8_t> codes(dim);
      unpack_bits(row.data(), dim, bits, codes.data());
      const std::vector<float>& book = turboquant::codebook(bits);
      const uint8_t* scales = row.data() + packed_bytes(dim, bits);
      for (int64_t i = 0; i < dim; ++i) {
        const int64_t g = i / turboquant::kGroup;
        const float s = f16::to_f32(static_cast<uint16_t>(scales[2 * g] | (scales[2 * g + 1] << 8)));
        ASSERT_EQ(got[i], book[codes[i]] * s) << "dim " << dim << " bits " << bits << " at " << i;
      }
    }
    std::vector<float> k = gaussian(dim, 99 + dim, 2.0f);
    std::vector<uint8_t> row(turboquant::key_row_bytes(dim));
    turboquant::encode_key(k.data(), dim, row.data());
    std::vector<float> got(dim);
    turboquant::decode_key(row.data(), dim, got.data());
    const uint8_t* scales = row.data() + dim;
    const uint8_t* zeros = scales + 2 * (dim / turboquant::kGroup);
    for (int64_t i = 0; i < dim; ++i) {
      const int64_t g = i / turboquant::kGroup;
      const float sc = f16::to_f32(static_cast<uint16_t>(scales[2 * g] | (scales[2 * g + 1] << 8)));
      const float zp = f16::to_f32(static_cast<uint16_t>(zeros[2 * g] | (zeros[2 * g + 1] << 8)));
      ASSERT_EQ(got[i], (static_cast<float>(static_cast<int8_t>(row[i])) + zp) * sc) << "dim " << dim << " at " << i;
    }
  }
}

}  // namespace
}  // namespace tern
