// Per-element ops that are not part of the SDP chain: unary abs, reduce max, precision conversion.
#include <algorithm>
#include <cmath>
#include <limits>

#include "element.h"
#include "kernels.h"
#include "numerics.h"
#include "thread_pool.h"

namespace softdla::cpu {
namespace {

class AbsKernel final : public OpKernel {
 public:
  AbsKernel(const Model& m, const Op& op)
      : dtype_(m.tensors[op.outputs[0]].dtype), count_(element_count(m.tensors[op.outputs[0]].shape)) {}
  void run(const OpIo& io, ThreadPool&) const override {
    if (dtype_ == DataType::kInt8) {
      const int8_t* x = static_cast<const int8_t*>(io.inputs[0]);
      int8_t* y = static_cast<int8_t*>(io.output);
      for (size_t i = 0; i < count_; ++i) y[i] = num::sat8(std::abs(int64_t(x[i])));  // |-128| -> 127
      return;
    }
    with_float_storage(dtype_, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      for (size_t i = 0; i < count_; ++i)
        store(static_cast<T*>(io.output), i, std::fabs(load(static_cast<const T*>(io.inputs[0]), i)));
    });
  }

 private:
  DataType dtype_;
  size_t count_;
};

class ReduceMaxKernel final : public OpKernel {
 public:
  ReduceMaxKernel(const Model& m, const Op& op)
      : dtype_(m.tensors[op.outputs[0]].dtype), in_(m.tensors[op.inputs[0]].shape),
        out_(m.tensors[op.outputs[0]].shape) {}
  void run(const OpIo& io, ThreadPool&) const override {
    if (dtype_ == DataType::kInt8) return reduce(static_cast<const int8_t*>(io.inputs[0]), static_cast<int8_t*>(io.output));
    with_float_storage(dtype_, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      reduce(static_cast<const T*>(io.inputs[0]), static_cast<T*>(io.output));
    });
  }

 private:
  template <class T>
  void reduce(const T* x, T* y) const {
    const size_t total = element_count(out_);
    std::vector<float> best(total, -std::numeric_limits<float>::infinity());
    std::vector<int8_t> best8(total, -128);
    std::vector<bool> nan(total, false);
    for (size_t n = 0; n < in_[0]; ++n)
      for (size_t c = 0; c < in_[1]; ++c)
        for (size_t h = 0; h < in_[2]; ++h)
          for (size_t w = 0; w < in_[3]; ++w) {
            const size_t i = ((n * in_[1] + c) * in_[2] + h) * in_[3] + w;
            const size_t o = ((n * out_[1] + (out_[1] == 1 ? 0 : c)) * out_[2] + (out_[2] == 1 ? 0 : h)) * out_[3] +
                             (out_[3] == 1 ? 0 : w);
            if constexpr (std::is_same_v<T, int8_t>) {
              best8[o] = std::max(best8[o], x[i]);
            } else {
              const float v = load(x, i);
              if (std::isnan(v)) nan[o] = true;
              else best[o] = std::max(best[o], v);
            }
          }
    for (size_t o = 0; o < total; ++o) {
      if constexpr (std::is_same_v<T, int8_t>) y[o] = best8[o];
      else store(y, o, nan[o] ? std::numeric_limits<float>::quiet_NaN() : best[o]);
    }
  }

  DataType dtype_;
  Shape in_, out_;
};

// Precision conversion: int8 -> float is q * scale (fp32 product); float -> int8 is
// quantize(x / scale) with the fp32 quotient; float <-> float rounds to the target type.
class ConvertKernel final : public OpKernel {
 public:
  ConvertKernel(const Model& m, const Op& op)
      : from_(m.tensors[op.inputs[0]]), to_(m.tensors[op.outputs[0]]), count_(element_count(to_.shape)) {}
  void run(const OpIo& io, ThreadPool&) const override {
    for (size_t i = 0; i < count_; ++i) write(i, read(io.inputs[0], i), io.output);
  }

 private:
  float read(const void* p, size_t i) const {
    switch (from_.dtype) {
      case DataType::kInt8: return float(static_cast<const int8_t*>(p)[i]) * from_.scale;
      case DataType::kFloat16: return load(static_cast<const uint16_t*>(p), i);
      default: return load(static_cast<const float*>(p), i);
    }
  }
  void write(size_t i, float v, void* p) const {
    switch (to_.dtype) {
      case DataType::kInt8: static_cast<int8_t*>(p)[i] = num::quantize(v / to_.scale); break;
      case DataType::kFloat16: store(static_cast<uint16_t*>(p), i, v); break;
      default: store(static_cast<float*>(p), i, v); break;
    }
  }
  Tensor from_, to_;
  size_t count_;
};

}  // namespace

std::unique_ptr<OpKernel> make_unary(const Model& m, const Op& op, const UnaryParams&) {
  return std::make_unique<AbsKernel>(m, op);
}
std::unique_ptr<OpKernel> make_reduce_max(const Model& m, const Op& op, const ReduceMaxParams&) {
  return std::make_unique<ReduceMaxKernel>(m, op);
}
std::unique_ptr<OpKernel> make_convert(const Model& m, const Op& op) {
  return std::make_unique<ConvertKernel>(m, op);
}

}  // namespace softdla::cpu
