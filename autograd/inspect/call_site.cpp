// inspect/call_site.cpp — call-site labels, and where nodes come from (see call_site.h).
#include "autograd/inspect/call_site.h"

#include <filesystem>
#include <mutex>
#include <unordered_set>

#include <fmt/format.h>

namespace autograd::inspect {

namespace {
thread_local std::string_view call_site;

std::string_view intern(std::string label) {
  static std::mutex mutex;
  static auto* labels = new std::unordered_set<std::string>;  // never freed: nodes may outlive statics
  std::lock_guard<std::mutex> lock(mutex);
  return *labels->insert(std::move(label)).first;
}
}  // namespace

CallSite::CallSite(std::string label) : previous_(call_site) { call_site = intern(std::move(label)); }
CallSite::CallSite(SourceLocation where) : previous_(call_site) {
  call_site = intern(fmt::format("{}:{}", std::filesystem::path(where.file_name()).filename().string(), where.line()));
}
CallSite::~CallSite() { call_site = previous_; }
void CallSite::set(std::string label) { call_site = intern(std::move(label)); }
std::string_view current_call_site() { return call_site; }

std::string recording_function(const Node& node) {
  // function_name() is the full signature: "autograd::Tensor autograd::log(const autograd::Tensor&)"
  std::string_view f = node.where.function_name();
  f = f.substr(0, f.find('('));
  if (size_t colons = f.rfind("::"); colons != std::string_view::npos) f = f.substr(colons + 2);
  if (size_t space = f.rfind(' '); space != std::string_view::npos) f = f.substr(space + 1);
  return std::string(f);
}

std::string recorded_at(const Node& node, bool with_line) {
  std::string file = std::filesystem::path(node.where.file_name()).filename().string();
  if (with_line) file += fmt::format(":{}", node.where.line());
  return fmt::format("{}() in {}", recording_function(node), file);
}

}  // namespace autograd::inspect
