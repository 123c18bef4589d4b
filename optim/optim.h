// optim.h — the optimizers in one include.
#pragma once
#include "optim/optimizer.h"
