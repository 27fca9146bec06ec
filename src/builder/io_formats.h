// trtexec's I/O format grammar (--inputIOFormats / --outputIOFormats): spec ::= type:fmt[+fmt][,spec].
// A single spec applies to every tensor; otherwise one per tensor in network order.
#pragma once
#include <string>
#include <vector>

#include "model.h"

namespace softdla::builder {

struct IoFormat {
  DataType dtype;
  TensorFormat format;
};

// Parses a spec list; Error on unknown types/formats. Empty input -> empty list (use defaults).
std::vector<IoFormat> parse_io_formats(const std::string& spec);

// Throws Error with trtexec's explanation when a format is not allowed for a DLA standalone loadable
// input (is_input) or output.
void check_standalone_format(const IoFormat& f, bool is_input, const std::string& tensor, uint32_t channels);

std::string to_string(const IoFormat& f);

}  // namespace softdla::builder
