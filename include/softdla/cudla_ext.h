/* softdla extensions to the cuDLA API, exported by softdla's libcudla.so.1 with the softdla prefix
 * (never by NVIDIA's). Layout of the layer-wise statistics buffer and its translation to CSV; see
 * docs/RUNTIME.md. */
#ifndef SOFTDLA_CUDLA_EXT_H
#define SOFTDLA_CUDLA_EXT_H
#include <stddef.h>
#include <stdint.h>

#include "../cudla.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SOFTDLA_STATS_MAGIC "SDLASTAT"
#define SOFTDLA_STATS_VERSION 1U
/* The clock of softdla's statistics counter: the recorded times are cycles of a 1000 MHz clock (1 ns each),
 * so cudlaExternalEtbl::etiTranslateStats (cudlaExternalEtbl.hpp) reports the measured times when given
 * this frequency and scales them by SOFTDLA_STATS_CLOCK_MHZ / freqMHz for any other. */
#define SOFTDLA_STATS_CLOCK_MHZ 1000U

/* The statistics buffer: a header, then one record per layer in execution order. */
typedef struct softdlaStatsHeader {
  char magic[8];          /* "SDLASTAT" */
  uint32_t version;       /* SOFTDLA_STATS_VERSION */
  uint32_t numLayers;     /* records that follow */
  uint64_t taskIndex;     /* tasks completed on this handle before this one */
  double taskMs;          /* wall time of the whole task */
} softdlaStatsHeader;     /* 32 bytes */

typedef struct softdlaStatsRecord {
  uint32_t layerIndex;    /* op index in the loadable */
  uint32_t reserved;
  double startMs;         /* from the start of the task */
  double endMs;
} softdlaStatsRecord;     /* 24 bytes */

/* The INT8 scale of I/O tensor `index` (real = q * scale); 1.0 for FP16/FP32 tensors. cuDLA's descriptors
 * carry no scales; softdla's loadables do. */
cudlaStatus softdlaModuleGetTensorScale(cudlaModule const hModule, int const isOutput, uint32_t const index,
                                        float* const scale);

/* The whole name of I/O tensor `index`, NUL-terminated, into name: cuDLA's descriptors keep at most
 * CUDLA_RUNTIME_TENSOR_DESC_NAME_MAX_LEN bytes of it (exporters write longer scoped names). When name is
 * NULL or *nameSize is too small, stores the size needed (with the NUL) in *nameSize and returns
 * cudlaErrorInvalidParam for a too-small buffer, cudlaSuccess for a NULL one. */
cudlaStatus softdlaModuleGetTensorName(cudlaModule const hModule, int const isOutput, uint32_t const index,
                                       char* const name, size_t* const nameSize);

/* Writes "layer_name,start_ms,end_ms\n" plus one line per layer into csv (NUL-terminated). When csv is
 * NULL or *csvSize is too small, stores the size needed (with the NUL) in *csvSize and returns
 * cudlaErrorInvalidParam for a too-small buffer, cudlaSuccess for a NULL one. */
cudlaStatus softdlaTranslateStatistics(cudlaModule const hModule, const void* const buffer, size_t const size,
                                       char* const csv, size_t* const csvSize);

#ifdef __cplusplus
}

#include <string>

namespace softdla {
/* C++ convenience: the CSV text of a statistics buffer, or an empty string on error. */
inline std::string task_statistics_csv(cudlaModule module, const void* buffer, size_t size) {
  size_t need = 0;
  if (softdlaTranslateStatistics(module, buffer, size, nullptr, &need) != cudlaSuccess) return {};
  std::string csv(need, '\0');
  if (softdlaTranslateStatistics(module, buffer, size, csv.data(), &need) != cudlaSuccess) return {};
  csv.resize(need - 1);
  return csv;
}
}  // namespace softdla
#endif

#endif
