# tools/gdb/step-into.gdb — from backward() to the loop that computes a node's gradient, in the build of
# `make debug` (-O0 -g, CPU tensors on the reference kernels of autograd/reference/). Load it into gdb:
#
#     gdb -x tools/gdb/step-into.gdb build-debug/bin/readme_first_program
#     (gdb) backward-loop MmBackward0
#
# and gdb stops in the first loop of autograd/reference/ that MmBackward0's backward function reaches.
# `make step OP=MmBackward0` runs the same in batch mode and prints the backtrace and the loop.
# (gdb reads no comment after a command on the same line: every comment here has a line of its own.)

set pagination off
set confirm off
set print pretty on
set listsize 24

# What `step` passes over: the standard library, the tensor's accessors and handles, shapes (a small
# vector of sizes), the argument, size and byte checks, allocation, grad mode, devices and storages'
# version counters, the pool's box of a backward function, and the
# reference kernels' helpers (an element through its strides, the index odometer, the choice of a
# dtype's loop). A step then goes from a call in a backward function straight into the code that call
# names: an op, the fence, a loop. (A regular expression is matched against the name with its
# parameters, "autograd::Tensor::dim() const": hence the [(] after a list of names.)
skip -rfu ^std::
skip -rfu ^__gnu_cxx::
skip -rfu ^autograd::Tensor::(Tensor|~Tensor|operator=|defined|shape|strides|dtype|device|impl|impl_ptr|requires_grad|grad_fn|is_leaf|shape_str|size|dim|numel|offset|raw_data|is_contiguous|mT)[(]
skip -rfu ^autograd::Shape::
skip -rfu ^autograd::(operator==|operator!=|checked_numel|checked_nbytes|contiguous_strides|shape_numel|dtype_size|is_floating|wrap_dim|backend|kernels|numerics|is_grad_enabled|needs_grad)[(]
skip -rfu ^autograd::(empty|check_[a-z_]+)[(]
skip -rfu ^autograd::(NoGradGuard|Device|Storage|SavedVersion)::
skip -rfu ^autograd::memory::
skip -gfi */autograd/reference/strided.h
# the bfloat16 tests: autocast's (is a product's operand to be rounded, autocast.cpp) and the fence's
# (precision/widening_backend.cpp: is a tensor bfloat16, a float32 copy of one)
skip -rfu ^autograd::autocast_applies[(]
skip -rfu ::(is_bf16|any_bf16|wide)[(<]
skip -gfi */autograd/memory/*.h

# backward-loop NODE: run the program to where the engine runs the node named NODE (run_node, in
# autograd/engine.cpp: its first call, check_saved_versions(node), takes the node), then on to the first
# loop of the reference kernels its backward function enters. (gdb puts a function's breakpoint on its
# first instruction here, before the arguments are in place: each stop takes one `next` into the body
# before it reads them.)
define backward-loop
  break autograd::check_saved_versions
  run
  next
  while !$_streq(node.name, "$arg0")
    continue
    next
  end
  delete
  backward-loop-breakpoints
  continue
  next
  delete
  backward-loop-report $arg0
end
document backward-loop
Usage: backward-loop NODE (a grad_fn name: MmBackward0, SoftmaxBackward0, ...).
Runs the program to where the engine calls NODE's backward function, then on into the first loop of
autograd/reference/ that it enters: prints the backtrace and the loop.
end

# A breakpoint on each loop of the reference kernels that computes something: the function templates of
# autograd/reference/*.cpp (each kernel's loop is one; the entry beside it only picks its instantiation for
# the dtype), float32 and float64. Not fill and copy, which only zero or move a gradient's memory.
define backward-loop-breakpoints
  break autograd::reference::unary<float>
  break autograd::reference::unary<double>
  break autograd::reference::binary<float>
  break autograd::reference::binary<double>
  break autograd::reference::where<float>
  break autograd::reference::where<double>
  break autograd::reference::masked_fill<float>
  break autograd::reference::masked_fill<double>
  break autograd::reference::sum_to<float>
  break autograd::reference::sum_to<double>
  break autograd::reference::max_dim<float>
  break autograd::reference::max_dim<double>
  break autograd::reference::var<float>
  break autograd::reference::var<double>
  break autograd::reference::norm2<float>
  break autograd::reference::norm2<double>
  break autograd::reference::product<float>
  break autograd::reference::product<double>
  break autograd::reference::causal_product<float>
  break autograd::reference::causal_product<double>
  break autograd::reference::causal_scale<float>
  break autograd::reference::causal_scale<double>
  break autograd::reference::softmax<float>
  break autograd::reference::softmax<double>
  break autograd::reference::softmax_backward<float>
  break autograd::reference::softmax_backward<double>
  break autograd::reference::index_select_rows<float>
  break autograd::reference::index_select_rows<double>
  break autograd::reference::index_add_rows<float>
  break autograd::reference::index_add_rows<double>
  break autograd::reference::gather_rows<float>
  break autograd::reference::gather_rows<double>
  break autograd::reference::scatter_rows<float>
  break autograd::reference::scatter_rows<double>
  break autograd::reference::nll_loss<float>
  break autograd::reference::nll_loss<double>
  break autograd::reference::nll_loss_backward<float>
  break autograd::reference::nll_loss_backward<double>
  break autograd::reference::layer_norm<float>
  break autograd::reference::layer_norm<double>
  break autograd::reference::layer_norm_backward<float>
  break autograd::reference::layer_norm_backward<double>
  break autograd::reference::gelu<float>
  break autograd::reference::gelu<double>
  break autograd::reference::gelu_backward<float>
  break autograd::reference::gelu_backward<double>
  break autograd::reference::flash_attention<float>
  break autograd::reference::flash_attention<double>
  break autograd::reference::flash_attention_backward<float>
  break autograd::reference::flash_attention_backward<double>
  break autograd::reference::silu<float>
  break autograd::reference::silu<double>
  break autograd::reference::silu_backward<float>
  break autograd::reference::silu_backward<double>
  break autograd::reference::rms_norm<float>
  break autograd::reference::rms_norm<double>
  break autograd::reference::rms_norm_backward<float>
  break autograd::reference::rms_norm_backward<double>
  break autograd::reference::rotary_embedding<float>
  break autograd::reference::rotary_embedding<double>
end

# Where it stopped: the backtrace and the loop, if the loop belongs to NODE's backward function.
define backward-loop-report
  if $_any_caller_matches("^autograd::run_node", 32)
    frame function autograd::run_node
    if $_streq(node.name, "$arg0")
      frame 0
      echo \n---- backtrace: the loop that computes the gradient of $arg0, and the calls above it\n
      backtrace
      echo \n---- the loop\n
      list
    else
      echo \n---- $arg0 has no loop of its own: its backward function reshapes, transposes, expands or\n
      echo passes on the incoming gradient, a view of the same numbers (the next loop belongs to a later node).\n
    end
  else
    echo \n$arg0 reached no loop of the reference kernels.\n
  end
end
