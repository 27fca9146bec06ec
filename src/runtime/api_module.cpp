// Modules: loading a loadable into a handle, querying its tensors, unloading.
#include <cstring>

#include "cudla.h"
#include "guard.h"
#include "loadable.h"
#include "runtime_state.h"
#include "softdla/cudla_ext.h"

using namespace softdla;
using namespace softdla::rt;

namespace {

void fill(cudlaModuleTensorDescriptor& out, const TensorDescriptor& d) {
  std::memset(&out, 0, sizeof(out));
  std::strncpy(out.name, d.name.c_str(), CUDLA_RUNTIME_TENSOR_DESC_NAME_MAX_LEN);
  out.size = d.size;
  out.n = d.n, out.c = d.c, out.h = d.h, out.w = d.w;
  out.dataFormat = d.data_format;
  out.dataType = d.data_type;
  out.dataCategory = d.data_category;
  out.pixelFormat = d.pixel_format;
  out.pixelMapping = d.pixel_mapping;
  for (size_t i = 0; i < CUDLA_LOADABLE_TENSOR_DESC_NUM_STRIDES; ++i) out.stride[i] = d.stride[i];
}

}  // namespace

extern "C" cudlaStatus cudlaModuleLoadFromMemory(cudlaDevHandle const devHandle, const uint8_t* const pModule,
                                                 size_t const moduleSize, cudlaModule* const hModule,
                                                 uint32_t const flags) {
  static const char* fn = "cudlaModuleLoadFromMemory";
  return guarded(fn, [&] {
    const auto dev = find_device(devHandle);
    if (!dev) return fail_status(cudlaErrorInvalidDevice, fn, "not a live device handle");
    if (!hModule) return fail_status(cudlaErrorInvalidParam, fn, "hModule is NULL");
    *hModule = nullptr;
    if (flags == CUDLA_MODULE_ENABLE_FAULT_DIAGNOSTICS)
      return fail_status(cudlaErrorUnsupportedOperation, fn,
                         "permanent-fault diagnostics test DLA silicon; a software DLA has none (docs/RUNTIME.md)");
    if (flags != CUDLA_MODULE_DEFAULT) return fail_status(cudlaErrorInvalidParam, fn, "unknown flags ", flags);
    if (!pModule || moduleSize == 0) return fail_status(cudlaErrorInvalidParam, fn, "NULL or empty loadable");
    {
      std::lock_guard<std::mutex> lock(dev->state_mutex);
      if (dev->module)
        return fail_status(cudlaErrorUnsupportedOperation, fn,
                           "this handle already holds a module: one loadable per handle (create another handle)");
    }
    auto mod = std::make_shared<ModuleState>();
    try {
      // The handle's backend only: a CUDA handle uploads to the GPU (falling back to the CPU backend
      // for a loadable it cannot prepare), a CPU handle builds the CPU engine.
      mod->prepared = dev->backend->prepare(read_loadable({pModule, moduleSize}));
    } catch (const Error& e) {
      return fail_status(cudlaErrorInvalidModule, fn, "bad loadable: ", e.what());
    }
    mod->device = dev;
    mod->stats_descriptors = {statistics_descriptor(mod->model())};
    std::lock_guard<std::mutex> lock(dev->state_mutex);
    if (!dev->alive) return fail_status(cudlaErrorInvalidDevice, fn, "device handle was destroyed");
    if (dev->module)  // another thread loaded one meanwhile
      return fail_status(cudlaErrorUnsupportedOperation, fn, "this handle already holds a module");
    Registry& r = registry();
    {
      std::lock_guard<std::mutex> reg(r.mutex);
      mod->handle = new_module_handle(r);
      r.modules[reinterpret_cast<uintptr_t>(mod->handle)] = mod;
    }
    dev->module = mod;
    *hModule = mod->handle;
    return cudlaSuccess;
  });
}

extern "C" cudlaStatus cudlaModuleGetAttributes(cudlaModule const hModule, cudlaModuleAttributeType const attrType,
                                                cudlaModuleAttribute* const attribute) {
  static const char* fn = "cudlaModuleGetAttributes";
  return guarded(fn, [&] {
    if (!attribute) return fail_status(cudlaErrorInvalidParam, fn, "attribute is NULL");
    const auto mod = find_module(hModule);
    if (!mod) return missing_module(hModule, fn);
    if (!mod->device.lock()) return fail_status(cudlaErrorInvalidDevice, fn, "the module's device is gone");
    const Model& m = mod->model();
    auto copy_out = [&](const auto& list, cudlaModuleTensorDescriptor* dst, const char* what) {
      if (!dst)
        return fail_status(cudlaErrorInvalidParam, fn, what,
                           ": set attribute->inputTensorDesc/outputTensorDesc to an array of the tensor count");
      for (size_t i = 0; i < list.size(); ++i) fill(dst[i], list[i]);
      return cudlaSuccess;
    };
    std::vector<TensorDescriptor> in, out;
    for (const IoBinding& io : m.inputs) in.push_back(io.desc);
    for (const IoBinding& io : m.outputs) out.push_back(io.desc);
    switch (enum_value(attrType)) {
      case CUDLA_NUM_INPUT_TENSORS: attribute->numInputTensors = uint32_t(in.size()); return cudlaSuccess;
      case CUDLA_NUM_OUTPUT_TENSORS: attribute->numOutputTensors = uint32_t(out.size()); return cudlaSuccess;
      case CUDLA_NUM_OUTPUT_TASK_STATISTICS:
        attribute->numOutputTensors = uint32_t(mod->stats_descriptors.size());
        return cudlaSuccess;
      case CUDLA_INPUT_TENSOR_DESCRIPTORS: return copy_out(in, attribute->inputTensorDesc, "input descriptors");
      case CUDLA_OUTPUT_TENSOR_DESCRIPTORS: return copy_out(out, attribute->outputTensorDesc, "output descriptors");
      case CUDLA_OUTPUT_TASK_STATISTICS_DESCRIPTORS:
        return copy_out(mod->stats_descriptors, attribute->outputTensorDesc, "statistics descriptors");
    }
    return fail_status(cudlaErrorInvalidAttribute, fn, "unknown attribute type ", enum_value(attrType));
  });
}

extern "C" cudlaStatus cudlaModuleUnload(cudlaModule const hModule, uint32_t const flags) {
  static const char* fn = "cudlaModuleUnload";
  return guarded(fn, [&] {
    if (flags != 0) return fail_status(cudlaErrorInvalidParam, fn, "flags are reserved and must be 0, got ", flags);
    const auto mod = find_module(hModule);
    if (!mod) return missing_module(hModule, fn);
    const auto dev = mod->device.lock();
    if (!dev) return fail_status(cudlaErrorInvalidDevice, fn, "the module's device is gone");
    Registry& r = registry();
    std::lock_guard<std::mutex> exec(r.cores[dev->core].exec_mutex);  // let a running task finish
    std::lock_guard<std::mutex> lock(dev->state_mutex);
    if (dev->module != mod) return fail_status(cudlaErrorInvalidModule, fn, "module is not loaded");
    mod->loaded = false;
    dev->module.reset();
    std::lock_guard<std::mutex> reg(r.mutex);
    r.modules.erase(reinterpret_cast<uintptr_t>(hModule));
    return cudlaSuccess;
  });
}

extern "C" cudlaStatus softdlaModuleGetTensorScale(cudlaModule const hModule, int const isOutput, uint32_t const index,
                                                   float* const scale) {
  static const char* fn = "softdlaModuleGetTensorScale";
  return guarded(fn, [&] {
    if (!scale) return fail_status(cudlaErrorInvalidParam, fn, "scale is NULL");
    const auto mod = find_module(hModule);
    if (!mod) return missing_module(hModule, fn);
    const Model& m = mod->model();
    const auto& list = isOutput ? m.outputs : m.inputs;
    if (index >= list.size()) return fail_status(cudlaErrorInvalidParam, fn, "tensor index ", index, " of ", list.size());
    *scale = m.tensors[list[index].tensor].scale;
    return cudlaSuccess;
  });
}

extern "C" cudlaStatus softdlaModuleGetTensorName(cudlaModule const hModule, int const isOutput, uint32_t const index,
                                                  char* const name, size_t* const nameSize) {
  static const char* fn = "softdlaModuleGetTensorName";
  return guarded(fn, [&] {
    if (!nameSize) return fail_status(cudlaErrorInvalidParam, fn, "nameSize is NULL");
    const auto mod = find_module(hModule);
    if (!mod) return missing_module(hModule, fn);
    const Model& m = mod->model();
    const auto& list = isOutput ? m.outputs : m.inputs;
    if (index >= list.size()) return fail_status(cudlaErrorInvalidParam, fn, "tensor index ", index, " of ", list.size());
    return copy_text_out(fn, m.tensors[list[index].tensor].name, name, nameSize);
  });
}
