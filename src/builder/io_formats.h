// trtexec's I/O format grammar (--inputIOFormats / --outputIOFormats): spec ::= type:fmt[+fmt][,spec].
// A single spec applies to every tensor; otherwise one per tensor in network order.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model.h"

namespace softdla::builder {

struct IoFormat {
  DataType dtype;
  TensorFormat format;
};

// One tensor's spec: its alternatives (trtexec's type:fmt+fmt), in the order given.
using IoChoice = std::vector<IoFormat>;

// Parses a spec list; Error on unknown types/formats, empty alternatives among them. Empty input -> empty
// list (use defaults).
std::vector<IoChoice> parse_io_formats(const std::string& spec);

// Why a format is not allowed for a DLA standalone loadable input (is_input) or output, in trtexec's
// words; empty where it is.
std::string standalone_format_problem(const IoFormat& f, bool is_input, const std::string& tensor, uint32_t channels);

// The first of a tensor's alternatives that the DLA accepts for it (trtexec's rule); Error with the first
// alternative's reason where none is.
// `also`: a further rule of the tensor's layers (a problem text, or empty where f suits them); an
// alternative it refuses is passed over as one the DLA refuses is.
IoFormat choose_standalone_format(const IoChoice& choice, bool is_input, const std::string& tensor, uint32_t channels,
                                  const std::function<std::string(const IoFormat&)>& also = {});

std::string to_string(const IoFormat& f);

}  // namespace softdla::builder
