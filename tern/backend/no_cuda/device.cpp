// CPU-only build: no CUDA device.
#include "tern/base/error.h"
#include "tern/ops/device.h"

namespace tern {

bool cuda_available() { return false; }
std::string cuda_status() { return "no CUDA in this build"; }
void cuda_init() { TERN_THROW("[device] cuda is not available: no CUDA in this build"); }
std::string cuda_device_name() { return ""; }
int64_t cuda_free_memory() { TERN_THROW("[device] cuda is not available: no CUDA in this build"); }

}  // namespace tern
