// Reading and writing loadable files. read_loadable() runs the FlatBuffers verifier and then every
// semantic check in model_checks.h before returning; on any problem it throws Error whose message
// names the offending field (the runtime maps that to cudlaErrorInvalidModule).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model.h"

namespace softdla {

Model read_loadable(std::span<const uint8_t> bytes);

// Fills version, builder name, I/O descriptors and (if empty) the memory plan, then runs every check:
// what the writer does before serializing, for code that executes a Model without a file.
void finalize_model(Model& m);

// Checks the model, fills version, descriptors and memory plan if missing, and serializes it.
std::vector<uint8_t> write_loadable(Model model);
void write_loadable_file(const Model& model, const std::string& path);

}  // namespace softdla
