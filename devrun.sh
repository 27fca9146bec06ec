K=.gpukit/new
export LD_LIBRARY_PATH=$PWD/$K:$PWD/$K/lib:/usr/local/cuda/lib64 PATH=$PWD/$K/bin:$PATH SOFTDLA_BUILD_DIR=$PWD/$K SOFTDLA_NVIDIA_SAMPLES=$PWD/.gpukit/samples
