// test_faults.cpp — what a checkpoint survives: a flipped byte (the checksum names it), a full disk (the
// save fails and the old file stays), kill -9 in the middle of a save (the old file stays loadable, and the
// next run clears the temporary file), and files from other tools (no checksum: they load as before).
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/autograd.h"
#include "nn/safetensors.h"
#include "test_helpers.h"
#include "test_process.h"

using namespace autograd;
namespace fs = std::filesystem;
using testing_process::scratch;
using testing_process::slurp;

namespace {

void write_bytes(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// Temporary files that a save of `target` left next to it.
std::vector<fs::path> temp_files_of(const fs::path& target) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(target.parent_path()))
    if (entry.path().filename().string().starts_with(target.filename().string() + ".tmp-")) found.push_back(entry.path());
  return found;
}

std::string load_error(const fs::path& p) {
  try {
    nn::load_safetensors(p);
  } catch (const nn::CheckpointError& e) {
    return e.what();
  }
  return "";
}

nn::NamedTensors some_tensors(int64_t n) { return {{"w", arange(0, double(n)).view({-1, 1})}, {"b", ones({3})}}; }

}  // namespace

TEST(Checksum, EveryFlippedByteOfACheckpointIsReported) {
  const fs::path p = scratch("flip.safetensors");
  nn::save_safetensors(p, some_tensors(6), {{"note", "hello"}});
  const std::string good = slurp(p);
  ASSERT_NE(good.find("scratchgrad.checksum"), std::string::npos);
  const size_t data_start = 8 + size_t(static_cast<unsigned char>(good[0])) + (size_t(static_cast<unsigned char>(good[1])) << 8);
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = char(bad[i] ^ 0x01);
    write_bytes(p, bad);
    const std::string error = load_error(p);
    EXPECT_FALSE(error.empty()) << "byte " << i << " of " << good.size() << " flipped, and the file still loaded";
    if (i >= data_start) {
      EXPECT_NE(error.find("checksum mismatch"), std::string::npos) << "byte " << i << ": " << error;
    }
  }
  write_bytes(p, good);
  const nn::Checkpoint ck = nn::load_safetensors(p);
  EXPECT_EQ(ck.metadata.size(), 1u) << "the checksum is not handed back as metadata";
  EXPECT_EQ(ck.metadata.at("note"), "hello");
  EXPECT_THROW_WITH(nn::save_safetensors(p, some_tensors(2), {{"scratchgrad.checksum", "x"}}), nn::CheckpointError,
                    "reserved");
}

TEST(Checksum, AFileWithoutOneStillLoads) {
  // What another safetensors writer makes: the same layout, no checksum in the metadata.
  const std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}})";
  std::string file(8, '\0');
  file[0] = char(header.size());
  file += header;
  const float values[2] = {1.5f, -2.0f};
  file.append(reinterpret_cast<const char*>(values), sizeof values);
  const fs::path p = scratch("foreign.safetensors");
  write_bytes(p, file);
  const nn::Checkpoint ck = nn::load_safetensors(p);
  EXPECT_EQ(ck.tensors.at(0).second.select(0, 1).item(), -2.0);
  EXPECT_EQ(ck.metadata.at("k"), "v");
}

TEST(Faults, AWriteThatFailsKeepsThePreviousFile) {
  // A file-size limit makes write(2) fail with EFBIG half way, as a full disk fails with ENOSPC. In a child
  // process, so the limit stays there.
  const fs::path p = scratch("limited.safetensors");
  nn::save_safetensors(p, some_tensors(4));
  const std::string before = slurp(p);
  const pid_t child = ::fork();
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      nn::save_safetensors(p, some_tensors(100000));
    } catch (const nn::CheckpointError& e) {
      const std::string what = e.what();
      ::_exit(what.find("write failed") != std::string::npos && what.find("previous file is kept") != std::string::npos ? 0 : 2);
    }
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the save did not fail; 2: its message did not say why";
  EXPECT_EQ(slurp(p), before);
  EXPECT_TRUE(temp_files_of(p).empty());
}

TEST(Faults, AFullDiskFailsTheSaveCleanly) {
  const fs::path disk = scratch("small_disk");
  fs::create_directories(disk);
  if (::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=64k") != 0) GTEST_SKIP() << "cannot mount a tmpfs here (not root?)";
  const fs::path p = disk / "model.safetensors";
  nn::save_safetensors(p, some_tensors(4));
  const std::string before = slurp(p);
  EXPECT_THROW_WITH(nn::save_safetensors(p, some_tensors(100000)), nn::CheckpointError, p.string(), "write failed",
                    "No space left on device", "previous file is kept");
  EXPECT_EQ(slurp(p), before);
  EXPECT_TRUE(temp_files_of(p).empty());
  EXPECT_EQ(nn::load_safetensors(p).tensors.at(0).second.numel(), 4);
  ::umount(disk.c_str());
}

TEST(Faults, TempFilesOfProcessesThatAreGoneAreCleared) {
  const fs::path p = scratch("stale.safetensors");
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  const fs::path stale = p.string() + ".tmp-" + std::to_string(gone) + "-0badc0de";
  const fs::path live = p.string() + ".tmp-" + std::to_string(::getpid()) + "-0badc0de";
  write_bytes(stale, "half a file");
  write_bytes(live, "another save, still running");
  nn::save_safetensors(p, some_tensors(2));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live)) << "a live process's temporary file is never touched";
  fs::remove(live);
}

// kill -9 while the trainer writes its checkpoint (the GPT's, with the optimizer state): the moment is
// found by watching for the temporary file, then the kill comes 0 to a few hundred µs later. Whether it lands
// before the save's rename is a race (on a loaded machine the watcher may see the file late), so after the
// first four runs more are made, up to twenty, until one has landed; every run's checkpoint must load.
TEST(Faults, KillNineDuringASaveLeavesTheLastCheckpointLoadable) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "pack my box with five dozen liquor jugs. ";
  const fs::path corpus = scratch("kill_corpus.txt");
  write_bytes(corpus, text);
  const fs::path ck = scratch("killed.safetensors");
  const std::string bin = std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad";
  int caught_mid_save = 0;
  for (int attempt = 0; attempt < 4 || (caught_mid_save == 0 && attempt < 20); ++attempt) {
    const pid_t trainer = ::fork();
    if (trainer == 0) {
      if (!::freopen("/dev/null", "w", stdout)) ::_exit(126);
      ::execl(bin.c_str(), bin.c_str(), "train", "--model", "gpt", "--preset", "tiny", "--steps", "400", "--batch", "2",
              "--save", ck.c_str(), "--save-every", "1", "--text", corpus.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    bool seen = false, exited = false;
    while (!seen && !exited) {
      seen = fs::exists(ck) && !temp_files_of(ck).empty();
      exited = !seen && ::waitpid(trainer, &status, WNOHANG) == trainer;
    }
    if (seen) {
      std::this_thread::sleep_for(std::chrono::microseconds(100 * (attempt % 4)));
      ::kill(trainer, SIGKILL);
      ::waitpid(trainer, &status, 0);
      caught_mid_save += !temp_files_of(ck).empty();
    }
    const nn::Checkpoint last = nn::load_safetensors(ck);  // whole, and its checksum holds
    EXPECT_EQ(last.metadata.at("format"), "scratchgrad-gpt");
  }
  EXPECT_GE(caught_mid_save, 1) << "no kill landed while a temporary file was being written";
  testing_process::Shell resumed = testing_process::shell(bin + " train --resume " + ck.string());
  EXPECT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resuming"), std::string::npos) << resumed.out;
  EXPECT_TRUE(temp_files_of(ck).empty()) << "the next run clears what the killed ones left";
}

// A CUDA build's CPU run: the dynamic loader reports every library it opens (LD_DEBUG=files), dlopen'ed
// ones included, and none of CUDA's may be among them.
TEST(Devices, ACpuRunOfACudaBuildOpensNoCudaLibrary) {
#ifndef SCRATCHGRAD_HAS_CUDA
  GTEST_SKIP() << "a CPU-only build";
#else
  const std::string bin = std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad";
  testing_process::Shell run = testing_process::shell("LD_DEBUG=files " + bin + " train --steps 3 --eval-every 1");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("libblis"), std::string::npos) << "LD_DEBUG printed nothing: " << run.err.substr(0, 300);
  for (const char* library : {"libcublas", "libcudart", "libcuda.so"})
    EXPECT_EQ(run.err.find(library), std::string::npos) << library << " was opened by a CPU run";
#endif
}
