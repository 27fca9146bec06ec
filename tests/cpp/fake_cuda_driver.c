/* A stand-in for the CUDA driver (built as libcuda.so.1 in a directory of its own) that reports one
 * device, so that softdla's loader goes on to load the plugin SOFTDLA_CUDA_PLUGIN names: with
 * fake_gpu_plugin.cpp, the runtime's CUDA stream paths run on a machine without a GPU. Only the two
 * calls softdla's loader makes exist. */
int cuInit(unsigned int flags);
int cuDeviceGetCount(int* count);

int cuInit(unsigned int flags) {
  (void)flags;
  return 0;
}

int cuDeviceGetCount(int* count) {
  *count = 1;
  return 0;
}
