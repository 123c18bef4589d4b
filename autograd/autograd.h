// autograd.h — everything a program needs from the engine, in one include.
#pragma once
#include "autograd/debug.h"
#include "autograd/device.h"
#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/print.h"
#include "autograd/tensor.h"
#include "autograd/random.h"
#include "autograd/random_ops.h"
#include "autograd/runtime.h"
