// The SDP (post-processing) stage an op of the lowered model carries: a Conv's or Deconv's fused stage,
// or a standalone SDP op itself; null for every other op.
#pragma once
#include <type_traits>
#include <variant>

#include "model.h"

namespace softdla::builder {

template <class Params>  // OpParams or const OpParams
auto* sdp_stage(Params& p) {
  using Sdp = std::conditional_t<std::is_const_v<Params>, const SdpParams, SdpParams>;
  if (auto* c = std::get_if<ConvParams>(&p)) return static_cast<Sdp*>(&c->post);
  if (auto* d = std::get_if<DeconvParams>(&p)) return static_cast<Sdp*>(&d->post);
  return static_cast<Sdp*>(std::get_if<SdpParams>(&p));
}

}  // namespace softdla::builder
