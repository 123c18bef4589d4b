// test_svg.cpp — the standalone SVG pictures: well-formed XML (a small checker of our own, and xmllint
// when installed) holding the numbers they show; heatmap --svg and scratchgrad train --plot.
#include <gtest/gtest.h>

#include "test_process.h"
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "autograd/inspect/anomaly.h"
#include "plot/svg.h"
#include "test_helpers.h"

namespace {

using namespace autograd;
namespace fs = std::filesystem;

// ---------------------------------------------------------------- a small XML well-formedness checker

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

// "" when every '&' in `text` starts an entity XML knows, else the problem.
std::string entity_problem(const std::string& text) {
  static const std::regex entity("^&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);");
  for (size_t at = text.find('&'); at != std::string::npos; at = text.find('&', at + 1))
    if (!std::regex_search(text.substr(at, 12), entity)) return "bad entity at '" + text.substr(at, 12) + "'";
  return "";
}

bool name_char(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.'));
}

// "" when `x` is well-formed XML (elements, attributes, text, comments, an XML declaration), else what
// is wrong and where.
std::string xml_problem(const std::string& x) {
  if (!valid_utf8(x)) return "not UTF-8";
  size_t i = 0;
  std::vector<std::string> open;
  int roots = 0;
  auto at = [&](size_t p) { return " at offset " + std::to_string(p) + ": '" + x.substr(p, 30) + "'"; };
  auto space = [&] {
    while (i < x.size() && std::isspace(static_cast<unsigned char>(x[i]))) ++i;
  };
  auto name = [&] {
    size_t start = i;
    while (i < x.size() && name_char(x[i], i == start)) ++i;
    return x.substr(start, i - start);
  };
  if (x.starts_with("<?xml")) {
    i = x.find("?>");
    if (i == std::string::npos) return "unterminated XML declaration";
    i += 2;
  }
  while (i < x.size()) {
    if (x.compare(i, 4, "<!--") == 0) {
      size_t end = x.find("-->", i + 4);
      if (end == std::string::npos) return "unterminated comment" + at(i);
      i = end + 3;
    } else if (x.compare(i, 2, "</") == 0) {
      size_t start = i;
      i += 2;
      std::string n = name();
      space();
      if (i >= x.size() || x[i] != '>') return "bad end tag" + at(start);
      if (open.empty() || open.back() != n) return "end tag </" + n + "> does not close <" + (open.empty() ? "" : open.back()) + ">" + at(start);
      open.pop_back();
      ++i;
    } else if (x[i] == '<') {
      size_t start = i++;
      std::string n = name();
      if (n.empty()) return "bad tag name" + at(start);
      if (open.empty() && roots++ > 0) return "a second root element" + at(start);
      std::set<std::string> attributes;
      while (true) {
        size_t before = i;
        space();
        if (x.compare(i, 2, "/>") == 0) {
          i += 2;
          break;
        }
        if (i < x.size() && x[i] == '>') {
          open.push_back(n);
          ++i;
          break;
        }
        if (i == before) return "no space before an attribute" + at(i);
        std::string a = name();
        if (a.empty()) return "bad attribute" + at(i);
        if (!attributes.insert(a).second) return "attribute " + a + " twice" + at(start);
        space();
        if (i >= x.size() || x[i] != '=') return "attribute without =" + at(i);
        ++i;
        space();
        if (i >= x.size() || (x[i] != '"' && x[i] != '\'')) return "unquoted attribute value" + at(i);
        size_t end = x.find(x[i], i + 1);
        if (end == std::string::npos) return "unterminated attribute value" + at(i);
        std::string value = x.substr(i + 1, end - i - 1);
        if (value.find('<') != std::string::npos) return "'<' in an attribute value" + at(i);
        if (std::string p = entity_problem(value); !p.empty()) return p;
        i = end + 1;
      }
    } else {
      size_t end = std::min(x.find('<', i), x.size());
      std::string text = x.substr(i, end - i);
      if (open.empty() && text.find_first_not_of(" \t\r\n") != std::string::npos) return "text outside the root" + at(i);
      if (text.find('>') != std::string::npos && text.find("]]>") != std::string::npos) return "]]> in text" + at(i);
      if (std::string p = entity_problem(text); !p.empty()) return p;
      i = end;
    }
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  if (roots != 1) return "no root element";
  return "";
}

TEST(Svg, TheXmlCheckerCatchesMistakes) {
  EXPECT_EQ(xml_problem("<svg a=\"1\"><g><text>1 &lt; 2 &amp; 3</text></g><rect/></svg>\n"), "");
  EXPECT_EQ(xml_problem("<?xml version=\"1.0\"?>\n<!-- c --><a b='x'/>"), "");
  EXPECT_NE(xml_problem("<a><b></a></b>"), "");
  EXPECT_NE(xml_problem("<a>"), "");
  EXPECT_NE(xml_problem("<a x=1/>"), "");
  EXPECT_NE(xml_problem("<a x=\"1\" x=\"2\"/>"), "");
  EXPECT_NE(xml_problem("<a>fish & chips</a>"), "");
  EXPECT_NE(xml_problem("<a>x < y</a>"), "");
  EXPECT_NE(xml_problem("<a t=\"<b>\"/>"), "");
  EXPECT_NE(xml_problem("<a/><b/>"), "");
  EXPECT_NE(xml_problem("<a x=\"1\"y=\"2\"/>"), "");
  EXPECT_NE(xml_problem("<a>\xff</a>"), "");
}

// ---------------------------------------------------------------- helpers

using testing_process::scratch;
using testing_process::shell;
using testing_process::Shell;
using testing_process::slurp;

// Our checker always; xmllint as a second opinion when it is installed.
void expect_well_formed(const std::string& svg, const std::string& name) {
  EXPECT_EQ(xml_problem(svg), "") << svg.substr(0, 2000);
  EXPECT_TRUE(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  if (std::system("command -v xmllint >/dev/null 2>&1") != 0) return;
  fs::path file = scratch(name + ".svg");
  write_text_file(file.string(), svg);
  Shell r = shell("xmllint --noout " + file.string());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

std::vector<std::string> cell_texts(const std::string& svg) {
  static const std::regex cell(R"re(<rect [^>]*/><text [^>]*>([^<]*)</text></g>)re");
  std::vector<std::string> out;
  for (std::sregex_iterator it(svg.begin(), svg.end(), cell), end; it != end; ++it) out.push_back((*it)[1]);
  return out;
}

// ---------------------------------------------------------------- heatmap

TEST(Svg, HeatmapShowsLabelsValuesAndAScale) {
  std::vector<std::vector<double>> values = {{0.5, 0.25}, {0.125, 1.0}, {0.0, 0.75}};
  std::string svg = plot::svg::heatmap(values, {"<s>", "b & c", "d"}, {"x", "y\"z"},
                                 {.title = "weights", .row_title = "query", .column_title = "key", .lo = 0.0, .hi = 1.0});
  expect_well_formed(svg, "small");
  EXPECT_EQ(cell_texts(svg), (std::vector<std::string>{"0.50", "0.25", "0.12", "1.00", "0.00", "0.75"}));
  for (const char* part : {">&lt;s&gt;</text>", ">b &amp; c</text>", ">y&quot;z</text>", ">weights</text>",
                           ">query</text>", ">key</text>", "<title>b &amp; c → y&quot;z: 1</title>"})
    EXPECT_NE(svg.find(part), std::string::npos) << part;
  // colours: the lowest value gets the scale's first colour, the highest its last; the bar has ticks
  EXPECT_NE(svg.find("fill=\"" + plot::svg::viridis(0.0) + "\" stroke=\"white\"/><text"), std::string::npos);
  EXPECT_NE(svg.find("fill=\"" + plot::svg::viridis(1.0) + "\" stroke=\"white\"/><text"), std::string::npos);
  EXPECT_EQ(plot::svg::viridis(0.0), "#440154");
  EXPECT_EQ(plot::svg::viridis(1.0), "#fde725");
  EXPECT_NE(svg.find("fill=\"url(#scale)\""), std::string::npos);
  for (const char* tick : {">0</text>", ">0.4</text>", ">1</text>"}) EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  EXPECT_THROW(plot::svg::heatmap(values, {"a", "b"}, {"x", "y"}), std::invalid_argument);
  EXPECT_THROW(plot::svg::heatmap(values, {"a", "b", "c"}, {"x"}), std::invalid_argument);
  EXPECT_THROW(plot::svg::heatmap(tensor({1.0, 2.0}), {"a"}, {"x", "y"}), std::invalid_argument);
}

TEST(Svg, HeatmapOfATensorAndTheDefaultRange) {
  Tensor m = tensor({{-2.0, 0.0, 2.0}, {1.0, NAN, 4.0}});
  std::string svg = plot::svg::heatmap(m, {"r0", "r1"}, {"a", "b", "c"}, {.decimals = 1});
  expect_well_formed(svg, "tensor");
  EXPECT_EQ(cell_texts(svg), (std::vector<std::string>{"-2.0", "0.0", "2.0", "1.0", "nan", "4.0"}));
  EXPECT_NE(svg.find("fill=\"#440154\" stroke=\"white\"/><text"), std::string::npos) << "-2 is the bottom of the scale";
  EXPECT_NE(svg.find("fill=\"#fde725\" stroke=\"white\"/><text"), std::string::npos) << "4 is the top";
  EXPECT_NE(svg.find("fill=\"#cccccc\""), std::string::npos) << "NaN is grey";
}

TEST(Svg, HeatmapProgramDrawsTheWorkshopsAttention) {
  fs::path file = scratch("attention.svg");
  const std::string bin = SCRATCHGRAD_BIN_DIR;
  Shell r = shell(bin + "/heatmap --svg " + file.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string expected = slurp(fs::path(SCRATCHGRAD_SOURCE_DIR) / "tests/reference/seed_programs/heatmap.expected");
  EXPECT_EQ(r.out, expected) << "--svg leaves the printed output as it was";
  // the text grid at the end of the output: "     Aditi    0.16    0.01    0.61    0.22"
  std::vector<std::string> grid;
  std::istringstream lines(expected.substr(expected.find("Attention map")));
  std::string line, word;
  std::getline(lines, line);
  std::getline(lines, line);  // header: the words
  std::vector<std::string> words;
  for (std::istringstream header(line); header >> word;) words.push_back(word);
  while (std::getline(lines, line)) {
    std::istringstream cells(line);
    cells >> word;
    for (std::string v; cells >> v;) grid.push_back(v);
  }
  ASSERT_EQ(grid.size(), 16u);
  const std::string svg = slurp(file);
  expect_well_formed(svg, "heatmap");
  EXPECT_EQ(cell_texts(svg), grid);
  EXPECT_NE(svg.find(">0.98</text>"), std::string::npos);
  for (const std::string& w : words) EXPECT_EQ(std::count(words.begin(), words.end(), w), 1);
  for (const std::string& w : words)
    EXPECT_GE(static_cast<int>(std::regex_search(svg, std::regex(">" + w + "</text>"))), 1) << w;
  Shell usage = shell(bin + "/heatmap --bogus");
  EXPECT_EQ(usage.status, 2);
}

// ---------------------------------------------------------------- line plot

std::map<std::string, std::vector<std::pair<double, double>>> series_of(const std::string& svg) {
  static const std::regex group(R"re(<g><title>([^<]*)</title><desc>([^<]*)</desc>)re");
  std::map<std::string, std::vector<std::pair<double, double>>> out;
  for (std::sregex_iterator it(svg.begin(), svg.end(), group), end; it != end; ++it) {
    std::istringstream pairs(std::regex_replace((*it)[2].str(), std::regex(";"), " "));
    std::vector<std::pair<double, double>> points;
    for (std::string x, y; pairs >> x >> y;) points.emplace_back(std::stod(x), std::stod(y));
    out[(*it)[1]] = points;
  }
  return out;
}

TEST(Svg, LinePlotHoldsItsPoints) {
  plot::svg::Series a{.name = "train", .x = {0, 1, 2, 3, 4}, .y = {2.5, 1.75, NAN, 0.5, 0.25}};
  plot::svg::Series b{.name = "held-out & co", .x = {0, 4}, .y = {2.0, 0.375}, .markers = true};
  std::string svg = plot::svg::line_plot({a, b}, {.title = "loss <curve>"});
  expect_well_formed(svg, "plot");
  auto series = series_of(svg);
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series["train"].size(), 5u);
  EXPECT_EQ(series["train"][1], (std::pair<double, double>{1, 1.75}));
  EXPECT_TRUE(std::isnan(series["train"][2].second));
  EXPECT_EQ(series["held-out &amp; co"][1], (std::pair<double, double>{4, 0.375}));
  // the NaN splits the train line in two; the held-out series has a dot per point
  auto count = [&](const std::string& part) {
    int n = 0;
    for (size_t at = svg.find(part); at != std::string::npos; at = svg.find(part, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<polyline"), 3);
  EXPECT_EQ(count("<circle"), 2);
  EXPECT_NE(svg.find(">loss &lt;curve&gt;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">step</text>"), std::string::npos);
  EXPECT_NE(svg.find(">0</text>"), std::string::npos) << "the y axis starts at 0";
  EXPECT_THROW(plot::svg::line_plot({{.name = "bad", .x = {1, 2}, .y = {1}}}), std::invalid_argument);
  expect_well_formed(plot::svg::line_plot({}), "empty");
}

TEST(Svg, ScratchgradTrainPlotsTheLossCurve) {
  // a text long enough to hold some out: 10% of it
  fs::path text = scratch("story.txt");
  std::string story;
  for (int i = 0; i < 30; ++i) story += "the cat sat on the mat and the dog ate the hat. ";
  write_text_file(text.string(), story);
  fs::path file = scratch("loss.svg");
  Shell r = shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad train --steps 25 --eval-every 10 --text " +
                  text.string() + " --plot " + file.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("wrote the loss curve to " + file.string()), std::string::npos) << r.out;
  const std::string svg = slurp(file);
  expect_well_formed(svg, "loss");
  auto series = series_of(svg);
  ASSERT_EQ(series.count("train (batch loss)"), 1u) << svg.substr(0, 3000);
  ASSERT_EQ(series.count("held-out"), 1u);
  EXPECT_EQ(series["train (batch loss)"].size(), 25u);
  // every reported line "step  10 | loss 1.234 | held-out 1.456" is a point of the two curves
  static const std::regex report(R"(step +([0-9]+) \| loss ([0-9.]+) \| held-out ([0-9.]+))");
  std::vector<std::pair<double, double>> reported_train, reported_val;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), report), end; it != end; ++it) {
    reported_train.emplace_back(std::stod((*it)[1]), std::stod((*it)[2]));
    reported_val.emplace_back(std::stod((*it)[1]), std::stod((*it)[3]));
  }
  ASSERT_EQ(reported_val.size(), 4u) << r.out;  // steps 0, 10, 20 and the last, 24
  ASSERT_EQ(series["held-out"].size(), reported_val.size());
  for (size_t i = 0; i < reported_val.size(); ++i) {
    EXPECT_EQ(series["held-out"][i].first, reported_val[i].first);
    EXPECT_NEAR(series["held-out"][i].second, reported_val[i].second, 6e-4);
    const auto& train_point = series["train (batch loss)"][size_t(reported_train[i].first)];
    EXPECT_EQ(train_point.first, reported_train[i].first);
    EXPECT_NEAR(train_point.second, reported_train[i].second, 6e-4);
  }
  // without held-out text (the workshop's phrase is too short), only the training curve
  Shell workshop = shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad train --steps 3 --plot " + file.string());
  ASSERT_EQ(workshop.status, 0) << workshop.err;
  auto only = series_of(slurp(file));
  EXPECT_EQ(only.size(), 1u);
  EXPECT_NEAR(only["train (batch loss)"].at(0).second, 2.655, 6e-4);
}

}  // namespace
