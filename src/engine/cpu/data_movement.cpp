// Ops that only move bytes: concat along C, slice, and shuffle (transpose then reshape).
// Exact in every precision (INT8 inputs share the output's scale, checked at load).
#include <cstring>

#include "kernels.h"
#include "thread_pool.h"

namespace softdla::cpu {
namespace {

class ConcatKernel final : public OpKernel {
 public:
  ConcatKernel(const Model& m, const Op& op) : elem_(element_size(m.tensors[op.outputs[0]].dtype)) {
    for (uint32_t t : op.inputs) shapes_.push_back(m.tensors[t].shape);
  }
  void run(const OpIo& io, ThreadPool&) const override {
    const size_t N = shapes_[0][0], hw = size_t(shapes_[0][2]) * shapes_[0][3];
    size_t total_c = 0;
    for (const Shape& s : shapes_) total_c += s[1];
    uint8_t* y = static_cast<uint8_t*>(io.output);
    for (size_t n = 0; n < N; ++n) {
      size_t c0 = 0;
      for (size_t i = 0; i < shapes_.size(); ++i) {
        const size_t bytes = shapes_[i][1] * hw * elem_;
        std::memcpy(y + (n * total_c + c0) * hw * elem_,
                    static_cast<const uint8_t*>(io.inputs[i]) + n * bytes, bytes);
        c0 += shapes_[i][1];
      }
    }
  }

 private:
  size_t elem_;
  std::vector<Shape> shapes_;
};

class SliceKernel final : public OpKernel {
 public:
  SliceKernel(const Model& m, const Op& op, const SliceParams& p)
      : start_(p.start), in_(m.tensors[op.inputs[0]].shape), out_(m.tensors[op.outputs[0]].shape),
        elem_(element_size(m.tensors[op.outputs[0]].dtype)) {}
  void run(const OpIo& io, ThreadPool&) const override {
    const uint8_t* x = static_cast<const uint8_t*>(io.inputs[0]);
    uint8_t* y = static_cast<uint8_t*>(io.output);
    const size_t row = out_[3] * elem_;
    for (size_t n = 0; n < out_[0]; ++n)
      for (size_t c = 0; c < out_[1]; ++c)
        for (size_t h = 0; h < out_[2]; ++h) {
          const size_t src = ((n * in_[1] + c + start_[1]) * in_[2] + h + start_[2]) * in_[3] + start_[3];
          const size_t dst = ((n * out_[1] + c) * out_[2] + h) * out_[3];
          std::memcpy(y + dst * elem_, x + src * elem_, row);
        }
  }

 private:
  Shape start_, in_, out_;
  size_t elem_;
};

class ShuffleKernel final : public OpKernel {
 public:
  ShuffleKernel(const Model& m, const Op& op, const ShuffleParams& p)
      : perm_(p.perm), in_(m.tensors[op.inputs[0]].shape), elem_(element_size(m.tensors[op.outputs[0]].dtype)) {}
  void run(const OpIo& io, ThreadPool&) const override {
    // Output of the transpose has dims in_[perm[i]]; its linear order is also the reshaped output's.
    std::array<size_t, 4> in_stride{};
    in_stride[3] = 1;
    for (int a = 2; a >= 0; --a) in_stride[a] = in_stride[a + 1] * in_[a + 1];
    std::array<size_t, 4> td{}, ts{};
    for (int a = 0; a < 4; ++a) td[a] = in_[perm_[a]], ts[a] = in_stride[perm_[a]];
    const uint8_t* x = static_cast<const uint8_t*>(io.inputs[0]);
    uint8_t* y = static_cast<uint8_t*>(io.output);
    size_t o = 0;
    for (size_t i0 = 0; i0 < td[0]; ++i0)
      for (size_t i1 = 0; i1 < td[1]; ++i1)
        for (size_t i2 = 0; i2 < td[2]; ++i2)
          for (size_t i3 = 0; i3 < td[3]; ++i3, ++o)
            std::memcpy(y + o * elem_, x + (i0 * ts[0] + i1 * ts[1] + i2 * ts[2] + i3 * ts[3]) * elem_, elem_);
  }

 private:
  std::array<uint32_t, 4> perm_;
  Shape in_;
  size_t elem_;
};

}  // namespace

std::unique_ptr<OpKernel> make_concat(const Model& m, const Op& op) {
  return std::make_unique<ConcatKernel>(m, op);
}
std::unique_ptr<OpKernel> make_slice(const Model& m, const Op& op, const SliceParams& p) {
  return std::make_unique<SliceKernel>(m, op, p);
}
std::unique_ptr<OpKernel> make_shuffle(const Model& m, const Op& op, const ShuffleParams& p) {
  return std::make_unique<ShuffleKernel>(m, op, p);
}

}  // namespace softdla::cpu
