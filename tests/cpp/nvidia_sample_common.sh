# Sourced by nvidia_sample.sh and nvidia_standalone_sample.sh: the arguments, NVIDIA's samples folder, the
# sample's source and nvcc, with CTest's skip (exit 77) when the samples or nvcc are absent.
#   <sample> <dir of libcudla.so> <include dir> <work dir> <loadable>
# The samples are found at $SOFTDLA_NVIDIA_SAMPLES, else ../shared/nvidia-cuda-samples-cudla or
# shared/nvidia-cuda-samples-cudla beside/inside the repository.
sample=$1 libdir=$(realpath "$2") incdir=$(realpath "$3") work=$4 loadable=$(realpath "$5")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
samples=${SOFTDLA_NVIDIA_SAMPLES:-}
if [[ -z $samples ]]; then
  for c in "$root/../shared/nvidia-cuda-samples-cudla" "$root/shared/nvidia-cuda-samples-cudla"; do
    [[ -d $c ]] && { samples=$c; break; }
  done
fi
src="$samples/Samples/8_Platform_Specific/Tegra/$sample"
if [[ -z $samples || ! -f $src/CMakeLists.txt ]]; then
  echo "SKIP: NVIDIA's cuDLA samples not found (set SOFTDLA_NVIDIA_SAMPLES)"
  exit 77
fi
nvcc=${CUDACXX:-$(command -v nvcc || true)}
[[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
if [[ -z $nvcc ]]; then
  echo "SKIP: the samples' CMakeLists.txt enable CUDA, which needs the CUDA toolkit (nvcc)"
  exit 77
fi
fail() { echo "FAIL ($sample): $*"; exit 1; }
