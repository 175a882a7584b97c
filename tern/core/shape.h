// Shapes and strides (in elements), PyTorch order: dim 0 outermost.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tern {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t numel(const Shape& s);
Strides contiguous_strides(const Shape& s);
// "[2, 3, 4]"
std::string shape_str(const Shape& s);
// Maps a possibly negative dim into [0, rank); throws "[what] dim d out of range for rank r".
int normalize_dim(int64_t dim, size_t rank, const char* what);
// NumPy broadcasting of two shapes; throws "[what] cannot broadcast [..] with [..]".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* what);

}  // namespace tern
