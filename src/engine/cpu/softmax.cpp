// Softmax along C, H or W (float only, as on Orin's DLA): max-subtracted exp, fp32 sum.
#include <cmath>
#include <vector>

#include "element.h"
#include "kernels.h"
#include "thread_pool.h"

namespace softdla::cpu {
namespace {

class SoftmaxKernel final : public OpKernel {
 public:
  SoftmaxKernel(const Model& m, const Op& op, const SoftmaxParams& p)
      : axis_(p.axis), dtype_(m.tensors[op.outputs[0]].dtype), s_(m.tensors[op.outputs[0]].shape) {}

  void run(const OpIo& io, ThreadPool& pool) const override {
    // Index = outer * (len * inner) + i * inner + inner_index.
    size_t outer = 1, inner = 1;
    for (uint32_t a = 0; a < axis_; ++a) outer *= s_[a];
    for (uint32_t a = axis_ + 1; a < 4; ++a) inner *= s_[a];
    const size_t len = s_[axis_];
    with_float_storage(dtype_, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* x = static_cast<const T*>(io.inputs[0]);
      T* y = static_cast<T*>(io.output);
      pool.parallel_for(outer * inner, [&](size_t b, size_t e) {
        std::vector<float> v(len);
        for (size_t r = b; r < e; ++r) {
          const size_t base = (r / inner) * len * inner + r % inner;
          float mx = -INFINITY;
          for (size_t i = 0; i < len; ++i) {
            v[i] = load(x, base + i * inner);
            mx = std::max(mx, v[i]);
          }
          float sum = 0.f;
          for (size_t i = 0; i < len; ++i) sum += (v[i] = std::exp(v[i] - mx));
          for (size_t i = 0; i < len; ++i) store(y, base + i * inner, v[i] / sum);
        }
      }, ThreadPool::min_items(len * 3));
    });
  }

 private:
  uint32_t axis_;
  DataType dtype_;
  Shape s_;
};

}  // namespace

std::unique_ptr<OpKernel> make_softmax(const Model& m, const Op& op, const SoftmaxParams& p) {
  return std::make_unique<SoftmaxKernel>(m, op, p);
}

}  // namespace softdla::cpu
