// A validated task (api_submit.cpp): its module and its buffers resolved from DLA addresses.
#pragma once
#include <memory>
#include <vector>

#include "runtime_state.h"

namespace softdla::rt {

struct ResolvedTask {
  std::shared_ptr<ModuleState> module;
  TaskIo io;  // host or CUDA device pointers behind the task's DLA addresses
  std::vector<std::shared_ptr<void>> keep;  // standalone: the imported NvSciBuf objects the task uses
};

}  // namespace softdla::rt
