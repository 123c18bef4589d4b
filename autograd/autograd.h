// autograd.h — everything a program needs from the engine, in one include.
//
// The engine's pieces live in namespaces named after their folders (autograd::inspect, autograd::cpu,
// ...); the names a program uses are brought into autograd:: here, so `using namespace autograd;` is
// all a program needs.
#pragma once
#include "autograd/autocast.h"
#include "autograd/cpu/runtime/runtime.h"
#include "autograd/device.h"
#include "autograd/dtype.h"
#include "autograd/inspect/anomaly.h"
#include "autograd/inspect/call_site.h"
#include "autograd/inspect/dot.h"
#include "autograd/inspect/gradcheck.h"
#include "autograd/inspect/trace.h"
#include "autograd/node.h"
#include "autograd/numerics.h"
#include "autograd/ops.h"
#include "autograd/print/tensor_print.h"
#include "autograd/random/generator.h"
#include "autograd/random/random_tensors.h"
#include "autograd/tensor.h"

namespace autograd {
using cpu::blis_kernel_name;
using cpu::get_num_threads;
using cpu::set_num_threads;
using inspect::CallSite;
using inspect::DetectAnomalyGuard;
using inspect::DotOptions;
using inspect::gradcheck;
using inspect::GradcheckOptions;
using inspect::GradcheckResult;
using inspect::is_anomaly_enabled;
using inspect::set_anomaly_enabled;
using inspect::to_dot;
using inspect::make_trace_observer;
using inspect::TraceGuard;
using inspect::TraceOptions;
using inspect::write_text_file;
using print::print_options;
using print::PrintOptions;
using print::reset_printoptions;
using print::set_printoptions;
}  // namespace autograd
