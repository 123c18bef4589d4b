// nn.h — the whole nn library in one include.
#pragma once
#include "nn/attention.h"
#include "nn/char_model.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "nn/module.h"
