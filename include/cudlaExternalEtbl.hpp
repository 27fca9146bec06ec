/*
 * cudlaExternalEtbl.hpp - cuDLA's export table for layer-wise statistics, as implemented by softdla's
 * libcudla.so.1.
 *
 * NVIDIA ships a header of this name with CUDA on Tegra but does not publish it; its layer-wise statistics
 * samples (cuDLALayerwiseStatsHybrid, cuDLALayerwiseStatsStandalone) use it like this:
 *
 *   const cudlaExternalEtbl* etbl = NULL;
 *   cudlaGetExternalExportTable(&etbl, 0);
 *   cudlaTranslateCsvAttribute attr;
 *   etbl->etiTranslateStats(dev, statsBuffer, freqMHz, index, CUDLA_GET_CSV_LENGTH, &attr);
 *   attr.csvStreamStats = malloc(attr.csvStreamLength);
 *   etbl->etiTranslateStats(dev, statsBuffer, freqMHz, index, CUDLA_GET_CSV_STATS, &attr);
 *
 * The names here are the ones those samples use; everything they do not show (the enumerator values, the
 * table's `size` member, the attribute being a struct, the exact parameter types) is softdla's choice,
 * written down in docs/RUNTIME.md ("The export table"), together with the CSV columns and every status.
 * Programs written like NVIDIA's samples compile against this header unchanged; the header is valid C too.
 */
#ifndef CUDLA_EXTERNAL_ETBL_HPP
#define CUDLA_EXTERNAL_ETBL_HPP

#include <stddef.h>
#include <stdint.h>

#include "cudla.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What etiTranslateStats does. */
enum cudlaTranslateCsvAttributeType {
  CUDLA_GET_CSV_LENGTH = 0, /* store the bytes the CSV text needs, its terminating NUL included */
  CUDLA_GET_CSV_STATS = 1   /* write the CSV text and its NUL into csvStreamStats */
};
typedef enum cudlaTranslateCsvAttributeType cudlaTranslateCsvAttributeType;

/* In and out of etiTranslateStats. A struct (not a union): CUDLA_GET_CSV_STATS reads csvStreamLength as the
 * capacity of csvStreamStats, so the length the first call stored must still be there. */
typedef struct cudlaTranslateCsvAttribute_t {
  uint64_t csvStreamLength; /* bytes: set by CUDLA_GET_CSV_LENGTH, capacity for CUDLA_GET_CSV_STATS */
  void* csvStreamStats;     /* the caller's buffer for CUDLA_GET_CSV_STATS */
} cudlaTranslateCsvAttribute;

typedef struct cudlaExternalEtbl_t {
  size_t size; /* sizeof(cudlaExternalEtbl) of the library; entries are only ever appended */
  /* Translates statistics buffer `statsIndex` (its host copy) written by a task of the module loaded on
   * devHandle into layer-wise CSV, converting the recorded cycles to ms at the DLA clock `dlaFreqInMHz`. */
  cudlaStatus (*etiTranslateStats)(cudlaDevHandle devHandle, const void* statsBuffer, uint32_t dlaFreqInMHz,
                                   uint32_t statsIndex, cudlaTranslateCsvAttributeType type,
                                   cudlaTranslateCsvAttribute* attribute);
} cudlaExternalEtbl;

/* Stores the library's export table in *etbl. flags must be 0. */
cudlaStatus cudlaGetExternalExportTable(const cudlaExternalEtbl** etbl, uint32_t flags);

#ifdef __cplusplus
}
#endif

#endif
