// Parsing of trtexec-style option values, and the progress bar of long builds.
#include <algorithm>
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

std::map<std::string, std::vector<int64_t>> parse_shapes(const std::string& spec) {
  // trtexec: name:1x3x224x224[,name2:...]
  std::map<std::string, std::vector<int64_t>> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos) throw Error("--shapes takes name:1x3x224x224, got '" + item + "'");
    std::vector<int64_t> dims;
    std::stringstream ds(item.substr(colon + 1));
    std::string d;
    while (std::getline(ds, d, 'x')) dims.push_back(std::stoll(d));
    std::string name = item.substr(0, colon);
    if (name.size() >= 2 && (name.front() == '\'' || name.front() == '"')) name = name.substr(1, name.size() - 2);
    out[name] = dims;
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
  const int width = 30, filled = total ? int(width * done / total) : width;
  std::cerr << "\r" << std::left << std::setw(28) << stage << " [" << std::string(size_t(filled), '#')
            << std::string(size_t(width - filled), ' ') << "] " << done << "/" << total << std::flush;
  if (done == total) std::cerr << "\n";
  last = stage;
}


}  // namespace softdla::cli
