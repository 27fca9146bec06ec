// Parsing of trtexec-style option values, and the progress bar of long builds.
#include <algorithm>
#include <charconv>
#include <limits>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>

#include "commands.h"
#include "engine.h"
#include "error.h"
#include "io_convert.h"
#include "io_layout.h"
#include "loadable.h"
#include "npy.h"
#include "numerics.h"

namespace softdla::cli {

namespace {
// A whole number in [min, max] written in full (no sign games, no trailing text, no overflow), or the
// reason it is not one.
std::string whole_number_error(const std::string& text, int64_t min, int64_t max, int64_t& value) {
  const char* const end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != end) return "'" + text + "' is not a whole number";
  if (ec == std::errc::result_out_of_range || value < min || value > max)
    return "'" + text + "' is out of range (" + std::to_string(min) + " to " + std::to_string(max) + ")";
  return {};
}
}  // namespace

std::string check_whole_number(const std::string& text, int64_t min, int64_t max) {
  int64_t value;
  return whole_number_error(text, min, max, value);
}

std::string check_finite_number(const std::string& text, double min, double max) {
  double value;
  const char* const end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) return "'" + text + "' is not a number";
  std::ostringstream range;
  range << min << " to " << max;
  if (value < min || value > max) return "'" + text + "' is out of range (" + range.str() + ")";
  return {};
}

std::map<std::string, std::vector<int64_t>> parse_shapes(const std::string& flag, const std::string& spec) {
  // trtexec: name:1x3x224x224[,name2:...]
  const auto bad = [&](const std::string& item, const std::string& why) {
    fail(flag, " takes name:DIMxDIMx...[,name:...] with whole-number dimensions >= 1, e.g. input:1x3x224x224; in '",
         item, "' ", why);
  };
  std::map<std::string, std::vector<int64_t>> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos) bad(item, "there is no ':' between the name and the dimensions");
    std::string name = item.substr(0, colon);
    if (name.size() >= 2 && (name.front() == '\'' || name.front() == '"') && name.back() == name.front())
      name = name.substr(1, name.size() - 2);
    if (name.empty()) bad(item, "the input name is empty");
    if (out.count(name)) bad(item, "'" + name + "' is given twice");
    std::vector<int64_t> dims;
    const std::string text = item.substr(colon + 1);
    size_t at = 0;
    while (true) {  // unlike getline, keeps an empty last field ("1x3x") so it is reported
      const size_t x = text.find('x', at);
      int64_t d;
      const std::string why = whole_number_error(text.substr(at, x == std::string::npos ? x : x - at), 1,
                                                 std::numeric_limits<int32_t>::max(), d);
      if (!why.empty()) bad(item, "dimension " + std::to_string(dims.size()) + ": " + why);
      dims.push_back(d);
      if (x == std::string::npos) break;
      at = x + 1;
    }
    out[name] = dims;
  }
  return out;
}

std::map<std::string, std::vector<int64_t>> static_shapes(const std::string& shapes, const std::string& min,
                                                          const std::string& opt, const std::string& max) {
  std::map<std::string, std::vector<int64_t>> out = parse_shapes("--shapes", shapes);
  std::map<std::string, std::string> given_by;  // the flag that gave each input its shape
  for (const auto& [name, dims] : out) given_by[name] = "--shapes";
  const std::pair<const char*, const std::string*> profile[] = {{"--minShapes", &min}, {"--optShapes", &opt}, {"--maxShapes", &max}};
  for (const auto& [flag, spec] : profile)
    for (const auto& [name, dims] : parse_shapes(flag, *spec)) {
      auto [it, fresh] = out.emplace(name, dims);
      if (!fresh && it->second != dims) {
        auto text = [](const std::vector<int64_t>& d) {
          std::string t;
          for (size_t k = 0; k < d.size(); ++k) {
            if (k) t += 'x';
            t += std::to_string(d[k]);
          }
          return t;
        };
        fail(flag, " gives input '", name, "' ", text(dims), " and ", given_by[name], " ", text(it->second),
             ": the DLA runs static shapes only (TensorRT requires min = opt = max for DLA); give one shape");
      }
      given_by.emplace(name, flag);
    }
  return out;
}

std::map<std::string, std::string> parse_load_inputs(const std::string& spec) {
  std::map<std::string, std::string> out;
  if (spec.empty()) return out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::string name, file;
    if (!item.empty() && item.front() == '\'') {  // 'name:with:colons':file
      const size_t close = item.find('\'', 1);
      if (close == std::string::npos || close + 1 >= item.size() || item[close + 1] != ':')
        fail("--loadInputs: '", item, "' opens a quoted name without closing it before ':file'");
      name = item.substr(1, close - 1), file = item.substr(close + 2);
    } else {
      const size_t colon = item.find(':');
      if (colon == std::string::npos) fail("--loadInputs takes name:file[,...], got '", item, "'");
      name = item.substr(0, colon), file = item.substr(colon + 1);
    }
    if (name.empty() || file.empty()) fail("--loadInputs: '", item, "' has an empty name or file");
    if (!out.emplace(name, file).second) fail("--loadInputs names '", name, "' twice: give each input once");
  }
  return out;
}

std::map<std::string, std::string> parse_layer_precisions(const std::string& spec) {
  std::map<std::string, std::string> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos) throw Error("--layerPrecisions takes layer:precision, got '" + item + "'");
    std::string name = item.substr(0, colon);
    if (name.size() >= 2 && (name.front() == '\'' || name.front() == '"')) name = name.substr(1, name.size() - 2);
    out[name] = item.substr(colon + 1);
  }
  return out;
}

void progress_bar(const std::string& stage, size_t done, size_t total) {
  static std::string last;
  // A stage that reports more steps than it announced must not underflow the padding (a crash).
  const int width = 30, filled = total ? int(width * std::min(done, total) / total) : width;
  std::cerr << "\r" << std::left << std::setw(28) << stage << " [" << std::string(size_t(filled), '#')
            << std::string(size_t(width - filled), ' ') << "] " << done << "/" << total << std::flush;
  if (done == total) std::cerr << "\n";
  last = stage;
}


}  // namespace softdla::cli
