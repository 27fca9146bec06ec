// SOFTDLA_FAULT: makes chosen tasks fail as a faulting DLA would, so a program's asynchronous error
// path (cudlaGetLastError, the CUDA stream's error, standalone EOF fences) can be tested off a Jetson.
//
//   SOFTDLA_FAULT=<status>[@<task>]
//
// <status> is a cudlaErrorDlaErr* name without its prefix (InvalidInput, InvalidPreAction, NoMem,
// ProcessorBusy, TaskStatusMismatch, EngineTimeout, DataMismatch) or its number (0x40000001...);
// <task>, when given, is the handle's task number (0 = the first task submitted on that handle), and
// without it every task fails. docs/RUNTIME.md "Injecting faults".
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "cudla.h"

namespace softdla::rt {

struct InjectedFault {
  cudlaStatus status = cudlaSuccess;
  std::optional<uint64_t> task;  // empty: every task
};

// Parses a SOFTDLA_FAULT value; empty when it is not one (the caller logs why in `why`).
std::optional<InjectedFault> parse_fault(const std::string& text, std::string& why);

// The fault SOFTDLA_FAULT asks for task number `task` of a handle, or cudlaSuccess. Read on every
// call, so a test can set and clear the variable between submissions; a malformed value is logged
// once and ignored.
cudlaStatus injected_fault_for(uint64_t task);

}  // namespace softdla::rt
