// test_house.cpp — the layout's rules, checked on the sources: ops/ stays above the kernel fence, the top
// of autograd/ holds only reverse mode, and every file the docs point at (with its line) exists.
#include <algorithm>
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
  for (const char* top : {"autograd", "nn", "optim", "gpu", "examples", "tests", "docs", "bench", "cmake", ".ci"})
    for (const auto& e : fs::recursive_directory_iterator(kSource / top))
      if (e.is_regular_file()) files.push_back(fs::relative(e.path(), kSource).generic_string());
  for (const char* top : {"CMakeLists.txt", "Makefile", "README.md"}) files.push_back(top);
  return files;
}

size_t line_count(const fs::path& path) {
  const std::string text = read_file(path);
  return size_t(std::count(text.begin(), text.end(), '\n')) + (text.empty() || text.back() == '\n' ? 0 : 1);
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
                                          "memory",   "inspect",    "print",   "random"};
  std::set<std::string> found;
  for (const auto& e : fs::directory_iterator(kSource / "autograd")) found.insert(e.path().filename().string());
  EXPECT_EQ(found, expected) << "a new file at the top of autograd/: give it a folder that says what it is "
                                "(docs/architecture.md lists them)";
}

// A path the docs mention: `cpu/loops.h`, autograd/engine.cpp, matmul.cpp:99, README.md ... It resolves when
// a project file is that path, or ends with "/" + that path (a path given from inside a folder, or a bare
// file name). With a line, some such file must have that many lines. PyTorch's own paths are not ours.
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
      bool exists = false, line_inside = line == 0;
      for (const std::string& f : files) {
        if (f != ref && !f.ends_with("/" + ref)) continue;
        exists = true;
        if (line > 0 && line <= line_count(kSource / f)) line_inside = true;
      }
      ++checked;
      EXPECT_TRUE(exists) << doc.filename() << " names " << ref << ", which is not in the tree";
      EXPECT_TRUE(line_inside) << doc.filename() << " names " << (*m).str() << ": the file is shorter";
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
