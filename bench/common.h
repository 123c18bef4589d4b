// common.h — what the C++ benchmarks in bench/ share, scratchgrad's and the libtorch twins alike (so it
// uses the standard library only): the flags, the text they train on, peak memory, and the lines they end
// with. bench/compare.sh reads the last one:
//   ms_per_step=<median> ms_mean=<mean> rss_mb=<peak RSS of the process> rss_base_mb=<RSS before the model>
#pragma once
#include <sys/resource.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace bench {

// The flags of one program: --name value or --name=value for the integers and strings, --name alone for
// the switches. Anything else calls usage(problem), which does not return.
struct Flags {
  std::map<std::string, int64_t*> ints;   // each >= 1, except --warmup (>= 0)
  std::map<std::string, std::string*> strings;
  std::map<std::string, bool*> switches;
};

inline void parse_flags(int argc, char** argv, const Flags& flags, const std::function<void(const std::string&)>& usage) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    if (flag == "-h" || flag == "--help") usage("help");
    if (auto it = flags.switches.find(flag); it != flags.switches.end()) {
      *it->second = true;
      continue;
    }
    if (auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else {
      if (i + 1 >= argc) usage(flag + " needs a value");
      value = argv[++i];
    }
    if (auto it = flags.strings.find(flag); it != flags.strings.end()) {
      *it->second = value;
    } else if (auto it = flags.ints.find(flag); it != flags.ints.end()) {
      const long long min = flag == "--warmup" ? 0 : 1;
      char* end = nullptr;
      const long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < min)
        usage(flag + " needs an integer >= " + std::to_string(min) + ", got '" + value + "'");
      *it->second = v;
    } else {
      usage("unknown flag " + flag);
    }
  }
}

// The workshop's text ("aditi likes warm dosa "), repeated until it holds at least two training windows of
// `context` tokens (the seed size keeps it as is), and its characters: ids[i] is text[i]'s place in the
// sorted set of characters, as in the Python twins (chars = sorted(set(text))).
struct Text {
  std::string text, chars;
  std::vector<int64_t> ids;
};

inline Text workshop_text(int64_t context) {
  const std::string phrase = "aditi likes warm dosa ";
  Text t;
  t.text = phrase;
  while (int64_t(t.text.size()) < 2 * (context + 1)) t.text += phrase;
  const std::set<char> charset(t.text.begin(), t.text.end());
  t.chars.assign(charset.begin(), charset.end());
  for (char c : t.text) t.ids.push_back(int64_t(t.chars.find(c)));
  return t;
}

// The process's CPU time in ms, all its threads: on a machine shared with other jobs a step's wall time
// includes the time the others ran; this counts only ours.
inline double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) / 1e6;
}

// Where a step's time goes: start() as a step begins, mark() as each of its phases ends (in the order of
// `names`), keep() once the step is over if it counts (after the warm-up). Each phase's times, in ms.
struct PhaseTimes {
  explicit PhaseTimes(std::vector<std::string> phase_names) : names(std::move(phase_names)), ms(names.size()) {}
  std::vector<std::string> names;
  std::vector<std::vector<double>> ms;
  std::vector<std::chrono::steady_clock::time_point> at;

  void start() { at.assign(1, std::chrono::steady_clock::now()); }
  void mark() { at.push_back(std::chrono::steady_clock::now()); }
  void keep() {
    for (size_t p = 0; p < names.size() && p + 1 < at.size(); ++p)
      ms[p].push_back(std::chrono::duration<double, std::milli>(at[p + 1] - at[p]).count());
  }
};

// The most memory the process has held so far, in MB.
inline double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // Linux reports kilobytes
}

struct Times {
  double median = 0, mean = 0, min = 0, max = 0;
};

inline Times summarize(std::vector<double> ms) {
  Times t;
  if (ms.empty()) return t;
  const double sum = std::accumulate(ms.begin(), ms.end(), 0.0);
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  t.median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  t.mean = sum / double(n);
  t.min = ms.front();
  t.max = ms.back();
  return t;
}

// The losses of the first and last step (compare.sh checks that the twins' step-0 losses agree), and the
// step times.
inline void print_losses_and_times(double first_loss, int64_t last_step, double last_loss, const Times& t,
                                   size_t timed, int64_t warmup) {
  std::printf("loss: step 0 %.4f, step %lld %.4f\n", first_loss, (long long)last_step, last_loss);
  std::printf("%zu timed steps after %lld warm-up: median %.4f ms, mean %.4f ms, min %.4f ms, max %.4f ms\n", timed,
              (long long)warmup, t.median, t.mean, t.min, t.max);
}

inline void print_last_line(const Times& t, double rss_base_mb) {
  std::printf("ms_per_step=%.4f ms_mean=%.4f rss_mb=%.1f rss_base_mb=%.1f\n", t.median, t.mean, peak_rss_mb(), rss_base_mb);
  std::fflush(stdout);
}

}  // namespace bench
