# The build's dependencies. A lookup that fails does not stop CMake on its own: every missing one is
# collected, and one error names them all with the Debian/Ubuntu packages that provide them (the list is in
# docs/PYTHON.md, "Building from source"; scripts/setup.sh installs them).
set(_softdla_missing_pkgs "")
set(_softdla_missing_text "")
macro(_softdla_need found what package)
  if(NOT ${found})
    list(APPEND _softdla_missing_pkgs ${package})
    string(APPEND _softdla_missing_text "\n  ${what}: apt-get install ${package}")
  endif()
endmacro()

find_package(Threads REQUIRED)
# FlatBuffers is used header-only (builder, verifier, accessors); flatc generates the loadable's accessors.
find_path(FLATBUFFERS_INCLUDE_DIR flatbuffers/flatbuffers.h)
_softdla_need(FLATBUFFERS_INCLUDE_DIR "FlatBuffers headers (flatbuffers/flatbuffers.h)" libflatbuffers-dev)
find_program(FLATC flatc)
_softdla_need(FLATC "the FlatBuffers schema compiler (flatc)" flatbuffers-compiler)
find_package(CLI11 QUIET)
_softdla_need(CLI11_FOUND "CLI11, the command-line parser (CLI11Config.cmake)" libcli11-dev)
# The ONNX builder: ONNX's protobuf classes (libonnx_proto) over libprotobuf.
find_package(Protobuf QUIET)
_softdla_need(Protobuf_FOUND "Protocol Buffers (libprotobuf and its headers)" libprotobuf-dev)
find_package(ONNX QUIET)
_softdla_need(ONNX_FOUND "ONNX (ONNXConfig.cmake, libonnx_proto)" libonnx-dev)
if(SOFTDLA_BUILD_TESTS)
  find_package(GTest QUIET)
  _softdla_need(GTest_FOUND "GoogleTest, for the C++ tests (or configure with -DSOFTDLA_BUILD_TESTS=OFF)" libgtest-dev)
endif()
if(SOFTDLA_BUILD_BENCH AND NOT SOFTDLA_SANITIZE)
  find_package(benchmark QUIET)
  _softdla_need(benchmark_FOUND "Google Benchmark, for bench/ (or configure with -DSOFTDLA_BUILD_BENCH=OFF)"
                libbenchmark-dev)
endif()

if(_softdla_missing_pkgs)
  list(JOIN _softdla_missing_pkgs " " _softdla_missing_line)
  message(FATAL_ERROR "softdla cannot be built: missing build dependencies${_softdla_missing_text}\n"
    "On Debian or Ubuntu, install them all with:\n"
    "  sudo apt-get install ${_softdla_missing_line}\n"
    "(docs/PYTHON.md, \"Building from source\", lists every dependency; scripts/setup.sh installs them.)")
endif()
