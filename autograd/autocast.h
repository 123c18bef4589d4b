// autocast.h — mixed precision: matrix products in bfloat16 on float32 master values, as PyTorch's
// torch.autocast("cpu", dtype=torch.bfloat16) runs them.
//
//   {
//     AutocastGuard bf16(DType::BFloat16);
//     Tensor loss = cross_entropy(model(x), y);   // products take bfloat16 operands
//   }
//   loss.backward();                                // and so do their gradients' products
//
// Inside the guard (this thread, this scope) matmul, linear and the attention products (causal_scores,
// tril_matmul, scaled_dot_product_attention) round their float32 operands to bfloat16 (recorded
// conversions), multiply with float32 sums, round the product to bfloat16 as PyTorch's autocast output is,
// and hand it on widened to float32. Everything else (layer_norm, softmax, the loss, AdamW, the residual
// adds) sees float32 tensors and stays in float32. The backward pass follows the graph the forward made:
// a product's gradient arrives through the widening (rounded to bfloat16), its two gradient products take
// bfloat16 operands, and each operand's gradient leaves through the rounding widened to float32 — whether
// or not a guard is active when backward() runs. docs/precision.md says where a step rounds.
#pragma once
#include "autograd/tensor.h"

namespace autograd {

class AutocastGuard {
 public:
  // BFloat16 turns the products to bfloat16; Float32 turns autocast off (a scope inside one that is on).
  explicit AutocastGuard(DType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DType previous_;
  bool had_guard_;  // an outer guard was active (else the process-wide setting applies again afterwards)
};

// The dtype products compute in when no guard says otherwise, for every thread: what the command line's
// --precision bf16 sets (BFloat16, or Float32 for none). An AutocastGuard overrides it on its thread.
void set_autocast(DType dtype);

// The dtype products compute in on this thread: an AutocastGuard's, else set_autocast's (Float32 at start).
DType autocast_dtype();

// Whether a product of these operands runs in bfloat16 now: autocast is on, both are float32 or bfloat16,
// and at least one is float32 (float32 activations meeting weights kept in bfloat16, store_in_bfloat16;
// two bfloat16 tensors multiply in bfloat16 with or without autocast).
bool autocast_applies(const Tensor& a, const Tensor& b);
// x rounded to bfloat16 (a recorded conversion: the gradient comes back widened to float32); an undefined
// tensor stays undefined. A trained weight (a float32 leaf that requires grad, contiguous, not a view) is
// rounded once and its copy kept for the next product and the next step, while the weight's version counter
// says it is unchanged: a GPT-2 step would otherwise round its 124 M weights again, a pass over 750 MB. As
// PyTorch's autocast caches a weight's cast within one autocast region, except that the copy outlives it:
// AdamW writes it in the same pass as the weight (writable_bfloat16_copy), and any other in-place write
// moves the weight's counter, so the next product rounds it afresh.
Tensor autocast_operand(const Tensor& x);

// For an optimizer that writes `weight` in place: its kept bfloat16 copy, to be written with the new values
// rounded in the same pass (Backend::adam_update_rounding), then bfloat16_copy_written(weight) after the
// weight's version has moved. Undefined when no copy is kept, or when one is still held by a graph (then
// it is dropped: a graph's saved operand is never written under it).
Tensor writable_bfloat16_copy(const Tensor& weight);
void bfloat16_copy_written(const Tensor& weight);

// Whether weights' copies are kept (true at start); false also drops those kept. The copies' memory (half
// the weights' bytes) goes with release_bfloat16_copies, or with each weight.
void set_keep_bfloat16_copies(bool keep);
bool keep_bfloat16_copies();
void release_bfloat16_copies();

// Inference on weights kept in bfloat16 (generate --precision bf16): `leaf`'s values rounded to bfloat16
// in place. Its storage is replaced, not the tensor, so every holder of it (a module's field, its parameter
// list, a head tied to the embedding) sees the bfloat16 values, in half the bytes; the float32 storage is
// freed when nothing else holds it. A bfloat16 tensor stays as it is. Throws std::invalid_argument for a
// tensor that is not a contiguous float32 leaf (a view or an op's result would change under its users).
void store_in_bfloat16(const Tensor& leaf);

}  // namespace autograd
