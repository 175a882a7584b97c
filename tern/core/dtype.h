// Element types of tensors: names, sizes, and the host C++ type of each.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "tern/base/half.h"

namespace tern {

enum class Dtype : uint8_t { f32, bf16, f16, i32, i64, u8, i8, boolean };

size_t dtype_size(Dtype d);
// "f32", "bf16", ...; also the spelling error messages use.
const char* dtype_name(Dtype d);
bool is_floating(Dtype d);

template <typename T> struct DtypeOf;
template <> struct DtypeOf<float> { static constexpr Dtype value = Dtype::f32; };
template <> struct DtypeOf<bf16> { static constexpr Dtype value = Dtype::bf16; };
template <> struct DtypeOf<f16> { static constexpr Dtype value = Dtype::f16; };
template <> struct DtypeOf<int32_t> { static constexpr Dtype value = Dtype::i32; };
template <> struct DtypeOf<int64_t> { static constexpr Dtype value = Dtype::i64; };
template <> struct DtypeOf<uint8_t> { static constexpr Dtype value = Dtype::u8; };
template <> struct DtypeOf<int8_t> { static constexpr Dtype value = Dtype::i8; };
template <> struct DtypeOf<bool> { static constexpr Dtype value = Dtype::boolean; };

// Calls fn(T{}) with T the host type of d (bool for boolean).
template <typename Fn>
decltype(auto) dispatch_dtype(Dtype d, Fn&& fn) {
  switch (d) {
    case Dtype::f32: return fn(float{});
    case Dtype::bf16: return fn(bf16{});
    case Dtype::f16: return fn(f16{});
    case Dtype::i32: return fn(int32_t{});
    case Dtype::i64: return fn(int64_t{});
    case Dtype::u8: return fn(uint8_t{});
    case Dtype::i8: return fn(int8_t{});
    case Dtype::boolean: return fn(bool{});
  }
  return fn(float{});
}

}  // namespace tern
