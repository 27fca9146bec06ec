// Reading a whole input file (a model, a loadable, a .npy, a calibration cache) into memory, safely:
// only regular files are read (a device such as /dev/zero or a FIFO never ends: reading one would
// allocate until memory runs out), the size is checked against a per-kind limit before anything is
// allocated, and every failure is an Error that names the file and says what to do.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "error.h"

namespace softdla {

// Limits per kind of file. ONNX models and loadables are protobuf / FlatBuffers messages, which cannot
// exceed 2 GiB; a TensorRT calibration cache is one short line per tensor.
inline constexpr uint64_t kMaxModelFileBytes = uint64_t(2) << 30;
inline constexpr uint64_t kMaxCalibrationCacheBytes = uint64_t(64) << 20;
inline constexpr uint64_t kNoFileSizeLimit = ~uint64_t(0);  // .npy data: as large as memory allows

// The bytes of the regular file `path`; `what` names the kind of file in messages ("ONNX model").
inline std::vector<uint8_t> read_file_bytes(const std::string& path, std::string_view what, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open '", path, "' (", what, "): ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) fail("cannot read ", what, " '", path, "': ", std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    fail(what, " '", path, "' is not a regular file (", S_ISDIR(st.st_mode) ? "a directory" : "a device, pipe or socket",
         "); give the path of a file");
  const uint64_t size = uint64_t(st.st_size);
  if (size > max_bytes)
    fail(what, " '", path, "' is ", size, " bytes, more than the ", max_bytes, "-byte limit for a ", what);
  std::vector<uint8_t> bytes;
  try {
    bytes.resize(size_t(size));
  } catch (const std::bad_alloc&) {
    fail("not enough memory to read ", what, " '", path, "' (", size, " bytes)");
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read ", what, " '", path, "': ", std::strerror(errno));
    if (n == 0) fail(what, " '", path, "' shrank while it was being read; read it again once it is written");
    done += size_t(n);
  }
  return bytes;
}

}  // namespace softdla
