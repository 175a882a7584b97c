// A kernel tracer for any CUDA program, injected by the driver: every kernel's GPU start and end,
// including the nodes of CUDA graphs, written as CSV when the program exits. It measures what a
// compiled decode step's kernels cost inside the graph, where programmatic dependent launch overlaps
// them (Nsight Compute serialises kernels; Nsight Systems is not on every machine).
//
//   g++ -O2 -shared -fPIC -std=c++20 -I/usr/local/cuda/include bench/cuda/kernel_trace.cpp \
//       -o kernel_trace.so -L/usr/local/cuda/lib64 -lcupti
//   CUDA_INJECTION64_PATH=$PWD/kernel_trace.so TERN_KERNEL_TRACE=trace.csv tern bench ...
//   python3 bench/graph_profile.py trace.csv
//
// The CSV has the columns of Nsight Systems' cuda_gpu_trace report that bench/graph_profile.py reads:
// "Start (ns)", "Duration (ns)", "GrdX", "Name", plus the graph node id.
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Row {
  uint64_t start, end, node;
  int grid;
  std::string name;
};

std::mutex rows_mutex;
std::vector<Row> rows;
constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(rows_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    rows.push_back({k->start, k->end, k->graphNodeId, k->gridX * k->gridY * k->gridZ, k->name ? k->name : "?"});
  }
  free(buffer);
}

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "kernel_trace: %s failed: %s\n", what, msg ? msg : "?");
}

void write_rows() {
  check(cuptiActivityFlushAll(1), "cuptiActivityFlushAll");
  const char* path = std::getenv("TERN_KERNEL_TRACE");
  if (!path) path = "kernel_trace.csv";
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path);
    return;
  }
  std::lock_guard<std::mutex> lock(rows_mutex);
  std::fprintf(f, "\"Start (ns)\",\"Duration (ns)\",\"GrdX\",\"Node\",\"Name\"\n");
  for (const Row& r : rows) {
    std::string name = r.name;
    for (char& c : name)
      if (c == '"') c = '\'';
    std::fprintf(f, "%llu,%llu,%d,%llu,\"%s\"\n", static_cast<unsigned long long>(r.start),
                 static_cast<unsigned long long>(r.end - r.start), r.grid, static_cast<unsigned long long>(r.node),
                 name.c_str());
  }
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels to %s\n", rows.size(), path);
}

}  // namespace

// Called by the CUDA driver when CUDA_INJECTION64_PATH names this library.
extern "C" int InitializeInjection() {
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable");
  std::atexit(write_rows);
  return 1;
}
