// gpt_fixtures.h — reading tests/reference/fixtures/gpt/*.txt (format: that folder's README.md) and
// comparing float32 results with them bit for bit. A file is read as sections: each `case ...` line,
// and each of the GPT files' marker lines (init, step0, steps, final), starts one; what comes before the
// first marker is the "header" section. Tensor lines become tensors; every other line is kept as words.
#pragma once
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "test_helpers.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "/work/main"
#endif

namespace gpt_fixtures {

using autograd::Shape;
using autograd::Tensor;

inline const std::string kDir = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/gpt/";

using testing_helpers::Recorded;

using Words = std::vector<std::string>;

struct Section {
  std::string label;  // "header", "init", ..., or the words after `case`
  std::vector<Recorded> tensors;
  std::vector<Words> lines;  // the other lines, split into words

  const Recorded& get(const std::string& name) const {
    for (const Recorded& r : tensors)
      if (r.name == name) return r;
    throw std::runtime_error("fixture section '" + label + "' has no tensor '" + name + "'");
  }
  bool has(const std::string& name) const {
    for (const Recorded& r : tensors)
      if (r.name == name) return true;
    return false;
  }
  // The first line starting with `key`, or throws.
  const Words& line(const std::string& key) const {
    for (const Words& w : lines)
      if (!w.empty() && w[0] == key) return w;
    throw std::runtime_error("fixture section '" + label + "' has no line '" + key + "'");
  }
  // The word after `key` on the label (case lines are "name key value key value ...").
  std::string option(const std::string& key) const {
    std::istringstream words(label);
    for (std::string w; words >> w;)
      if (w == key && words >> w) return w;
    throw std::runtime_error("fixture case '" + label + "' has no option '" + key + "'");
  }
};

// (dir: another folder of fixtures in this format, such as fixtures/llama/)
inline std::vector<Section> read_sections(const std::string& file, const std::string& dir = kDir) {
  std::ifstream in(dir + file);
  if (!in) throw std::runtime_error("cannot open fixture " + dir + file);
  std::vector<Section> sections{{"header", {}, {}}};
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "case") {
      std::string rest;
      std::getline(words >> std::ws, rest);
      sections.push_back({rest, {}, {}});
    } else if (kind == "init" || kind == "step0" || kind == "steps" || kind == "final") {
      sections.push_back({kind, {}, {}});
    } else if (kind == "tensor" || kind == "itensor") {
      sections.back().tensors.push_back(testing_helpers::read_recorded(words, kind, line));
    } else {
      Words w{kind};
      for (std::string v; words >> v;) w.push_back(v);
      sections.back().lines.push_back(std::move(w));
    }
  }
  return sections;
}

inline const Section& find_section(const std::vector<Section>& sections, const std::string& label_prefix) {
  for (const Section& s : sections)
    if (s.label.rfind(label_prefix, 0) == 0) return s;
  throw std::runtime_error("no fixture section starting with '" + label_prefix + "'");
}

inline double hex(const std::string& word) { return std::strtod(word.c_str(), nullptr); }

// Bits of a float, with every NaN the same (PyTorch and glibc may differ in a NaN's payload only).
inline uint32_t bits(float v) { return std::isnan(v) ? 0x7fc00000u : std::bit_cast<uint32_t>(v); }

// How many elements of `got` (float32) differ in their bits from the recorded values; reports the first few.
inline int64_t count_bit_mismatches(const Tensor& got, const Recorded& want, const std::string& what) {
  EXPECT_EQ(autograd::shape_to_string(got.shape()), autograd::shape_to_string(want.shape)) << what;
  if (got.shape() != want.shape) return -1;
  std::vector<float> g = got.contiguous().to_vector<float>();
  int64_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const float w = float(want.values[i]);
    if (bits(g[i]) == bits(w)) continue;
    if (++bad <= 3)
      ADD_FAILURE() << what << ": element " << i << " is " << std::hexfloat << g[i] << ", PyTorch gives " << w
                    << std::defaultfloat;
  }
  return bad;
}

#define EXPECT_BITS(got, want, what) EXPECT_EQ(gpt_fixtures::count_bit_mismatches(got, want, what), 0) << (what)

// The float32 ulp distance between two finite values of one sign (or both zero).
inline int64_t ulps(float a, float b) {
  auto key = [](float v) {
    const int32_t i = std::bit_cast<int32_t>(v);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::llabs(key(a) - key(b));
}

}  // namespace gpt_fixtures
