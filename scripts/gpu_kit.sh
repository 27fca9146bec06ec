#!/usr/bin/env bash
# Assembles the kit that the GPU machine runs from (docs/PERFORMANCE.md's CUDA section): the engine's
# C library, libsoftdla_cuda.so, libcudla.so.1 (and the NvSci stubs), the softdla CLI, and the system
# libraries and tools a bare GPU machine lacks (libonnx_proto, libprotobuf for the CLI; flatc for the
# tests). Build first (cmake --build --preset release), then:
#   scripts/gpu_kit.sh [build-dir] [kit-dir]        (defaults: build, .gpukit/new; .gpukit/ is git-ignored)
# On the GPU machine (the kit carried there):
#   K=.gpukit/new; export LD_LIBRARY_PATH=$PWD/$K:$PWD/$K/lib:/usr/local/cuda/lib64 PATH=$PWD/$K/bin:$PATH SOFTDLA_BUILD_DIR=$PWD/$K
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
KIT=${2:-.gpukit/new}
rm -rf "$KIT"
mkdir -p "$KIT/lib" "$KIT/bin"
for f in softdla libsoftdla_cuda.so libsoftdla_engine_c.so; do cp -L "$BUILD/$f" "$KIT/$f"; done
for stem in libcudla libnvscibuf libnvscisync; do
  cp -L "$BUILD/$stem.so.1" "$KIT/$stem.so.1"
  ln -sf "$stem.so.1" "$KIT/$stem.so"
done
# The CLI's system libraries that the GPU machine's image does not have.
for dep in libonnx_proto.so.1 libprotobuf.so.32; do
  path=$(ldd "$KIT/softdla" | awk -v d="$dep" '$1 == d { print $3 }')
  [[ -n $path ]] && cp -L "$path" "$KIT/lib/"
done
command -v flatc >/dev/null && cp -L "$(command -v flatc)" "$KIT/bin/"
du -sh "$KIT"
