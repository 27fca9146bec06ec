// Resize by integer factors: nearest (three coordinate rules) and bilinear (half-pixel). INT8
// bilinear is exact rational arithmetic with round half away (docs/NUMERICS.md §Resize).
#include <algorithm>
#include <vector>

#include "element.h"
#include "kernels.h"
#include "numerics.h"
#include "resize_rules.h"
#include "thread_pool.h"

namespace softdla::cpu {
namespace {

class ResizeKernel final : public OpKernel {
 public:
  ResizeKernel(const Model& m, const Op& op, const ResizeParams& p)
      : p_(p), dtype_(m.tensors[op.outputs[0]].dtype), in_(m.tensors[op.inputs[0]].shape),
        out_(m.tensors[op.outputs[0]].shape) {}

  void run(const OpIo& io, ThreadPool& pool) const override {
    pool.parallel_for(size_t(in_[0]) * in_[1], [&](size_t b, size_t e) {
      for (size_t pl = b; pl < e; ++pl) {
        if (dtype_ == DataType::kInt8)
          plane(static_cast<const int8_t*>(io.inputs[0]), static_cast<int8_t*>(io.output), pl);
        else
          with_float_storage(dtype_, [&](auto* tag) {
            using T = std::remove_pointer_t<decltype(tag)>;
            plane(static_cast<const T*>(io.inputs[0]), static_cast<T*>(io.output), pl);
          });
      }
    }, ThreadPool::min_items(size_t(out_[2]) * out_[3] * 4));
  }

 private:
  template <class T>
  void plane(const T* x, T* y, size_t pl) const {
    const int64_t H = in_[2], W = in_[3], OH = out_[2], OW = out_[3], sh = p_.scale_h, sw = p_.scale_w;
    x += pl * size_t(H * W);
    y += pl * size_t(OH * OW);
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const size_t o = size_t(oh * OW + ow);
        if (p_.mode == ResizeMode::kNearest) {
          const int64_t ih = nearest_source(oh, sh, H, p_.nearest), iw = nearest_source(ow, sw, W, p_.nearest);
          y[o] = x[ih * W + iw];
          continue;
        }
        const Taps th = bilinear_taps(oh, sh, H), tw = bilinear_taps(ow, sw, W);
        const int64_t dh = 2 * sh, dw = 2 * sw;
        const int64_t wy[2] = {dh - th.frac, th.frac}, wx[2] = {dw - tw.frac, tw.frac};
        const int64_t ys[2] = {th.x0, th.x1}, xs[2] = {tw.x0, tw.x1};
        if constexpr (std::is_same_v<T, int8_t>) {
          int64_t acc = 0;
          for (int a = 0; a < 2; ++a)
            for (int c = 0; c < 2; ++c) acc += wy[a] * wx[c] * x[ys[a] * W + xs[c]];
          y[o] = num::sat8(num::div_rhaz(acc, dh * dw));
        } else {
          float acc = 0.f;
          for (int a = 0; a < 2; ++a)
            for (int c = 0; c < 2; ++c)
              acc += float(wy[a] * wx[c]) / float(dh * dw) * load(x, size_t(ys[a] * W + xs[c]));
          store(y, o, acc);
        }
      }
  }

  ResizeParams p_;
  DataType dtype_;
  Shape in_, out_;
};

}  // namespace

std::unique_ptr<OpKernel> make_resize(const Model& m, const Op& op, const ResizeParams& p) {
  return std::make_unique<ResizeKernel>(m, op, p);
}

}  // namespace softdla::cpu
