// train.cpp — learning BPE merges from a text, minbpe's algorithm made fast in the two ways that matter:
//
// 1. Deduplicated chunks. A text of a million bytes has only tens of thousands of distinct chunks (" the"
//    occurs thousands of times); each distinct chunk is stored once, with how often it occurs as its weight.
// 2. Incremental pair counts. Merging pair (a, b) into token n only changes the pairs around each place
//    where (a, b) occurs: (x, a) becomes (x, n) and (b, y) becomes (n, y). We keep, for every pair, its
//    weighted count and the places where it occurs, and update just those instead of recounting all.
//
// The most frequent pair comes from a max-heap whose stale entries (counts changed since) are skipped.
#include <algorithm>
#include <queue>
#include <unordered_map>

#include "nn/tokenizer/tokenizer.h"

namespace tokenizer {

namespace {

uint64_t key_of(int32_t left, int32_t right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }
int32_t left_of(uint64_t key) { return int32_t(key >> 32); }
int32_t right_of(uint64_t key) { return int32_t(key & 0xFFFFFFFF); }

// All distinct chunks of the text, one after another: symbol[p] is the token at place p (or kGone once
// merged into its left neighbour), next/prev link the tokens of one chunk (kNone at its ends), weight[p]
// is how often the chunk occurs in the text.
constexpr int32_t kGone = -1, kNone = -1;

struct Corpus {
  std::vector<int32_t> symbol, next, prev;
  std::vector<int64_t> weight;
};

struct PairStats {
  int64_t count = 0;
  std::vector<int32_t> places;  // where the pair's left token was, when the pair formed (some are stale)
};

// A heap entry: the most frequent pair first; a tie goes to the smallest (left, right) ids.
struct Candidate {
  int64_t count;
  uint64_t key;
  bool operator<(const Candidate& other) const {
    return count != other.count ? count < other.count : key > other.key;
  }
};

Corpus deduplicated_chunks(std::string_view text, const TrainOptions& options) {
  // Special tokens are cut out first: no merge ever spans one.
  std::vector<std::string_view> pieces{text};
  for (const std::string& special : options.specials) {
    std::vector<std::string_view> cut;
    for (std::string_view piece : pieces) {
      for (size_t at; (at = piece.find(special)) != std::string_view::npos; piece.remove_prefix(at + special.size()))
        cut.push_back(piece.substr(0, at));
      cut.push_back(piece);
    }
    pieces = std::move(cut);
  }
  std::unordered_map<std::string_view, int64_t> counts;
  std::vector<std::string_view> order;  // first occurrence order, so that training is deterministic
  for (std::string_view piece : pieces)
    for (std::string_view chunk : split_chunks(piece, options.pattern))
      if (counts[chunk]++ == 0) order.push_back(chunk);

  Corpus c;
  for (std::string_view chunk : order) {
    const int32_t start = int32_t(c.symbol.size()), end = start + int32_t(chunk.size());
    const int64_t weight = counts[chunk];
    for (int32_t p = start; p < end; ++p) {
      c.symbol.push_back(static_cast<unsigned char>(chunk[p - start]));
      c.next.push_back(p + 1 < end ? p + 1 : kNone);
      c.prev.push_back(p > start ? p - 1 : kNone);
      c.weight.push_back(weight);
    }
  }
  return c;
}

}  // namespace

Tokenizer train(std::string_view text, const TrainOptions& options) {
  const int base = 256 + int(options.specials.size());
  if (text.empty()) throw TokenizerError("bpe: the training text is empty");
  if (options.vocab_size < base)
    throw TokenizerError("bpe: a vocabulary of " + std::to_string(options.vocab_size) + " is too small: it needs 256 byte tokens" +
                         (options.specials.empty() ? std::string() : " and " + std::to_string(options.specials.size()) + " special tokens"));
  for (size_t i = 0; i < options.specials.size(); ++i) {
    const std::string& s = options.specials[i];
    if (s.empty()) throw TokenizerError("bpe: a special token cannot be empty");
    if (std::find(options.specials.begin(), options.specials.begin() + i, s) != options.specials.begin() + i)
      throw TokenizerError("bpe: special token \"" + escape_bytes(s) + "\" given twice");
  }
  const int merge_count = options.vocab_size - base;

  Corpus c = deduplicated_chunks(text, options);
  if (c.symbol.empty()) throw TokenizerError("bpe: the training text holds nothing but special tokens");
  std::unordered_map<uint64_t, PairStats> pairs;
  std::priority_queue<Candidate> heap;
  for (int32_t p = 0; p < int32_t(c.symbol.size()); ++p) {
    if (c.next[p] == kNone) continue;
    PairStats& s = pairs[key_of(c.symbol[p], c.symbol[c.next[p]])];
    s.count += c.weight[p];
    s.places.push_back(p);
  }
  for (const auto& [key, s] : pairs) heap.push({s.count, key});

  std::vector<uint64_t> changed;  // pairs whose count a merge changed: their new counts go on the heap
  const auto add = [&](int32_t place, int32_t left, int32_t right, int64_t weight) {
    const uint64_t key = key_of(left, right);
    PairStats& s = pairs[key];
    s.count += weight;
    if (weight > 0) s.places.push_back(place);
    changed.push_back(key);
  };

  std::vector<Merge> merges;
  for (int k = 0; k < merge_count; ++k) {
    // The most frequent pair, skipping heap entries whose count has changed since they were pushed.
    while (!heap.empty() && (heap.top().count <= 0 || pairs[heap.top().key].count != heap.top().count)) heap.pop();
    if (heap.empty())
      throw TokenizerError("bpe: a vocabulary of " + std::to_string(options.vocab_size) + " is larger than this text allows: it has " +
                           "no pair of tokens left to merge after " + std::to_string(k) + " merges (at most " +
                           std::to_string(base + k) + " tokens)");
    const Candidate best = heap.top();
    heap.pop();
    const int32_t a = left_of(best.key), b = right_of(best.key), n = 256 + k;

    std::vector<int32_t> places = std::move(pairs[best.key].places);
    std::sort(places.begin(), places.end());  // left to right, so "a a a" merges as (a a) a
    places.erase(std::unique(places.begin(), places.end()), places.end());
    changed.clear();
    for (int32_t p : places) {
      const int32_t q = c.next[p];
      if (c.symbol[p] != a || q == kNone || c.symbol[q] != b) continue;  // no longer (a, b) here
      const int64_t w = c.weight[p];
      const int32_t before = c.prev[p], after = c.next[q];
      if (before != kNone) add(before, c.symbol[before], a, -w);
      if (after != kNone) add(q, b, c.symbol[after], -w);
      add(p, a, b, -w);
      c.symbol[p] = n;
      c.symbol[q] = kGone;
      c.next[p] = after;
      if (after != kNone) c.prev[after] = p;
      if (before != kNone) add(before, c.symbol[before], n, +w);
      if (after != kNone) add(p, n, c.symbol[after], +w);
    }
    pairs[best.key].places.clear();
    std::sort(changed.begin(), changed.end());
    changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
    for (uint64_t key : changed) {
      const PairStats& s = pairs[key];
      if (s.count > 0) heap.push({s.count, key});
    }
    merges.push_back({a, b, n});
    if (options.on_merge) options.on_merge({k, merges.back(), best.count});
  }

  std::vector<int32_t> byte_ids(256);
  for (int i = 0; i < 256; ++i) byte_ids[i] = i;
  std::map<std::string, int32_t> specials;
  for (const std::string& s : options.specials) specials.emplace(s, int32_t(256 + merge_count + specials.size()));
  return Tokenizer(std::move(byte_ids), std::move(merges), std::move(specials), options.pattern);
}

}  // namespace tokenizer
