// Where a tensor's memory lives.
#pragma once
#include <string>

namespace tern {

enum class DeviceKind { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  static Device cpu() { return {}; }
  static Device cuda(int i = 0) { return {DeviceKind::cuda, i}; }
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  bool operator==(const Device&) const = default;
  // "cpu", "cuda:0"
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

}  // namespace tern
