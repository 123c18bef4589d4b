// optim.h — the optimizers in one include.
#pragma once
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/scheduler.h"
