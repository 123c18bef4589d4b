// test_house.cpp — the layout's rules, checked on the sources: ops/ stays above the kernel fence, the top
// of autograd/ holds only reverse mode, and every file the docs point at (with its line) exists.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fs = std::filesystem;

namespace {

const fs::path kSource = SCRATCHGRAD_SOURCE_DIR;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text without // comments (a comment may name cpu/ files; code may not use them).
std::string code_only(const std::string& text) {
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t comment = line.find("//");
    out += line.substr(0, comment) + "\n";
  }
  return out;
}

// Every file of the project's own trees, as paths relative to the source dir ("autograd/engine.cpp").
std::vector<std::string> project_files() {
  std::vector<std::string> files;
  for (const char* top : {"autograd", "nn", "optim", "gpu", "examples", "tests", "docs", "bench", "cmake", ".ci", "tools"})
    for (const auto& e : fs::recursive_directory_iterator(kSource / top))
      if (e.is_regular_file()) files.push_back(fs::relative(e.path(), kSource).generic_string());
  for (const char* top : {"CMakeLists.txt", "Makefile", "README.md"}) files.push_back(top);
  return files;
}

size_t line_count(const fs::path& path) {
  const std::string text = read_file(path);
  return size_t(std::count(text.begin(), text.end(), '\n')) + (text.empty() || text.back() == '\n' ? 0 : 1);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string lowercase(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The rule for a `file:line` reference in the docs (matmul.cpp:135, engine.cpp:40-52): it names a symbol,
// and the cited line holds that symbol.
// - The symbol is the last code identifier before the reference in the same sentence. A code identifier
//   is a backticked identifier (`record`, `autograd::record`, `sqrt()`; for a qualified name its last
//   part) or a word written as a call (sqrt() or record(...), also inside a longer backticked span).
// - The sentence starts after the last ". ", "! " or "? " (or the same before a line break), blank line,
//   list item ("- " or "* " at a line's start) or table cell ("|") before the reference.
// - The symbol must appear, case-insensitively, on the cited line or within kLineSlack lines of it (for a
//   range, within kLineSlack of the range). Case-insensitive so that sqrt() matches the line that records
//   "SqrtBackward0"; the slack lets a reference point at a call that spans a few lines.
// A reference with no symbol before it in its sentence fails: say what the line holds.
constexpr size_t kLineSlack = 2;

size_t sentence_start(const std::string& text, size_t pos) {
  size_t start = 0;
  for (size_t i = 0; i + 1 < pos; ++i) {
    const char c = text[i], next = text[i + 1];
    if ((c == '.' || c == '!' || c == '?') && (next == ' ' || next == '\n')) start = i + 2;
    if (c == '\n' && next == '\n') start = i + 2;
    if (c == '\n' && i + 2 < pos && (next == '-' || next == '*') && text[i + 2] == ' ') start = i + 3;
    if (c == '|') start = i + 1;
  }
  return std::min(start, pos);
}

// The symbol a reference at `pos` in `text` names, or "" when its sentence names none.
std::string symbol_before(const std::string& text, size_t pos) {
  const std::string sentence = text.substr(sentence_start(text, pos), pos - sentence_start(text, pos));
  std::string symbol;
  size_t symbol_end = 0;
  const std::regex backticked(R"(`((?:[A-Za-z_]\w*::)*([A-Za-z_]\w*))(?:\(\))?`)");
  for (std::sregex_iterator m(sentence.begin(), sentence.end(), backticked), end; m != end; ++m)
    if (size_t(m->position(0) + m->length(0)) >= symbol_end) symbol = (*m)[2], symbol_end = m->position(0) + m->length(0);
  const std::regex call(R"(([A-Za-z_]\w*)\()");
  for (std::sregex_iterator m(sentence.begin(), sentence.end(), call), end; m != end; ++m)
    if (size_t(m->position(0) + m->length(0)) >= symbol_end) symbol = (*m)[1], symbol_end = m->position(0) + m->length(0);
  return symbol;
}

// Whether lines [first, last] (1-based) of `lines`, widened by kLineSlack, hold `symbol`.
bool lines_hold(const std::vector<std::string>& lines, size_t first, size_t last, const std::string& symbol) {
  if (symbol.empty()) return false;
  const size_t from = first > kLineSlack ? first - kLineSlack : 1, to = std::min(lines.size(), last + kLineSlack);
  for (size_t i = from; i <= to; ++i)
    if (lowercase(lines[i - 1]).find(lowercase(symbol)) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(House, OpsStayAboveTheKernelFence) {
  const std::vector<std::string> forbidden = {"cpu::", "is_cpu()", "#pragma omp", "data_ptr<", "raw_data(",
                                              "#include \"autograd/cpu/"};
  int files = 0;
  for (const auto& e : fs::directory_iterator(kSource / "autograd/ops")) {
    const std::string code = code_only(read_file(e.path()));
    ++files;
    for (const std::string& word : forbidden)
      EXPECT_EQ(code.find(word), std::string::npos)
          << e.path().filename() << " uses `" << word << "`: kernels belong below the Backend fence (autograd/cpu/)";
  }
  EXPECT_GE(files, 6);
}

TEST(House, TheTopOfAutogradHoldsOnlyReverseMode) {
  const std::set<std::string> expected = {"autograd.h", "tensor.h", "tensor.cpp", "shape.h", "dtype.h", "device.h",
                                          "node.h",     "engine.cpp", "ops.h",     "ops",     "backend.h", "backend.cpp",
                                          "compat.h",   // the C++20 library pieces a standard library may lack
                                          "numerics.h", "numerics.cpp",  // exact or fast: the one switch
                                          "cpu",        "reference",  // the kernels: fast, and the textbook loops
                                          "memory",   "inspect",    "print",   "random",
                                          "autocast.h", "autocast.cpp",  // bfloat16 or float32 products: the other switch
                                          "precision"};  // bfloat16 at the fence: the widening backend
  std::set<std::string> found;
  for (const auto& e : fs::directory_iterator(kSource / "autograd")) found.insert(e.path().filename().string());
  EXPECT_EQ(found, expected) << "a new file at the top of autograd/: give it a folder that says what it is "
                                "(docs/architecture.md lists them)";
}

// The reference rule on made-up text: it holds only where the named symbol is on the cited line.
TEST(Docs, AReferencedLineMustHoldTheSymbolItsSentenceNames) {
  const std::vector<std::string> file = {"Tensor sqrt(const Tensor& a) {",          // 1
                                         "  check_floating(a, \"sqrt\");",             // 2
                                         "  Tensor out = unary_kernel(Sqrt, a);",      // 3
                                         "  if (!needs_grad({a})) return out;",        // 4
                                         "  Tensor y = out.detach();",                 // 5
                                         "  return record(\"SqrtBackward0\", out);",   // 6
                                         "}",                                          // 7
                                         "",                                           // 8
                                         "Tensor log(const Tensor& a) {",              // 9
                                         "  return record(\"LogBackward0\", out);",    // 10
                                         "}"};                                         // 11
  const auto holds = [&](const std::string& doc, size_t line) {
    const size_t at = doc.find("ops.cpp:");
    return lines_hold(file, line, line, symbol_before(doc, at));
  };
  const std::string made_by = "Its node is made by `record` in ops.cpp:6.";
  EXPECT_EQ(symbol_before(made_by, made_by.find("ops.cpp")), "record");
  EXPECT_TRUE(holds("Its node is made by `record` in ops.cpp:6.", 6));
  EXPECT_TRUE(holds("The node was recorded by sqrt() in ops.cpp:6, called from y.", 6));  // SqrtBackward0
  EXPECT_TRUE(holds("`autograd::record` (ops.cpp:7) makes the node.", 7));  // within the slack
  EXPECT_FALSE(holds("Its node is made by `record` in ops.cpp:1.", 1));     // record is 5 lines away
  EXPECT_FALSE(holds("The node was recorded by sqrt() in ops.cpp:10.", 10));  // log's line
  EXPECT_FALSE(holds("The trace shows source lines (`ops.cpp:6`).", 6));     // no symbol named
  // A sentence ends at ". ": `record` belongs to the sentence before.
  EXPECT_FALSE(holds("Nodes come from `record`. See ops.cpp:10.", 10));
  EXPECT_TRUE(holds("Nodes come from `record`, see ops.cpp:10.", 10));
  // The last identifier before the reference counts: here `sqrt`, which line 10 does not hold.
  EXPECT_FALSE(holds("`log` calls `sqrt` at ops.cpp:10.", 10));
}

// A path the docs mention: `cpu/kernels/loops.h`, autograd/engine.cpp, matmul.cpp:99, README.md ... It resolves when
// a project file is that path, or ends with "/" + that path (a path given from inside a folder, or a bare
// file name). With a line, some such file must have that many lines, and the line must hold the symbol the
// sentence names (the rule above symbol_before). PyTorch's own paths are not ours.
TEST(Docs, EveryPathAndLineTheyNameExists) {
  const std::vector<std::string> files = project_files();
  const std::regex path_ref(R"((?:^|[^\w/.\-])((?:[\w.\-]+/)*[\w\-]+\.(?:h|cpp|cu|cuh|md|py|sh|txt|cmake|expected))(?![\w])(?::(\d+)(?:-(\d+))?)?)");
  std::vector<fs::path> documents = {kSource / "README.md"};
  for (const auto& e : fs::directory_iterator(kSource / "docs"))
    if (e.path().extension() == ".md") documents.push_back(e.path());
  int checked = 0;
  for (const fs::path& doc : documents) {
    const std::string text = read_file(doc);
    for (std::sregex_iterator m(text.begin(), text.end(), path_ref), end; m != end; ++m) {
      std::string ref = (*m)[1];
      while (ref.starts_with("../")) ref = ref.substr(3);
      if (ref.find('/') == std::string::npos && ref.ends_with(".txt")) continue;  // a user's file (story.txt)
      if (ref.starts_with("aten/") || ref.starts_with("torch/") || ref.starts_with("c10/") ||
          ref.find("/tmp/") != std::string::npos || ref.starts_with("build"))
        continue;
      const size_t line = (*m)[3].matched ? std::stoul((*m)[3]) : (*m)[2].matched ? std::stoul((*m)[2]) : 0;
      const size_t first = (*m)[2].matched ? std::stoul((*m)[2]) : 0;
      const std::string symbol = line > 0 ? symbol_before(text, size_t(m->position(1))) : "";
      bool exists = false, line_inside = line == 0, holds_symbol = line == 0;
      for (const std::string& f : files) {
        if (f != ref && !f.ends_with("/" + ref)) continue;
        exists = true;
        if (line > 0 && line <= line_count(kSource / f)) line_inside = true;
        if (line > 0 && lines_hold(lines_of(read_file(kSource / f)), first, line, symbol)) holds_symbol = true;
      }
      ++checked;
      EXPECT_TRUE(exists) << doc.filename() << " names " << ref << ", which is not in the tree";
      EXPECT_TRUE(line_inside) << doc.filename() << " names " << (*m).str() << ": the file is shorter";
      const std::string cited = ref + ":" + std::string((*m)[2]) + ((*m)[3].matched ? "-" + std::string((*m)[3]) : "");
      if (line_inside) {
        EXPECT_TRUE(holds_symbol) << doc.filename() << " names " << cited
                                  << (symbol.empty() ? std::string(", but its sentence names no symbol (a backticked "
                                                                   "identifier or a call) for the line to hold")
                                                     : ", but no such line (±" + std::to_string(kLineSlack) +
                                                           ") holds `" + symbol + "`");
      }
    }
  }
  EXPECT_GT(checked, 50);
}

// The "pieces" tree in docs/architecture.md names every file under autograd/ (a file added without a line
// there fails here).
TEST(Docs, TheArchitectureTreeListsEveryAutogradFile) {
  const std::string tree = read_file(kSource / "docs/architecture.md");
  for (const auto& e : fs::recursive_directory_iterator(kSource / "autograd")) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    const std::string stem = e.path().stem().string();
    const bool listed = tree.find(name) != std::string::npos ||  // "pool.h / pool.cpp" or "exp_floats.h / .cpp"
                        tree.find(stem + ".h / .") != std::string::npos;
    EXPECT_TRUE(listed) << fs::relative(e.path(), kSource).generic_string() << " is missing from docs/architecture.md";
  }
}

// The command line grows a command at a time: each lives in a file of its own, and no file there outgrows
// one sitting's reading.
TEST(House, NoCommandLineFileIsOver800Lines) {
  for (const auto& e : fs::directory_iterator(kSource / "examples" / "cli"))
    if (e.is_regular_file()) {
      EXPECT_LE(line_count(e.path()), 800u) << e.path().filename() << " is over 800 lines: split it";
    }
}
