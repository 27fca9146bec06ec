// Loading a model onto the GPU (module.cu).
#pragma once
#include <memory>

#include "gpu_backend.h"
#include "gpu_ops.h"

namespace softdla::gpu {
std::unique_ptr<Module> load_module(const Model& m);
}  // namespace softdla::gpu
