/* Internal C entry points of the softdla engine: load a loadable and run it on host buffers.
 * Used by the Python test-suite (ctypes) and tools. The public API is cudla.h; this one exists so the
 * engine can be exercised without a cuDLA device. Every function returns 0 on success, or a non-zero
 * status with a message in err (NUL-terminated, truncated to errlen). No exception leaves these. */
#ifndef SOFTDLA_ENGINE_C_H
#define SOFTDLA_ENGINE_C_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct softdla_engine softdla_engine;

/* Verifies and loads a loadable (the buffer may be freed afterwards). */
int softdla_engine_load(const uint8_t* data, size_t size, softdla_engine** out, char* err, size_t errlen);
void softdla_engine_free(softdla_engine* engine);
uint32_t softdla_engine_num_inputs(const softdla_engine* engine);
uint32_t softdla_engine_num_outputs(const softdla_engine* engine);
/* Bytes of input/output i in its bound format (the descriptor's size field), 0 if i is out of range. */
uint64_t softdla_engine_io_size(const softdla_engine* engine, int is_output, uint32_t i);
/* What the engine needs to pack/unpack I/O tensor i: logical NCHW, type (0 fp32, 1 fp16, 2 int8),
 * format (0 linear, 1 dla_linear, 2 dla_hwc4, 3 chw16, 4 chw32), INT8 scale, target (0 orin, 1 xavier). */
typedef struct softdla_io_info {
  char name[256];
  uint32_t n, c, h, w;
  uint32_t dtype, format, target;
  float scale;
  uint64_t size;
} softdla_io_info;
int softdla_engine_io_info(const softdla_engine* engine, int is_output, uint32_t i, softdla_io_info* info);

/* 1 when the CUDA backend (libsoftdla_cuda.so next to this library, a driver and a GPU) is usable;
 * `why` receives the device description or the reason it is not. */
int softdla_gpu_available(char* why, size_t len);
/* The CPU backend's INT8 instruction-set path in use and the best this CPU has, e.g.
 * "avx512vnni (detected: avx512vnni)"; SOFTDLA_CPU_ISA forces a path (docs/PERFORMANCE.md). */
const char* softdla_engine_cpu_isa(void);
/* Prepares the engine on the GPU; later softdla_engine_run calls copy the host buffers to the device,
 * run the CUDA backend and copy the outputs back. Call it before anything that runs the engine: an
 * engine is prepared on one backend only (the CPU backend, at first need, when this is not called). */
int softdla_engine_use_gpu(softdla_engine* engine, char* err, size_t errlen);

/* 1 when the CPU backend runs op i inside op i - 1's kernel (a convolution and the residual add after
 * it, fused; docs/NUMERICS.md), 0 when op i runs on its own or i is out of range. An engine prepared on
 * the GPU (softdla_engine_use_gpu) answers 0. */
int softdla_engine_op_fused(const softdla_engine* engine, uint32_t op);

/* Runs once. inputs/outputs hold one buffer per I/O tensor, each io_size bytes. */
int softdla_engine_run(softdla_engine* engine, const void* const* inputs, void* const* outputs, char* err,
                       size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
