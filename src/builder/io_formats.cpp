#include "io_formats.h"

#include <sstream>

#include "error.h"

namespace softdla::builder {

std::vector<IoChoice> parse_io_formats(const std::string& spec) {
  std::vector<IoChoice> out;
  if (spec.empty()) return out;
  // getline drops a trailing empty item: "int8:dla_hwc4," would read as one format for every tensor.
  if (spec.back() == ',') fail("I/O formats '", spec, "' end with ',': give one type:format per tensor, or one for all");
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) fail("I/O format '", item, "' must be type:format, e.g. int8:chw32");
    const std::string type = item.substr(0, colon), fmts = item.substr(colon + 1);
    IoFormat f{};
    if (type == "fp16") f.dtype = DataType::kFloat16;
    else if (type == "int8") f.dtype = DataType::kInt8;
    else if (type == "fp32") f.dtype = DataType::kFloat32;
    else fail("I/O type '", type, "' is not a DLA type (fp16 or int8; fp32 is softdla's linear-only reference)");
    // trtexec allows alternatives joined with '+': each one is checked here, and the first one the DLA
    // accepts for its tensor is used (choose_standalone_format).
    IoChoice choice;
    std::stringstream alternatives(fmts);
    std::string fmt;
    while (std::getline(alternatives, fmt, '+')) {
      if (fmt == "chw" || fmt == "linear") f.format = TensorFormat::kLinear;
      else if (fmt == "dla_linear") f.format = TensorFormat::kDlaLinear;
      else if (fmt == "dla_hwc4" || fmt == "chw4" || fmt == "hwc4") f.format = TensorFormat::kDlaHwc4;
      else if (fmt == "chw16") f.format = TensorFormat::kChw16;
      else if (fmt == "chw32") f.format = TensorFormat::kChw32;
      else if (fmt.empty()) fail("I/O format '", item, "' has an empty format (a '+' with nothing on one side)");
      else fail("I/O format '", fmt, "' is not a DLA format (dla_linear, dla_hwc4, chw16, chw32)");
      choice.push_back(f);
    }
    if (choice.empty() || fmts.back() == '+')
      fail("I/O format '", item, "' has an empty format (a '+' with nothing on one side)");
    out.push_back(choice);
  }
  return out;
}

IoFormat choose_standalone_format(const IoChoice& choice, bool is_input, const std::string& tensor, uint32_t channels,
                                  const std::function<std::string(const IoFormat&)>& also) {
  auto problem = [&](const IoFormat& f) {
    std::string why = standalone_format_problem(f, is_input, tensor, channels);
    return why.empty() && also ? also(f) : why;
  };
  for (const IoFormat& f : choice)
    if (problem(f).empty()) return f;
  std::string why = problem(choice.front());
  if (choice.size() > 1) why += " (none of the " + std::to_string(choice.size()) + " alternatives given is)";
  fail(why);
}

std::string standalone_format_problem(const IoFormat& f, bool is_input, const std::string& tensor, uint32_t channels) {
  const bool ok = f.dtype == DataType::kInt8
                      ? (f.format == TensorFormat::kDlaLinear || f.format == TensorFormat::kChw32 ||
                         (is_input && f.format == TensorFormat::kDlaHwc4))
                      : f.dtype == DataType::kFloat16 &&
                            (f.format == TensorFormat::kDlaLinear || f.format == TensorFormat::kChw16 ||
                             (is_input && f.format == TensorFormat::kDlaHwc4));
  const std::string which = std::string(is_input ? "input '" : "output '") + tensor + "': ";
  if (!ok)
    return which + to_string(f) +
           " is not allowed for a DLA standalone loadable: I/O formats for safe DLA capability are restricted to "
           "fp16/int8:dla_linear, fp16/int8:hwc4 (inputs only), fp16:chw16 or int8:chw32";
  if (f.format == TensorFormat::kDlaHwc4 && channels != 1 && channels != 3 && channels != 4)
    return which + "dla_hwc4 holds 1, 3 or 4 channels and this tensor has " + std::to_string(channels) +
           "; use dla_linear, or chw16 (fp16) / chw32 (int8)";
  return "";
}

std::string to_string(const IoFormat& f) {
  return std::string(softdla::to_string(f.dtype)) + ":" + softdla::to_string(f.format);
}

}  // namespace softdla::builder
