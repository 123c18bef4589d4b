// test_walkthrough.cpp — docs/backprop-walkthrough.md holds examples/walkthrough's output verbatim, and
// its node table lists the nodes the engine runs, in order; so the document cannot drift from the code.
// When this fails after a deliberate change: build/bin/walkthrough --update docs/backprop-walkthrough.md
#include <gtest/gtest.h>

#include "test_process.h"
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "."
#endif

namespace {

namespace fs = std::filesystem;

const char* kRegenerate = "regenerate with: build/bin/walkthrough --update docs/backprop-walkthrough.md";

using testing_process::scratch;
using testing_process::slurp;

int run(const std::string& args, std::string* out = nullptr) {
  fs::path file = scratch("out");
  int raw = std::system((std::string(SCRATCHGRAD_BIN_DIR) + "/walkthrough " + args + " >" + file.string()).c_str());
  if (out) *out = slurp(file);
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

// The program's sections, in order: "=== name ===" lines start them.
std::vector<std::pair<std::string, std::string>> sections_of(const std::string& output) {
  std::vector<std::pair<std::string, std::string>> sections;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("=== ") && line.ends_with(" ===")) {
      sections.emplace_back(line.substr(4, line.size() - 8), "");
      continue;
    }
    if (sections.empty()) ADD_FAILURE() << "output before the first section: " << line;
    else sections.back().second += line + "\n";
  }
  return sections;
}

// The document's blocks: the text between <!-- walkthrough:begin NAME --> and <!-- walkthrough:end NAME -->.
std::map<std::string, std::string> blocks_of(const std::string& doc) {
  std::map<std::string, std::string> blocks;
  static const std::regex begin("<!-- walkthrough:begin ([a-z_]+) -->\n");
  for (std::sregex_iterator it(doc.begin(), doc.end(), begin), end; it != end; ++it) {
    const std::string name = (*it)[1];
    const size_t from = size_t(it->position() + it->length());
    const size_t to = doc.find("<!-- walkthrough:end " + name + " -->", from);
    if (to == std::string::npos) {
      ADD_FAILURE() << "section " << name << " has no end marker";
      continue;
    }
    EXPECT_EQ(blocks.count(name), 0u) << "section " << name << " appears twice";
    blocks[name] = doc.substr(from, to - from);
  }
  return blocks;
}

std::string document() { return slurp(fs::path(SCRATCHGRAD_SOURCE_DIR) / "docs/backprop-walkthrough.md"); }

TEST(Walkthrough, TheDocumentHoldsTheProgramsOutputVerbatim) {
  std::string output;
  ASSERT_EQ(run("", &output), 0);
  auto sections = sections_of(output);
  std::vector<std::string> names;
  for (const auto& [name, text] : sections) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"setup", "backward", "gradients", "order", "accumulate", "broadcast",
                                             "scaling", "mask"}));
  const std::string doc = document();
  auto blocks = blocks_of(doc);
  for (const auto& [name, text] : sections) {
    ASSERT_EQ(blocks.count(name), 1u) << "the document has no section '" << name << "'; " << kRegenerate;
    EXPECT_FALSE(text.empty()) << name;
    EXPECT_EQ(blocks[name], "```text\n" + text + "```\n") << "section '" << name << "' differs; " << kRegenerate;
    blocks.erase(name);
  }
  for (const auto& [name, text] : blocks) ADD_FAILURE() << "the document has a section '" << name << "' the program does not print";
}

TEST(Walkthrough, TheNodeTableFollowsTheEngine) {
  std::string output;
  ASSERT_EQ(run("", &output), 0);
  // "[5/28] AddmmBackward0  addmm() in matmul.cpp  <- ..." in the output ...
  static const std::regex node_line(R"(\n\[([0-9]+)/([0-9]+)\] ([A-Za-z0-9]+)  ([a-z_]+)\(\) in ([a-z_]+\.cpp))");
  std::vector<std::pair<std::string, std::string>> nodes;  // name, file
  for (std::sregex_iterator it(output.begin(), output.end(), node_line), end; it != end; ++it) {
    EXPECT_EQ((*it)[1].str(), std::to_string(nodes.size() + 1));
    nodes.emplace_back((*it)[3], (*it)[5]);
  }
  ASSERT_EQ(nodes.size(), 28u) << output;
  // ... and "| 5 | `AddmmBackward0` | ..." in the document's table, one row per node, in the same order
  const std::string doc = document();
  static const std::regex row(R"(\n\| ([0-9]+) \| `([A-Za-z0-9]+)` \|[^\n]*)");
  std::vector<std::string> rows;
  for (std::sregex_iterator it(doc.begin(), doc.end(), row), end; it != end; ++it) {
    const size_t k = rows.size();
    rows.push_back((*it)[2]);
    EXPECT_EQ((*it)[1].str(), std::to_string(k + 1));
    if (k < nodes.size()) {
      EXPECT_EQ(rows.back(), nodes[k].first) << "table row " << k + 1 << "; " << kRegenerate;
      // the row names the file that implements the node (first mention: "autograd/ops/nn.cpp"; later "nn.cpp")
      EXPECT_NE((*it)[0].str().find(nodes[k].second), std::string::npos)
          << "table row " << k + 1 << " should name " << nodes[k].second;
    }
  }
  EXPECT_EQ(rows.size(), nodes.size());
}

TEST(Walkthrough, UpdateRewritesTheSections) {
  fs::path copy = scratch("doc.md");
  std::string doc = document();
  // spoil one block, then let the program put it back
  const std::string begin = "<!-- walkthrough:begin order -->\n";
  size_t at = doc.find(begin);
  ASSERT_NE(at, std::string::npos);
  size_t end = doc.find("<!-- walkthrough:end order -->", at);
  std::string spoiled = doc;
  spoiled.replace(at + begin.size(), end - at - begin.size(), "```text\nstale numbers\n```\n");
  std::ofstream(copy, std::ios::binary) << spoiled;
  ASSERT_EQ(run("--update " + copy.string()), 0);
  std::string output;
  ASSERT_EQ(run("", &output), 0);
  std::string restored = slurp(copy);
  EXPECT_EQ(restored.find("stale numbers"), std::string::npos);
  auto blocks = blocks_of(restored);
  for (const auto& [name, text] : sections_of(output)) EXPECT_EQ(blocks[name], "```text\n" + text + "```\n") << name;
  EXPECT_EQ(restored.substr(0, at), doc.substr(0, at)) << "the prose is left alone";
  // a document without a section's markers is refused
  std::string missing = doc;
  missing.erase(missing.find("<!-- walkthrough:begin mask -->"), 10);
  std::ofstream(copy, std::ios::binary | std::ios::trunc) << missing;
  EXPECT_EQ(run("--update " + copy.string() + " 2>/dev/null"), 1);
  EXPECT_EQ(run("--bogus 2>/dev/null"), 2);
}

}  // namespace
