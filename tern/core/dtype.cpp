// Dtype names and sizes.
#include "tern/core/dtype.h"

#include "tern/base/error.h"

namespace tern {

size_t dtype_size(Dtype d) {
  switch (d) {
    case Dtype::f32: case Dtype::i32: return 4;
    case Dtype::bf16: case Dtype::f16: return 2;
    case Dtype::i64: return 8;
    case Dtype::u8: case Dtype::i8: case Dtype::boolean: return 1;
  }
  return 0;
}

const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::f32: return "f32";
    case Dtype::bf16: return "bf16";
    case Dtype::f16: return "f16";
    case Dtype::i32: return "i32";
    case Dtype::i64: return "i64";
    case Dtype::u8: return "u8";
    case Dtype::i8: return "i8";
    case Dtype::boolean: return "bool";
  }
  return "?";
}

bool is_floating(Dtype d) { return d == Dtype::f32 || d == Dtype::bf16 || d == Dtype::f16; }

}  // namespace tern
