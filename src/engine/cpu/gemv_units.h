// The work of a matrix-vector product over a batch (gemv_f32.h, gemv_s8_vnni.h): units of one block of
// output channels and one group of images that share each weight load, spread over the pool.
#pragma once
#include <algorithm>
#include <cstddef>

#include "thread_pool.h"

namespace softdla::cpu {

// Units (block of kBlock output channels, group of up to kImages images) of `images` images whose inputs
// are x_stride apart from xp and whose outputs (kp per image) go to yp: block(count, x, kb, y) with the
// group's count images' inputs x[i] and outputs y[i], for output channels [kb, kb + kBlock).
template <size_t kBlock, size_t kImages, class X, class Y, class Block>
void run_gemv_units(ThreadPool& pool, size_t kp, size_t images, const X* xp, size_t x_stride, Y* yp,
                    size_t min_items, const Block& block) {
  const size_t blocks = kp / kBlock, groups = (images + kImages - 1) / kImages;
  pool.parallel_for(blocks * groups, [&](size_t b, size_t e) {
    for (size_t u = b; u < e; ++u) {
      const size_t kb = (u % blocks) * kBlock, n0 = (u / blocks) * kImages, count = std::min(kImages, images - n0);
      const X* xi[kImages];
      Y* yi[kImages];
      for (size_t i = 0; i < count; ++i) xi[i] = xp + (n0 + i) * x_stride, yi[i] = yp + (n0 + i) * kp;
      block(count, xi, kb, yi);
    }
  }, min_items);
}

}  // namespace softdla::cpu
