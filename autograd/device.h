// device.h — where a tensor's bytes live. Devices are a seam: every kernel is reached through the
// Backend table of the tensor's device, so a CUDA backend (gpu/) plugs in without touching ops or nn.
#pragma once
#include <cstdint>
#include <string>

namespace autograd {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

// Parses "cpu", "cuda", "cuda:1"; throws std::invalid_argument otherwise.
Device parse_device(const std::string& text);

// True when this build has a backend for the device's type (a CUDA build also needs a GPU to run).
bool has_backend(Device device);

}  // namespace autograd
