// A standalone task's wait and signal events (standalone_events.cpp).
#pragma once
#include "standalone_queue.h"

namespace softdla::rt {

// Checks a task's waitEvents/signalEvents, copies its pre-fences and finds its imported semaphores.
// Caller holds dev.state_mutex.
cudlaStatus resolve_events(const DeviceState& dev, const cudlaTask& t, size_t index, StandaloneJob& job);

// Generates the task's SOF and EOF fences into the application's NvSciSyncFence placeholders. Called
// once every task of the submission is valid, in queue order (a generated fence must be signalled).
void fill_signal_fences(StandaloneJob& job);

}  // namespace softdla::rt
