// test_report_blocks.cpp — the measured tables in docs/ are bench/report.sh's. Each sits between
// <!-- report:ID --> and <!-- /report:ID -->, with an ID that report.sh prints, and its caption names the
// commit and the CPU it was measured on: `bench/report.sh --docs` replaces each block whole, so a table
// edited by hand, or one that no run of the script made, would be lost or stale there.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fs = std::filesystem;

namespace {

const fs::path kSource = SCRATCHGRAD_SOURCE_DIR;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct ReportBlock {
  std::string id, body;
  bool closed = false;  // its <!-- /report:ID --> came before the next block or the end
};

// The blocks of a markdown text, in order: each opening line <!-- report:ID --> starts one, its closing
// line <!-- /report:ID --> ends it.
std::vector<ReportBlock> report_blocks(const std::string& text) {
  static const std::regex open(R"(^<!-- report:([a-z0-9-]+) -->$)"), close(R"(^<!-- /report:([a-z0-9-]+) -->$)");
  std::vector<ReportBlock> blocks;
  std::istringstream lines(text);
  bool inside = false;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, open)) {
      blocks.push_back({m[1], "", false});
      inside = true;
    } else if (std::regex_match(line, m, close)) {
      if (inside && m[1] == blocks.back().id) blocks.back().closed = true;
      inside = false;
    } else if (inside) {
      blocks.back().body += line + "\n";
    }
  }
  return blocks;
}

// A caption as report.sh writes it: "... at `<commit>` on <model> (cpu family <n>; <flags>), <n> cores."
bool names_commit_and_cpu(const std::string& body) {
  static const std::regex caption(R"(at `[0-9a-f]{7,40}[^`]*` on [^(\n]+ \(cpu family [0-9]+; [^)\n]+\), [0-9]+ cores)");
  return std::regex_search(body, caption);
}

// The IDs bench/report.sh opens a block with: `begin ID "Title"`.
std::set<std::string> script_ids() {
  const std::string script = read_text(kSource / "bench" / "report.sh");
  static const std::regex begin(R"(\bbegin ([a-z0-9-]+) ")");
  std::set<std::string> ids;
  for (std::sregex_iterator m(script.begin(), script.end(), begin), end; m != end; ++m) ids.insert((*m)[1]);
  return ids;
}

}  // namespace

TEST(Docs, AReportBlockIsFoundWhole) {
  const auto blocks = report_blocks(
      "text\n<!-- report:peak -->\n*Caption at `3158c47` on AMD EPYC (cpu family 26; avx512f), 2 cores.*\n| a |\n"
      "<!-- /report:peak -->\n<!-- report:compare -->\n| b |\n<!-- report:floor -->\n<!-- /report:other -->\n");
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].id, "peak");
  EXPECT_TRUE(blocks[0].closed);
  EXPECT_TRUE(names_commit_and_cpu(blocks[0].body));
  EXPECT_FALSE(blocks[1].closed);  // the next block opened before its end
  EXPECT_FALSE(names_commit_and_cpu(blocks[1].body));
  EXPECT_FALSE(blocks[2].closed);  // closed under another ID
  EXPECT_FALSE(names_commit_and_cpu("measured at `3158c47` on a quiet day"));
}

TEST(Docs, MeasuredTablesAreBenchReportBlocksThatNameCommitAndCpu) {
  const std::set<std::string> ids = script_ids();
  EXPECT_GE(ids.size(), 8u) << "bench/report.sh opens fewer blocks than the docs hold";
  std::map<std::string, std::string> home;  // each ID: the doc that holds it
  for (const auto& entry : fs::directory_iterator(kSource / "docs")) {
    if (entry.path().extension() != ".md") continue;
    const std::string doc = entry.path().filename().string();
    for (const ReportBlock& block : report_blocks(read_text(entry.path()))) {
      EXPECT_TRUE(ids.count(block.id)) << doc << " holds a block '" << block.id << "' that bench/report.sh does not print";
      EXPECT_TRUE(block.closed) << doc << ": block '" << block.id << "' has no <!-- /report:" << block.id << " --> line";
      EXPECT_TRUE(names_commit_and_cpu(block.body))
          << doc << ": block '" << block.id << "' has no caption naming its commit and CPU (paste a run of bench/report.sh)";
      const auto [where, first] = home.emplace(block.id, doc);
      EXPECT_TRUE(first) << "block '" << block.id << "' is in " << where->second << " and " << doc;
    }
  }
  for (const std::string& id : ids) EXPECT_TRUE(home.count(id)) << "no doc holds bench/report.sh's block '" << id << "'";
}
