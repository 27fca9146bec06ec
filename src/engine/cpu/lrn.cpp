// Local response normalization across channels (float only; the DLA runs INT8 LRN in FP16):
// y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta.
#include <cmath>
#include <vector>

#include "element.h"
#include "kernels.h"
#include "thread_pool.h"

namespace softdla::cpu {
namespace {

class LrnKernel final : public OpKernel {
 public:
  LrnKernel(const Model& m, const Op& op, const LrnParams& p)
      : p_(p), dtype_(m.tensors[op.outputs[0]].dtype), s_(m.tensors[op.outputs[0]].shape) {}

  void run(const OpIo& io, ThreadPool& pool) const override {
    with_float_storage(dtype_, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* x = static_cast<const T*>(io.inputs[0]);
      T* y = static_cast<T*>(io.output);
      const size_t C = s_[1], hw = size_t(s_[2]) * s_[3];
      const int64_t before = (p_.size - 1) / 2, after = p_.size - 1 - before;
      pool.parallel_for(size_t(s_[0]) * C, [&](size_t b, size_t e) {
        std::vector<float> sq(hw);
        for (size_t nc = b; nc < e; ++nc) {
          const size_t n = nc / C;
          const int64_t c = int64_t(nc % C);
          std::fill(sq.begin(), sq.end(), 0.f);
          for (int64_t j = std::max<int64_t>(0, c - before); j <= std::min<int64_t>(C - 1, c + after); ++j) {
            const T* plane = x + (n * C + size_t(j)) * hw;
            for (size_t i = 0; i < hw; ++i) {
              const float v = load(plane, i);
              sq[i] += v * v;
            }
          }
          for (size_t i = 0; i < hw; ++i) {
            const float v = load(x, nc * hw + i);
            store(y, nc * hw + i, v / std::pow(p_.bias + p_.alpha / float(p_.size) * sq[i], p_.beta));
          }
        }
      }, ThreadPool::min_items(hw * p_.size));
    });
  }

 private:
  LrnParams p_;
  DataType dtype_;
  Shape s_;
};

}  // namespace

std::unique_ptr<OpKernel> make_lrn(const Model& m, const Op& op, const LrnParams& p) {
  return std::make_unique<LrnKernel>(m, op, p);
}

}  // namespace softdla::cpu
