// test_catalog.cpp — docs/reliability.md lists every refused input with the message it gets, and that list
// is made from the error tests themselves: this test runs them with SCRATCHGRAD_CATALOG set (each
// EXPECT_THROW_WITH and each refused command line then records its call and message, see test_helpers.h),
// renders the records as markdown and compares them with the doc. With SCRATCHGRAD_UPDATE_DOCS=1 it
// rewrites the doc's catalog instead.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_process.h"

namespace fs = std::filesystem;

namespace {

const fs::path kDoc = fs::path(SCRATCHGRAD_SOURCE_DIR) / "docs" / "reliability.md";
constexpr const char* kBegin = "<!-- catalog:begin (made by tests/test_catalog.cpp from the error tests; do not edit) -->\n";
constexpr const char* kEnd = "<!-- catalog:end -->\n";

// The suites whose refusals are the same in every build (the CUDA ones differ with and without a GPU,
// the fault tests with and without root, and a failed allocation under AddressSanitizer: they stay out).
constexpr const char* kSuites =
    "Errors.*:Overflow.*:Folders.*:Checksum.*:Cli.Refuses*:Engine.*:Optimizer.*:TensorAccess.*:TensorConstruction.*:"
    "TensorCopies.*:TensorViews.*:Module.*:MultiheadAttention.*:GptOpsErrors.*:CausalAttentionOps.*:"
    "FlashAttentionErrors.*:LinearAfterGelu.Refuses*:AutocastLinear.Refuses*:Hardening.Refuses*:TokenizerHardening.*:LlamaOpsErrors.*:"
    "HfTokenizerRefusals.*:LlamaCli.Refuses*:ClassifyCli.Refuses*:InstructCli.Refuses*:ChatCli.Refusals:"
    "Panels.Refuses*:PackedModels.OnlyGenerate"
    // skipped under AddressSanitizer, whose allocator reserves the space without failing
    "-Overflow.AnAllocationThatFailsSaysHowMuchWasAsked:TokenizerHardening.RunningOutOfMemoryNamesTheFileBeingRead";

// What changes from run to run (this process's temporary folder, the build folder, a checksum of a file
// that holds such paths) becomes a fixed placeholder.
std::string stable(std::string s) {
  s = std::regex_replace(s, std::regex(R"(/tmp/scratchgrad_[A-Za-z_]*?[0-9]+)"), "<tmp>");
  s = std::regex_replace(s, std::regex(R"(fnv1a64:[0-9a-f]{16})"), "fnv1a64:<hex>");
  s = std::regex_replace(s, std::regex(R"(\.tmp-[0-9]+-[0-9a-f]{8})"), ".tmp-<pid>-<random>");
  const std::string bin = SCRATCHGRAD_BIN_DIR;
  for (size_t at; (at = s.find(bin)) != std::string::npos;) s.replace(at, bin.size(), "build/bin");
  return s;
}

std::string table_cell(std::string s) {
  std::string out;
  for (char c : stable(std::move(s))) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// A call recorded with the program's path (a cross build's tests start bin-emulated/'s scripts, which the
// callers' "/bin/scratchgrad " does not find) reads from the program's name on, as the callers cut the
// others: what comes before it (an environment variable, `cd DIR &&`, `ulimit -v N &&`) is dropped too.
std::string from_program_name(const std::string& call) {
  const std::string path = "build/bin/", shown = stable(call);
  const size_t at = shown.find(path + "scratchgrad ");
  return at == std::string::npos ? shown : shown.substr(at + path.size());
}

// "<test>\t<call>\t<message>" lines → one table per test, in the order the tests ran.
std::string render(const std::string& records) {
  std::ostringstream md;
  std::istringstream lines(records);
  std::string current;
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find('\t'), b = line.find('\t', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string test = line.substr(0, a), call = line.substr(a + 1, b - a - 1), message = line.substr(b + 1);
    if (test != current) {
      md << "\n**" << test << "**\n\n| call | message |\n|---|---|\n";
      current = test;
    }
    md << "| `" << table_cell(from_program_name(call)) << "` | " << table_cell(message) << " |\n";
    ++rows;
  }
  return std::to_string(rows) + " refusals, each with the message it gets.\n" + md.str();
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST(Docs, TheCatalogOfRefusedInputsIsCurrent) {
  const fs::path records = testing_process::scratch("catalog.tsv");
  fs::remove(records);
  const testing_process::Shell run = testing_process::shell(
      "SCRATCHGRAD_CATALOG=" + records.string() + " " + std::string(SCRATCHGRAD_BIN_DIR) +
      "/scratchgrad_tests --gtest_filter='" + kSuites + "'");
  ASSERT_EQ(run.status, 0) << "the error tests failed:\n" << run.out.substr(run.out.size() > 3000 ? run.out.size() - 3000 : 0);
  const std::string catalog = render(read_file(records));
  ASSERT_GT(std::count(catalog.begin(), catalog.end(), '\n'), 150) << "too few refusals recorded:\n" << catalog;

  const std::string doc = read_file(kDoc);
  const size_t begin = doc.find(kBegin), end = doc.find(kEnd);
  ASSERT_TRUE(begin != std::string::npos && end != std::string::npos && begin < end)
      << kDoc << " lacks the catalog markers " << kBegin << " and " << kEnd;
  const size_t inside = begin + std::string(kBegin).size();
  const std::string written = doc.substr(inside, end - inside);
  if (std::getenv("SCRATCHGRAD_UPDATE_DOCS")) {
    std::ofstream(kDoc, std::ios::binary) << doc.substr(0, inside) << catalog << doc.substr(end);
    GTEST_SKIP() << "rewrote the catalog in " << kDoc;
  }
  if (written != catalog) {
    const fs::path fresh = fs::path(SCRATCHGRAD_BIN_DIR).parent_path() / "reliability-catalog.md";
    std::ofstream(fresh, std::ios::binary) << catalog;
    ADD_FAILURE() << kDoc << "'s catalog is not what the error tests see; the current one is in " << fresh
                  << " (SCRATCHGRAD_UPDATE_DOCS=1 ctest -R Docs.TheCatalog rewrites the doc)";
  }
}
