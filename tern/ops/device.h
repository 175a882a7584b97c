// Device queries the upper layers may ask without including backend headers: whether a CUDA device
// is usable, its name, its free memory, and initialisation. Defined by backend/cuda (or backend/no_cuda stubs).
#pragma once
#include <cstdint>
#include <string>

namespace tern {

// True when this build has CUDA and a device answers.
bool cuda_available();
// Why CUDA is or is not available ("no CUDA in this build", the driver's error, or the device name).
std::string cuda_status();
// Initialises device 0 (stream, allocator, cuBLASLt) once; throws tern::Error when unavailable.
void cuda_init();
// "NVIDIA H200 (sm_90, 139 GiB)" or "" when unavailable.
std::string cuda_device_name();
// Bytes free on the device now (cudaMemGetInfo); throws tern::Error when unavailable.
int64_t cuda_free_memory();

}  // namespace tern
