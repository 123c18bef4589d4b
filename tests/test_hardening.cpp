// test_hardening.cpp — the trainer against crafted files, edited run state, clashing output paths, runs
// that diverge and sizes too big for the machine: each is refused with one line and exit status 2 (or,
// where a run can go on, it does so and says how), never a crash, a hang or a silently wrong result.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <functional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "autograd/autograd.h"
#include "autograd/cpu/runtime/buffer_cache.h"
#include "guards.h"
#include "nn/safetensors.h"
#include "test_helpers.h"
#include "test_process.h"
#include "text.h"

using namespace autograd;
namespace fs = std::filesystem;
using testing_process::Shell;
using testing_process::scratch;
using testing_process::slurp;

namespace {

Shell scratchgrad(const std::string& args) {
  return testing_process::shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad " + args);
}

fs::path write_file(const std::string& name, const std::string& contents) {
  const fs::path p = scratch(name);
  std::ofstream(p, std::ios::binary | std::ios::trunc) << contents;
  return p;
}

int count_lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

// Status 2 and one line on stderr naming `needle`, as every refused input gets.
void expect_refused(const Shell& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.command << "\n" << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("scratchgrad: error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  const size_t program = r.command.find("/bin/scratchgrad ");
  const std::string call = program == std::string::npos ? r.command : r.command.substr(program + 5);
  testing_helpers::record_refusal(call, r.err.substr(0, r.err.find('\n')));
}

std::string with_length_prefix(const std::string& header) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return bytes + header;
}

std::string load_error(const fs::path& p) {
  try {
    nn::load_safetensors(p.string());
  } catch (const nn::CheckpointError& e) {
    return e.what();
  }
  return "";
}

std::string pangrams(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += "pack my box with five dozen liquor jugs. ";
  return text;
}

// A short GPT run with its run state saved (made once per test process).
const fs::path& gpt_run_checkpoint() {
  static const fs::path ck = [] {
    const fs::path text = write_file("run_text.txt", pangrams(20));
    const fs::path path = scratch("run.safetensors");
    const Shell r = scratchgrad("train --model gpt --preset tiny --steps 4 --warmup 1 --batch 2 --sample 0 --text " +
                                text.string() + " --save " + path.string());
    EXPECT_EQ(r.status, 0) << r.err;
    return path;
  }();
  return ck;
}

// The run checkpoint with `edit` applied to its metadata and tensors, re-signed (a valid checksum).
fs::path edited_run(const std::string& name, const std::function<void(nn::Checkpoint&)>& edit) {
  nn::Checkpoint ck = nn::load_safetensors(gpt_run_checkpoint().string());
  edit(ck);
  const fs::path out = scratch(name);
  nn::save_safetensors(out.string(), ck.tensors, ck.metadata);
  return out;
}

}  // namespace

// ---------------------------------------------------------------- 1. crafted files and streams

TEST(Hardening, RefusesADeeplyNestedHeaderBeforeParsingIt) {
  // an extra field nested 100,000 deep in a tensor entry, with a checksum key (whose check dumps the JSON)
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":)" + deep +
                             R"(},"__metadata__":{"scratchgrad.checksum":"fnv1a64:0000000000000000"}})";
  const fs::path p = write_file("deep.safetensors", with_length_prefix(header) + std::string(4, '\0'));
  EXPECT_THROW_WITH(nn::load_safetensors(p.string()), nn::CheckpointError, "more than 64 levels");
  expect_refused(scratchgrad("info --checkpoint " + p.string()), "more than 64 levels");
  expect_refused(scratchgrad("generate --checkpoint " + p.string()), "more than 64 levels");
  // brackets inside strings are not nesting: 100 of them in a metadata value load fine
  const std::string quoted = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"__metadata__":{"note":")" +
                             std::string(100, '[') + R"(\""}})";
  const fs::path q = write_file("quoted.safetensors", with_length_prefix(quoted) + std::string(4, '\0'));
  EXPECT_EQ(nn::load_safetensors(q.string()).metadata.at("note"), std::string(100, '[') + "\"");
}

TEST(Hardening, RefusesDevicesHugeHeadersAndBytesNoTensorCovers) {
  EXPECT_THROW_WITH(nn::load_safetensors("/dev/zero"), nn::CheckpointError, "/dev/zero", "not a regular file");
  expect_refused(scratchgrad("info --checkpoint /dev/zero"), "not a regular file");
  // a header length over the limit, in a (sparse) file big enough to hold it
  const fs::path big = write_file("big_header.safetensors", with_length_prefix(std::string(16, ' ')).substr(0, 8));
  {
    std::string length(8, '\0');
    for (int i = 0; i < 8; ++i) length[size_t(i)] = char((uint64_t(200'000'000) >> (8 * i)) & 0xff);
    std::ofstream(big, std::ios::binary | std::ios::trunc) << length;
    fs::resize_file(big, 300'000'000);
  }
  EXPECT_THROW_WITH(nn::load_safetensors(big.string()), nn::CheckpointError, "header length 200000000",
                    "limit of 100000000");
  // a real checkpoint grown to 30 GB (sparse): refused from its header, without reading the rest
  nn::save_safetensors(scratch("sparse.safetensors").string(), {{"w", ones({2, 2})}});
  fs::resize_file(scratch("sparse.safetensors"), uint64_t(30) << 30);
  EXPECT_THROW_WITH(nn::load_safetensors(scratch("sparse.safetensors").string()), nn::CheckpointError,
                    "bytes follow the last tensor's data");
  fs::remove(scratch("sparse.safetensors"));
  fs::remove(big);
}

TEST(Hardening, RefusesTextsThatAreNotRegularFilesOrTooBig) {
  expect_refused(scratchgrad("train --text /dev/zero"), "not a regular file");
  const fs::path huge = scratch("huge.txt");
  std::ofstream(huge).put('a');
  fs::resize_file(huge, cli::kMaxTextBytes + 1);  // sparse
  expect_refused(scratchgrad("train --text " + huge.string()), "over the limit of 1073741824 bytes");
  fs::remove(huge);
}

TEST(Hardening, RefusesInvalidUtf8NamingTheFile) {
  const fs::path bad = write_file("bad_utf8.txt", "abcdefghijkl\xff");
  expect_refused(scratchgrad("train --text " + bad.string()), bad.string() + ": text is not valid UTF-8");
}

TEST(Hardening, TextIsTokenizedInChunksWithCharactersAcrossTheirEdges) {
  // 3-byte characters from offset 1: some straddle each 1 MiB chunk boundary
  std::string text = "a";
  while (text.size() < (size_t(3) << 20)) text += "\xE2\x82\xAC" "b";  // € b
  const fs::path p = write_file("euro.txt", text);
  const cli::TokenizedText t = cli::read_tokenized_text(p.string());
  EXPECT_EQ(t.vocab.chars(), U"ab\u20AC");
  ASSERT_EQ(t.ids.size(), cli::decode_utf8(text).size());
  EXPECT_EQ(t.ids[0], 0);
  EXPECT_EQ(t.ids[1], 2);
  EXPECT_EQ(t.ids[2], 1);
  EXPECT_EQ(t.bytes, text.size());
  EXPECT_EQ(t.hash, cli::tokenize_text(text, "memory").hash);
  EXPECT_THROW_WITH(cli::tokenize_text("ab\xE2\x82", "the prompt"), cli::UsageError, "the prompt: ", "offset 2");
}

// A 40 MB text is kept as 2-byte ids: the run's peak memory stays a small multiple of the file.
TEST(Hardening, ALargeTextIsKeptInTokenForm) {
  std::string text;
  while (text.size() < (size_t(40) << 20)) text += pangrams(100);
  const fs::path p = write_file("large.txt", text);
  text.clear();
  const Shell r = testing_process::shell("/usr/bin/env time -f '%M' " + std::string(SCRATCHGRAD_BIN_DIR) +
                                         "/scratchgrad train --steps 1 --sample 0 --text " + p.string());
  fs::remove(p);
  if (r.status != 0 && r.err.find("time") != std::string::npos) GTEST_SKIP() << "no /usr/bin/time: " << r.err;
  ASSERT_EQ(r.status, 0) << r.err;
  const long peak_kb = std::stol(r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1));
  EXPECT_LT(peak_kb, 6 * 40 * 1024) << "peak " << peak_kb << " kB for a 40 MB text";
}

TEST(Hardening, RefusesACheckpointWhoseVocabularyRepeatsACharacter) {
  const fs::path ck = scratch("vocab.safetensors");
  ASSERT_EQ(scratchgrad("train --steps 2 --save " + ck.string()).status, 0);
  nn::Checkpoint c = nn::load_safetensors(ck.string());
  std::string& vocab = c.metadata.at("vocab");
  vocab[vocab.size() - 1] = vocab[vocab.size() - 2];  // the same count of characters, one of them twice
  nn::save_safetensors(ck.string(), c.tensors, c.metadata);
  expect_refused(scratchgrad("generate --checkpoint " + ck.string()), "twice");
}

// ---------------------------------------------------------------- 2. resume

TEST(Hardening, RefusesEditedRunState) {
  int edits = 0;
  auto with = [&](const std::string& key, const std::string& value) {
    return edited_run("state_" + std::to_string(++edits) + ".safetensors",
                      [&](nn::Checkpoint& c) { c.metadata[key] = value; });
  };
  for (const char* bad : {"abc", "99999999999999999999", "-5", "5"})  // 5: past the run's 4 steps
    expect_refused(scratchgrad("train --resume " + with("run.steps_done", bad).string()), "run.steps_done");
  expect_refused(scratchgrad("train --resume " + with("run.generator", "00").string()), "run.generator");
  expect_refused(scratchgrad("train --resume " + with("run.schedule_epoch", "9000000000000000000").string()),
                 "run.schedule_epoch");
  expect_refused(scratchgrad("train --resume " + with("run.lr", "nan").string()), "run.lr");
  const fs::path no_moments = edited_run("no_optimizer.safetensors", [](nn::Checkpoint& c) {
    std::erase_if(c.tensors, [](const auto& named) { return named.first.starts_with("optimizer."); });
  });
  expect_refused(scratchgrad("train --resume " + no_moments.string()), "optimizer");
}

TEST(Hardening, RefusesFlagsThatCannotChangeAResumedRun) {
  const std::string ck = gpt_run_checkpoint().string();
  expect_refused(scratchgrad("train --resume " + ck + " --dim 64"), "--dim cannot change a resumed run");
  expect_refused(scratchgrad("train --resume " + ck + " --lr 0.5"), "--lr cannot change");
  expect_refused(scratchgrad("train --resume " + ck + " --layers 4"), "--steps (to extend the run)");
  expect_refused(scratchgrad("train --resume " + ck + " --steps 2"), "below the 4 steps");
  expect_refused(scratchgrad("train --allow-other-text"), "--allow-other-text is for --resume");
}

TEST(Hardening, AResumedRunCanBeExtendedWithSteps) {
  const fs::path ck = scratch("extend.safetensors");
  fs::copy_file(gpt_run_checkpoint(), ck, fs::copy_options::overwrite_existing);
  const Shell r = scratchgrad("train --resume " + ck.string() + " --steps 6 --save " + ck.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("at step 4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step   5"), std::string::npos) << r.out;
  EXPECT_EQ(nn::load_safetensors(ck.string()).metadata.at("run.steps_done"), "6");
}

TEST(Hardening, AResumedRunRecordsAndChecksItsText) {
  const nn::Checkpoint c = nn::load_safetensors(gpt_run_checkpoint().string());
  EXPECT_TRUE(fs::path(c.metadata.at("run.text")).is_absolute()) << c.metadata.at("run.text");
  EXPECT_EQ(c.metadata.at("run.text_hash").size(), 16u);
  EXPECT_EQ(c.metadata.at("run.text_bytes"), std::to_string(pangrams(20).size()));
  // the same characters in another order: another text
  std::string other = pangrams(20);
  std::reverse(other.begin(), other.end());
  const fs::path other_text = write_file("other_text.txt", other);
  const std::string ck = gpt_run_checkpoint().string();
  expect_refused(scratchgrad("train --resume " + ck + " --text " + other_text.string()), "--allow-other-text");
  const Shell allowed = scratchgrad("train --resume " + ck + " --steps 5 --text " + other_text.string() +
                                    " --allow-other-text");
  EXPECT_EQ(allowed.status, 0) << allowed.err;
  // a character the model does not know cannot be trained on even then
  const fs::path unknown = write_file("unknown_text.txt", pangrams(20) + "Z");
  expect_refused(scratchgrad("train --resume " + ck + " --steps 5 --allow-other-text --text " + unknown.string()), "'Z'");
  // from another folder, the recorded absolute path still finds the run's own text
  const Shell elsewhere = testing_process::shell("cd / && " + std::string(fs::absolute(SCRATCHGRAD_BIN_DIR)) +
                                                 "/scratchgrad train --resume " + ck + " --steps 5");
  EXPECT_EQ(elsewhere.status, 0) << elsewhere.err;
}

// ---------------------------------------------------------------- 3. where output goes

TEST(Hardening, RefusesTwoFlagsNamingOneFile) {
  const fs::path text = write_file("clash.txt", pangrams(2));
  const fs::path m = scratch("clash.safetensors");
  expect_refused(scratchgrad("train --text " + text.string() + " --save " + text.string()), "name the same file");
  expect_refused(scratchgrad("train --save " + m.string() + " --plot " + m.string()), "--save");
  expect_refused(scratchgrad("train --save " + m.string() + " --graph " + m.string()), "--graph");
  expect_refused(testing_process::shell("cd " + m.parent_path().string() + " && " +
                                        std::string(fs::absolute(SCRATCHGRAD_BIN_DIR)) +
                                        "/scratchgrad train --save clash.safetensors --graph ./clash.safetensors"),
                 "name the same file");
  const fs::path link = scratch("clash_hardlink.txt");
  fs::remove(link);
  fs::create_hard_link(text, link);
  expect_refused(scratchgrad("train --text " + text.string() + " --plot " + link.string()), "name the same file");
  EXPECT_EQ(slurp(text), pangrams(2)) << "the text must be left alone";
}

TEST(Hardening, RefusesSavingOntoDevicesAndFifosAndWritesThroughSymlinks) {
  expect_refused(scratchgrad("train --steps 2 --save /dev/null"), "not a regular file");
  const fs::path fifo = scratch("a.fifo");
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  expect_refused(scratchgrad("train --steps 2 --save " + fifo.string()), "not a regular file");
  EXPECT_TRUE(fs::is_fifo(fifo));
  const fs::path target = scratch("link_target.safetensors"), link = scratch("link.safetensors");
  fs::remove(link), fs::remove(target);
  fs::create_symlink(target, link);
  const Shell r = scratchgrad("train --steps 2 --save " + link.string());  // a link to a file not made yet
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(link)) << "the link stays";
  EXPECT_EQ(nn::load_safetensors(target.string()).metadata.at("steps"), "2");
}

TEST(Hardening, AFileSizeLimitGivesACleanErrorAndNoTempFile) {
  const fs::path ck = scratch("limited.safetensors");
  fs::remove(ck);
  const fs::path text = write_file("limited.txt", pangrams(20));
  const Shell r = testing_process::shell("ulimit -f 16 && " + std::string(SCRATCHGRAD_BIN_DIR) +
                                         "/scratchgrad train --model gpt --preset tiny --steps 2 --warmup 1 --sample 0 --text " +
                                         text.string() + " --save " + ck.string());
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("File too large"), std::string::npos) << r.err;
  for (const auto& entry : fs::directory_iterator(ck.parent_path()))
    EXPECT_FALSE(entry.path().filename().string().starts_with("limited.safetensors")) << entry.path();
}

// ---------------------------------------------------------------- 4. NaN, infinity and memory

TEST(Hardening, ADivergingRunStopsAndKeepsItsLastGoodCheckpoint) {
  const fs::path text = write_file("diverge.txt", pangrams(20));
  const fs::path ck = scratch("diverge.safetensors");
  fs::remove(ck);
  const Shell r = scratchgrad("train --model gpt --preset tiny --steps 40 --warmup 1 --batch 2 --clip 0 --lr 1e6 "
                              "--save-every 1 --text " + text.string() + " --save " + ck.string());
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("the run diverged"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("smaller --lr"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  if (fs::exists(ck)) {  // whatever was kept loads, with finite parameters
    EXPECT_EQ(load_error(ck), "");
    EXPECT_EQ(scratchgrad("generate --tokens 3 --checkpoint " + ck.string()).status, 0);
  }
}

TEST(Hardening, RefusesACheckpointHoldingNaN) {
  const fs::path ck = edited_run("nan.safetensors", [](nn::Checkpoint& c) {
    for (auto& [name, t] : c.tensors)
      if (name == "tok_emb.weight") t = t.clone().fill_(std::nan(""));
  });
  expect_refused(scratchgrad("generate --checkpoint " + ck.string()), "NaN or infinite");
  expect_refused(scratchgrad("train --resume " + ck.string()), "NaN or infinite");
}

TEST(Hardening, ATinyTemperatureSamplesLikeGreedy) {
  const std::string ck = gpt_run_checkpoint().string();
  const Shell greedy = scratchgrad("generate --tokens 20 --checkpoint " + ck);
  const Shell tiny = scratchgrad("generate --tokens 20 --temperature 1e-300 --checkpoint " + ck);
  ASSERT_EQ(greedy.status, 0) << greedy.err;
  EXPECT_EQ(tiny.out, greedy.out);
  const Shell huge = scratchgrad("generate --tokens 20 --temperature 1e300 --checkpoint " + ck);
  EXPECT_EQ(huge.status, 0) << huge.err;
}

TEST(Hardening, GeneratedTextIsPrintedAsItIsMadeAndALongRunSaysHowLongItTakes) {
  // killed after 3 s of a run that would take hours: what it made so far is already out, and after 2 s it
  // said how long the whole would take
  const Shell r = testing_process::shell("timeout 3 " + std::string(SCRATCHGRAD_BIN_DIR) +
                                         "/scratchgrad generate --tokens 1000000000 --checkpoint " +
                                         gpt_run_checkpoint().string());
  EXPECT_GT(r.out.size(), 40u) << r.out;
  EXPECT_NE(r.err.find("(generate: 1000000000 tokens at "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" in all; Ctrl-C stops)"), std::string::npos) << r.err;
  // a short one says nothing
  const Shell short_run = scratchgrad("generate --tokens 20 --checkpoint " + gpt_run_checkpoint().string());
  EXPECT_EQ(short_run.err.find("(generate:"), std::string::npos) << short_run.err;
}

TEST(Hardening, RefusesNumbersPastInt64) {
  expect_refused(scratchgrad("train --steps 99999999999999999999"), "out of range");
  expect_refused(scratchgrad("generate --checkpoint x --tokens 99999999999999999999"), "out of range");
  EXPECT_EQ(cli::integer_problem("9223372036854775807"), "");
  EXPECT_NE(cli::integer_problem("9223372036854775808"), "");
  EXPECT_EQ(cli::integer_problem("-5"), "");
  expect_refused(scratchgrad("train --seed 99999999999999999999"), "--seed: 99999999999999999999 is out of range");
  expect_refused(scratchgrad("train --seed -1"), "--seed: -1 is not a whole number");
  EXPECT_EQ(cli::seed_problem("18446744073709551615"), "");
}

// (not a Refuses* test: the message names this machine's memory, so it stays out of the doc's catalog)
TEST(Hardening, ModelsTooBigForTheMachineAreRefusedWithTheirSize) {
  expect_refused(scratchgrad("train --dim 100000"), "bytes");
  expect_refused(scratchgrad("train --batch 1000000000000"), "bytes");
  // under ulimit -v the limit is what counts, and nothing aborts (AddressSanitizer's shadow memory cannot
  // be mapped under a ulimit -v at all, so a sanitizer build leaves this part out)
#if !defined(__SANITIZE_ADDRESS__)
  const Shell r = testing_process::shell("ulimit -v 1000000 && " + std::string(SCRATCHGRAD_BIN_DIR) +
                                         "/scratchgrad train --model gpt --context 8 --layers 20000");
  expect_refused(r, "bytes");
#endif
}

TEST(Hardening, ThreadsAreCappedAndSaySo) {
  expect_refused(scratchgrad("train --threads 100000"), "--threads must be from 1 to 1024");
  const Shell r = scratchgrad("train --steps 2 --threads 1024");
  ASSERT_EQ(r.status, 0) << r.err;
  if (std::thread::hardware_concurrency() < 1024) {
    EXPECT_NE(r.out.find("note: --threads 1024"), std::string::npos) << r.out;
  }
}

TEST(Hardening, DeallocationNeverThrows) {
  // it runs in destructors during unwinding: a throw there (its free list growing under bad_alloc) aborts
  static_assert(noexcept(cpu::cached_deallocate(nullptr, 0)));
}

// ---------------------------------------------------------------- 5. under mpirun

TEST(Hardening, AParseErrorIsPrintedByRankZeroOnly) {
  // every rank parses the same command line: the launcher's rank variable says which one this is
  const Shell other = testing_process::shell("OMPI_COMM_WORLD_RANK=1 " + std::string(SCRATCHGRAD_BIN_DIR) +
                                             "/scratchgrad train --bogus 1");
  EXPECT_EQ(other.status, 2);
  EXPECT_EQ(other.err, "");
  const Shell root = testing_process::shell("OMPI_COMM_WORLD_RANK=0 " + std::string(SCRATCHGRAD_BIN_DIR) +
                                            "/scratchgrad train --bogus 1");
  EXPECT_EQ(root.status, 2);
  EXPECT_NE(root.err.find("bogus"), std::string::npos) << root.err;
}
