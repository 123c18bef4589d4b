// test_format.cpp — format_tensor / python_float_repr against strings PyTorch 1.13 printed.
// Fixtures come from tests/reference/make_print_fixtures.py (format described there).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/cpu/runtime/runtime.h"
#include "autograd/print/format_rules.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "/work/main"
#endif

namespace {

using autograd::DType;
using autograd::print::PrintData;
using autograd::print::PrintOptions;

const std::string kFixtureDir = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/print/";

struct PrintCase {
  std::string name;
  PrintData data;
  PrintOptions options;
  std::vector<std::string> suffixes;
  std::string expected;
};

// ---------------------------------------------------------------------------------------------
// Fixture parsing. Any malformed input throws, so a broken fixture fails loudly.

class FixtureReader {
 public:
  explicit FixtureReader(const std::string& path) : in_(path), path_(path) {
    if (!in_) throw std::runtime_error("cannot open fixture " + path);
  }

  // Next line that is not a comment; false at end of file.
  bool next(std::string& line) {
    while (std::getline(in_, line))
      if (line.empty() || line[0] != '#') return true;
    return false;
  }

  std::string raw_line() {
    std::string line;
    if (!std::getline(in_, line)) fail("unexpected end of file");
    return line;
  }

  // Reads "<keyword> <rest>" and returns rest.
  std::string field(const std::string& keyword) {
    std::string line;
    if (!next(line) || line.rfind(keyword, 0) != 0) fail("expected '" + keyword + "', got '" + line + "'");
    return line.size() > keyword.size() ? line.substr(keyword.size() + 1) : "";
  }

  size_t count(const std::string& keyword) { return std::stoul(field(keyword)); }

  // n whitespace-separated tokens spread over as many lines as needed.
  std::vector<std::string> tokens(size_t n) {
    std::vector<std::string> out;
    while (out.size() < n) {
      std::istringstream ss(raw_line());
      for (std::string tok; ss >> tok;) out.push_back(tok);
    }
    if (out.size() != n) fail("too many values");
    return out;
  }

  [[noreturn]] void fail(const std::string& why) const { throw std::runtime_error(path_ + ": " + why); }

 private:
  std::ifstream in_;
  std::string path_;
};

DType parse_dtype(const std::string& s) {
  if (s == "float32") return DType::Float32;
  if (s == "float64") return DType::Float64;
  if (s == "int64") return DType::Int64;
  if (s == "bool") return DType::Bool;
  throw std::runtime_error("unknown dtype " + s);
}

// "precision=4 threshold=1000 edgeitems=3 linewidth=80 sci_mode=auto"
PrintOptions parse_options(const std::string& s) {
  PrintOptions o;
  std::istringstream ss(s);
  for (std::string kv; ss >> kv;) {
    const auto eq = kv.find('=');
    const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (key == "precision") o.precision = std::stoi(value);
    else if (key == "threshold") o.threshold = std::stoi(value);
    else if (key == "edgeitems") o.edgeitems = std::stoi(value);
    else if (key == "linewidth") o.linewidth = std::stoi(value);
    else if (key == "sci_mode") o.sci_mode = value == "auto" ? std::nullopt : std::optional<bool>(value == "true");
    else throw std::runtime_error("unknown option " + key);
  }
  return o;
}

// strtod reads float.hex() output ("0x1.8p+1", "inf", "-inf", "nan") exactly.
// The engine turns on flush-to-zero for the whole process (see cpu/runtime/runtime.h), which would make
// strtod return 0 for subnormal fixtures like 5e-324; parse them with it off.
double parse_double(const std::string& tok) {
  char* end = nullptr;
  double v = 0;
  {
    autograd::cpu::KeepSubnormals exact;
    v = std::strtod(tok.c_str(), &end);
  }
  if (*end != '\0') throw std::runtime_error("bad float " + tok);
  return v;
}

void parse_values(FixtureReader& r, PrintData& data) {
  for (const std::string& tok : r.tokens(r.count("values"))) {
    if (autograd::is_floating(data.dtype))
      data.floats.push_back(parse_double(tok));
    else
      data.ints.push_back(std::stoll(tok));
  }
}

std::vector<PrintCase> load_cases(const std::string& file) {
  FixtureReader r(kFixtureDir + file);
  std::vector<PrintCase> cases;
  for (std::string line; r.next(line);) {
    if (line.rfind("case ", 0) != 0) r.fail("expected 'case', got '" + line + "'");
    PrintCase c;
    c.name = line.substr(5);
    c.data.dtype = parse_dtype(r.field("dtype"));
    std::istringstream shape(r.field("shape"));
    for (int64_t d; shape >> d;) c.data.shape.push_back(d);
    c.options = parse_options(r.field("options"));
    for (size_t n = r.count("suffixes"); n > 0; --n) c.suffixes.push_back(r.raw_line());
    parse_values(r, c.data);
    for (size_t n = r.count("expected"), i = 0; i < n; ++i) c.expected += (i ? "\n" : "") + r.raw_line();
    r.field("end");
    cases.push_back(std::move(c));
  }
  return cases;
}

// ---------------------------------------------------------------------------------------------

void expect_file_matches(const std::string& file) {
  const auto cases = load_cases(file);
  ASSERT_FALSE(cases.empty()) << file << " holds no cases";
  int failures = 0;
  for (const PrintCase& c : cases) {
    const std::string got = autograd::print::format_tensor(c.data, c.suffixes, c.options);
    if (got == c.expected) continue;
    // Cap the report: one bug usually breaks many cases at once.
    if (++failures <= 10)
      ADD_FAILURE() << file << " case " << c.name << "\n--- expected (PyTorch) ---\n"
                    << c.expected << "\n--- got ---\n" << got << "\n";
  }
  EXPECT_EQ(failures, 0) << failures << " of " << cases.size() << " cases in " << file << " differ";
}

PrintData floats(std::vector<int64_t> shape, std::vector<double> values, DType dtype = DType::Float32) {
  return PrintData{dtype, std::move(shape), std::move(values), {}};
}

// Global print options are process state; restore the defaults whatever a test does.
class FormatOptions : public ::testing::Test {
 protected:
  void TearDown() override { autograd::print::reset_printoptions(); }
};

}  // namespace

TEST(Format, RandomFloat) { expect_file_matches("random_float.txt"); }
TEST(Format, Float64) { expect_file_matches("float64.txt"); }
TEST(Format, IntValuedFloat) { expect_file_matches("int_valued.txt"); }
TEST(Format, Special) { expect_file_matches("special.txt"); }
TEST(Format, Layout) { expect_file_matches("layout.txt"); }
TEST(Format, Summarize) { expect_file_matches("summarize.txt"); }
TEST(Format, IntAndBool) { expect_file_matches("int_bool.txt"); }
TEST(Format, Empty) { expect_file_matches("empty.txt"); }
TEST(Format, AutogradSuffixes) { expect_file_matches("autograd.txt"); }
TEST(Format, SeedPrograms) { expect_file_matches("seeds.txt"); }

TEST(Format, PythonFloatRepr) {
  FixtureReader r(kFixtureDir + "float_repr.txt");
  int checked = 0;
  for (std::string line; r.next(line); ++checked) {
    const auto space = line.find(' ');
    const std::string hex = line.substr(0, space), expected = line.substr(space + 1);
    EXPECT_EQ(autograd::print::python_float_repr(parse_double(hex)), expected) << "float.hex " << hex;
  }
  EXPECT_GT(checked, 100);
}

TEST(Format, PythonFloatReprExamples) {
  EXPECT_EQ(autograd::print::python_float_repr(std::ldexp(1.0, -24)), "5.960464477539063e-08");
  EXPECT_EQ(autograd::print::python_float_repr(1e16), "1e+16");
  EXPECT_EQ(autograd::print::python_float_repr(2.0), "2.0");
  EXPECT_EQ(autograd::print::python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(autograd::print::python_float_repr(-NAN), "nan");
  EXPECT_EQ(autograd::print::python_float_repr(-INFINITY), "-inf");
}

// The comparison must notice a one-digit change, or the fixture tests prove nothing.
TEST(Format, DetectsSmallDifferences) {
  const auto cases = load_cases("seeds.txt");
  ASSERT_FALSE(cases.empty());
  PrintCase c = cases.front();
  ASSERT_EQ(autograd::print::format_tensor(c.data, c.suffixes, c.options), c.expected);
  c.data.floats[0] += 0.01;
  EXPECT_NE(autograd::print::format_tensor(c.data, c.suffixes, c.options), c.expected);
  c.options.precision += 1;
  EXPECT_NE(autograd::print::format_tensor(c.data, c.suffixes, c.options), c.expected);
}

TEST(Format, SignedNanPrintsLikePython) {
  EXPECT_EQ(autograd::print::format_tensor(floats({3}, {-NAN, 1.5, NAN}), {}, PrintOptions{}),
            "tensor([   nan, 1.5000,    nan])");
  EXPECT_EQ(autograd::print::format_tensor(floats({}, {-NAN}), {}, PrintOptions{}), "tensor(nan)");
}

TEST(Format, RejectsWrongElementCount) {
  EXPECT_THROW(autograd::print::format_tensor(floats({2, 2}, {1, 2, 3})), std::invalid_argument);
  EXPECT_THROW(autograd::print::format_tensor(PrintData{DType::Int64, {2}, {1.0, 2.0}, {}}), std::invalid_argument);
}

TEST_F(FormatOptions, SetPrintoptionsFollowsTorchSemantics) {
  autograd::print::set_printoptions(3, false);  // torch.set_printoptions(precision=3, sci_mode=False)
  EXPECT_EQ(autograd::print::print_options().precision, 3);
  EXPECT_EQ(autograd::print::print_options().sci_mode, std::optional<bool>(false));

  autograd::print::set_printoptions({}, {}, 50);  // omitted precision is kept, omitted sci_mode resets
  EXPECT_EQ(autograd::print::print_options().precision, 3);
  EXPECT_EQ(autograd::print::print_options().threshold, 50);
  EXPECT_FALSE(autograd::print::print_options().sci_mode.has_value());

  autograd::print::set_printoptions({}, true);
  autograd::print::set_printoptions({}, autograd::print::kSciModeAuto);
  EXPECT_FALSE(autograd::print::print_options().sci_mode.has_value());

  autograd::print::set_printoptions(PrintOptions{2, 10, 1, 40, true});
  EXPECT_EQ(autograd::print::print_options().linewidth, 40);
  EXPECT_EQ(autograd::print::print_options().sci_mode, std::optional<bool>(true));

  autograd::print::reset_printoptions();
  const PrintOptions& o = autograd::print::print_options();
  EXPECT_EQ(o.precision, 4);
  EXPECT_EQ(o.threshold, 1000);
  EXPECT_EQ(o.edgeitems, 3);
  EXPECT_EQ(o.linewidth, 80);
  EXPECT_FALSE(o.sci_mode.has_value());
}

TEST_F(FormatOptions, FormatTensorUsesGlobalOptions) {
  const PrintData d = floats({2}, {0.12345, -1.5});
  EXPECT_EQ(autograd::print::format_tensor(d), "tensor([ 0.1235, -1.5000])");
  autograd::print::set_printoptions(2, false);
  EXPECT_EQ(autograd::print::format_tensor(d, {"requires_grad=True"}), "tensor([ 0.12, -1.50], requires_grad=True)");
  // Forced sci_mode keeps the column width of the automatic (fixed) choice, as torch does.
  autograd::print::set_printoptions({}, true);
  EXPECT_EQ(autograd::print::format_tensor(d), "tensor([1.23e-01, -1.50e+00])");
}
