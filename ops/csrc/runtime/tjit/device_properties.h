#pragma once
// Device facts launch planners need (cached per device, read through the CUDA driver).

#include <c10/core/Device.h>

namespace tjit {

// Streaming multiprocessors of a CUDA device; 0 for any other device (plans then assume a
// small machine). Throws c10::Error if the driver cannot be queried.
int multiprocessor_count(const c10::Device& device);

// Peak DRAM bandwidth of a CUDA device in GB/s (two transfers a memory clock over the bus width),
// 0 for any other device or where the driver reports no memory clock.
int memory_bandwidth_gbps(const c10::Device& device);

// Compute capability of a CUDA device as 10 * major + minor (90 for sm_90); 0 for any other device.
int compute_capability(const c10::Device& device);

// Whether kernels on `device` may be launched with programmatic dependent launch (a kernel starts
// while the one before it in the stream finishes; it calls griddepcontrol.wait before it reads what
// that one wrote): compute capability 9.0 or newer, and a driver of CUDA 12.3 or newer, the first
// whose graph captures keep such launches. False for any device but CUDA.
bool dependent_launch_supported(const c10::Device& device);

}  // namespace tjit
