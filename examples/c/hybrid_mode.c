/*
 * The cuDLAHybridMode flow of NVIDIA's samples, step by step, on softdla's libcudla.so.1 with host
 * memory (no GPU needed): create a device, load a loadable from a file, query the tensor descriptors,
 * allocate and register buffers, pack the input, submit, read and check the outputs, unregister,
 * unload, destroy. It runs the bundled bars model and checks that each of its four images is classified
 * as the bar it shows.
 *
 *   build/examples/hybrid_mode [examples/models/bars.loadable]
 *
 * The same source links against NVIDIA's libcudla on a Jetson; there, buffers would come from
 * cudaMalloc and the task would go on a CUDA stream (steps 2, 5, 8, 10 and 13 of the sample).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudla.h"

#define CHECK(call, what)                                                   \
  do {                                                                      \
    cudlaStatus s_ = (call);                                                \
    if (s_ != cudlaSuccess) {                                               \
      fprintf(stderr, "Error in %s = %d\n", what, (int)s_);                 \
      return 1;                                                             \
    }                                                                       \
  } while (0)

static float half_to_float(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  const float sign = (h & 0x8000) ? -1.f : 1.f;
  if (exp == 0) return sign * ldexpf((float)man, -24);
  if (exp == 31) return man ? NAN : sign * INFINITY;
  return sign * ldexpf((float)(man | 0x400), exp - 25);
}

static void print_descriptor(const cudlaModuleTensorDescriptor* d) {
  printf("  name %s size %llu dims [%llu,%llu,%llu,%llu] format %u type %u category %u pixel %u mapping %u "
         "stride [%u,%u,%u,%u]\n",
         d->name, (unsigned long long)d->size, (unsigned long long)d->n, (unsigned long long)d->c,
         (unsigned long long)d->h, (unsigned long long)d->w, d->dataFormat, d->dataType, d->dataCategory,
         d->pixelFormat, d->pixelMapping, d->stride[0], d->stride[1], d->stride[2], d->stride[3]);
}

/* Bright bar (code 127, the int8 value of 1.0 at scale 1/127) on black: horizontal, vertical, diagonal,
 * anti-diagonal; written straight into the dla_hwc4 layout the descriptor describes. */
static void pack_bars(const cudlaModuleTensorDescriptor* d, uint8_t* buf) {
  memset(buf, 0, d->size);
  for (uint64_t n = 0; n < d->n; ++n)
    for (int i = 2; i < 14; ++i) {
      const int y[4] = {6, i, i, i}, x[4] = {i, 9, i, 15 - i};
      buf[n * d->stride[3] + (uint64_t)y[n % 4] * d->stride[1] + (uint64_t)x[n % 4] * d->stride[0]] = 127;
    }
}

static uint8_t* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *size = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t* data = malloc(*size);
  if (data && fread(data, 1, *size, f) != *size) {
    free(data);
    data = NULL;
  }
  fclose(f);
  return data;
}

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "examples/models/bars.loadable";
  /* 1. Read the loadable. */
  size_t size = 0;
  uint8_t* loadable = read_file(path, &size);
  if (!loadable) {
    fprintf(stderr, "cannot read %s\n", path);
    return 1;
  }
  /* 3. Create the device (hybrid mode). */
  cudlaDevHandle dev;
  CHECK(cudlaCreateDevice(0, &dev, CUDLA_CUDA_DLA), "cuDLA create device");
  printf("Device created successfully\n");
  /* 4. Load the module. */
  cudlaModule module;
  CHECK(cudlaModuleLoadFromMemory(dev, loadable, size, &module, 0), "cuDLA module load");
  printf("Successfully loaded module\n");
  free(loadable);
  /* 6. Tensor counts and descriptors. */
  cudlaModuleAttribute attr;
  CHECK(cudlaModuleGetAttributes(module, CUDLA_NUM_INPUT_TENSORS, &attr), "get numInputTensors");
  const uint32_t num_in = attr.numInputTensors;
  CHECK(cudlaModuleGetAttributes(module, CUDLA_NUM_OUTPUT_TENSORS, &attr), "get numOutputTensors");
  const uint32_t num_out = attr.numOutputTensors;
  printf("numInputTensors = %u\nnumOutputTensors = %u\n", num_in, num_out);
  cudlaModuleTensorDescriptor* in_desc = calloc(num_in, sizeof *in_desc);
  cudlaModuleTensorDescriptor* out_desc = calloc(num_out, sizeof *out_desc);
  attr.inputTensorDesc = in_desc;
  CHECK(cudlaModuleGetAttributes(module, CUDLA_INPUT_TENSOR_DESCRIPTORS, &attr), "get input descriptors");
  attr.outputTensorDesc = out_desc;
  CHECK(cudlaModuleGetAttributes(module, CUDLA_OUTPUT_TENSOR_DESCRIPTORS, &attr), "get output descriptors");
  printf("Input descriptor:\n");
  print_descriptor(&in_desc[0]);
  printf("Output descriptor:\n");
  print_descriptor(&out_desc[0]);
  /* 7-8. Buffers (32-byte aligned, as the DLA requires). */
  const size_t in_bytes = (in_desc[0].size + 31) / 32 * 32, out_bytes = (out_desc[0].size + 31) / 32 * 32;
  uint8_t* input = aligned_alloc(32, in_bytes);
  uint8_t* output = aligned_alloc(32, out_bytes);
  if (!input || !output) return 1;
  /* 9. Register them; tasks take the returned DLA pointers. */
  uint64_t *in_dla, *out_dla;
  CHECK(cudlaMemRegister(dev, (const uint64_t*)input, in_desc[0].size, &in_dla, 0), "register input");
  CHECK(cudlaMemRegister(dev, (const uint64_t*)output, out_desc[0].size, &out_dla, 0), "register output");
  printf("ALL MEMORY REGISTERED SUCCESSFULLY\n");
  /* 10. Input data; output cleared. */
  pack_bars(&in_desc[0], input);
  memset(output, 0, out_bytes);
  /* 11-12. One task: stream NULL runs it synchronously (there is no CUDA stream here). */
  cudlaTask task;
  memset(&task, 0, sizeof task);
  task.moduleHandle = module;
  task.outputTensor = &out_dla;
  task.numOutputTensors = 1;
  task.numInputTensors = 1;
  task.inputTensor = (const uint64_t* const*)&in_dla;
  CHECK(cudlaSubmitTask(dev, &task, 1, NULL, 0), "submit");
  printf("SUBMIT IS DONE !!!\n");
  CHECK(cudlaGetLastError(dev), "task execution");
  /* 13. Read the output: fp16 probabilities in chw16 (16 channels per 32-byte atom). */
  int failures = 0;
  const char* names[4] = {"horizontal", "vertical", "diagonal", "anti-diagonal"};
  for (uint64_t n = 0; n < out_desc[0].n; ++n) {
    int best = 0;
    float p[4], sum = 0;
    for (uint64_t c = 0; c < out_desc[0].c && c < 4; ++c) {
      uint16_t h;
      memcpy(&h, output + n * out_desc[0].stride[3] + c * 2, 2);
      p[c] = half_to_float(h);
      sum += p[c];
      if (p[c] > p[best]) best = (int)c;
    }
    printf("image %llu: %s (p = %.4f)\n", (unsigned long long)n, names[best], p[best]);
    if (best != (int)(n % 4) || p[best] < 0.5f || fabsf(sum - 1.f) > 0.01f) ++failures;
  }
  /* 14-16. Unregister, unload, destroy. */
  CHECK(cudlaMemUnregister(dev, in_dla), "unregister input");
  CHECK(cudlaMemUnregister(dev, out_dla), "unregister output");
  printf("ALL MEMORY UNREGISTERED SUCCESSFULLY\n");
  free(input);
  free(output);
  free(in_desc);
  free(out_desc);
  CHECK(cudlaModuleUnload(module, 0), "module unload");
  printf("Successfully unloaded module\n");
  CHECK(cudlaDestroyDevice(dev), "destroy device");
  printf("Device destroyed successfully\n");
  if (failures) {
    fprintf(stderr, "%d image(s) misclassified\n", failures);
    return 1;
  }
  printf("cuDLAHybridMode DONE !!!\n");
  return 0;
}
