// checks.h — the rungs whose checks have files of their own: the models made of the learner's pieces and
// trained on the learner's engine (check.cpp holds the ladder and rungs 1 to 13).
#pragma once

namespace checks {

void rung_14();  // check_char_model.cpp: the workshop's character model, to PyTorch's printed losses
void rung_15();  // check_gpt_block.cpp: one GPT block, against the book's nn::TransformerBlock

}  // namespace checks
