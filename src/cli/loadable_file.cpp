// Where `softdla build` writes its loadable: checked before the build (which may be long) and written so
// that a failed write is an error, never a "built" line over a missing or partial file.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "error.h"

namespace softdla::cli {

void check_loadable_destination(const std::string& save, const std::string& onnx_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(save, ec) && fs::equivalent(save, onnx_path, ec))
    fail("--saveEngine '", save, "' is the ONNX model itself: writing the loadable would destroy the model; "
         "give another path");
  if (fs::is_directory(save, ec)) fail("--saveEngine '", save, "' is a directory: give a file path");
  const fs::path dir = fs::path(save).parent_path();
  if (!dir.empty() && !fs::is_directory(dir, ec))
    fail("--saveEngine '", save, "': directory '", dir.string(), "' does not exist");
}

void write_loadable_file(const std::string& save, const std::vector<uint8_t>& bytes) {
  std::ofstream f(save, std::ios::binary | std::ios::trunc);
  if (!f) fail("cannot write '", save, "' (", std::strerror(errno), ")");
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  f.close();  // flushes: a full disk shows here
  if (!f) {
    const int err = errno;
    std::error_code ec;
    if (std::filesystem::is_regular_file(save, ec)) std::filesystem::remove(save, ec);  // no partial loadable left
    fail("failed writing '", save, "' (", std::strerror(err), "); no loadable was written");
  }
}

}  // namespace softdla::cli
