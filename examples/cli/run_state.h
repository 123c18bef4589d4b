// run_state.h — a GPT training run's state in its checkpoint, for --save-every and --resume: the step
// reached, the schedule's position, the generator's state and every training option, so that a resumed run
// draws the same batches and ends as the uninterrupted one; and the checks a resumed run makes on its text.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "corpus.h"
#include "nn/gpt.h"
#include "options.h"

namespace cli {

// A GPT's or a Llama's run metadata (model_files.h: gpt_metadata, llama_metadata): a char run's records its
// characters and sample prompt; a bpe or gpt2 run's carries its tokenizer and the sample's prompt as ids.
std::map<std::string, std::string> decoder_metadata(const nn::LanguageModel& model, const Corpus& corpus, int64_t T,
                                                    int64_t steps);

// The generator's state as hex, and back (CheckpointError naming `path` for malformed hex).
std::string hex_of(const std::vector<uint8_t>& bytes);
std::vector<uint8_t> bytes_of(const std::string& hex, const std::string& path);

// The run's options and progress as "run.*" metadata.
std::map<std::string, std::string> run_metadata(const TrainOptions& o, const Corpus& corpus, int64_t steps_done,
                                                int64_t schedule_epoch);

// --resume: the saved run's options. The command line gives --resume, and may add --steps (to extend the
// run) and settings that leave the run's model, data and recipe alone (guards.h: flags_fixed_by_resume).
// Its text is read again from the absolute path recorded, unless --text names another.
TrainOptions resumed_options(TrainOptions o);

// A resumed run must train on the text it started on (the embedding's rows are its characters): the text
// given must have the size and hash the checkpoint recorded, unless --allow-other-text; then its
// characters are numbered as the checkpoint's vocabulary numbers them, and one outside it is refused.
void check_resumed_text(const TrainOptions& o, Corpus& corpus);

// The text's characters numbered as `saved` (a checkpoint's vocabulary) numbers them; a character outside
// it is refused (UsageError).
void use_vocabulary(Corpus& corpus, const std::u32string& saved);

}  // namespace cli
