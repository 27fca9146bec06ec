// Standalone-mode tasks on the CUDA backend (standalone_gpu.cpp).
#pragma once
#include <cstdint>

#include "task.h"

namespace softdla::rt {

// Runs task number `index` of a standalone handle whose module the CUDA backend prepared, from and to
// the task's host (NvSciBuf) memory; returns when its outputs are written. Throws std::runtime_error when
// CUDA fails.
void run_task_gpu(DeviceState& dev, const ResolvedTask& t, uint64_t index);

// Frees the handle's device staging buffers.
void free_gpu_stage(DeviceState& dev);

}  // namespace softdla::rt
