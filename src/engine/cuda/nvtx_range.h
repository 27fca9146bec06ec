// NVTX ranges around a task and each op's launches, so Nsight Systems (nsys profile --trace=cuda,nvtx)
// shows the loadable's layers over the kernels they launched. NVTX v3 is header-only and costs a branch
// per call when no tool is attached; a toolkit without its header builds the ranges as no-ops.
// Graph replays launch no op code: the op ranges appear when a task's graph is captured (the first task
// on a set of I/O addresses) and on every task run with layer-wise statistics (those launch each op).
#pragma once

#if defined(__has_include)
#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define SOFTDLA_HAVE_NVTX 1
#endif
#endif

namespace softdla::gpu {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) {
#ifdef SOFTDLA_HAVE_NVTX
    nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  ~NvtxRange() {
#ifdef SOFTDLA_HAVE_NVTX
    nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace softdla::gpu
