#!/usr/bin/env python3
"""Writes tests/reference/fixtures/sft/masked_cross_entropy.txt: cross_entropy over an instruction batch's
targets, with its -100 positions, and its gradient, computed by PyTorch 1.13 in float64.

PyTorch is a reference only: the C++ build never needs it. Run with the interpreter that has torch:

    /usr/bin/python3 tests/reference/make_sft_fixtures.py

The targets are those tests/test_sft_collate.cpp's collate makes of two examples (it checks that it makes
exactly these): ids [1, 2, 3, 4, 9] with the last three counted and [5, 6, 9] with the last two counted,
9 the end-of-text and padding id. The prompt masked, then kept (train_on_prompt). The loss is the mean over
the targets that count, as F.cross_entropy's default reduction with ignore_index=-100 takes it.

Lines: `tensor NAME NDIM D0 .. V0 ..` (float64 values as float.hex) or `itensor NAME NDIM D0 .. V0 ..`.
"""
import os

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "sft", "masked_cross_entropy.txt")
VOCAB = 10
TARGETS = {
    "prompt_masked": [[-100, 3, 4, 9], [6, 9, -100, -100]],
    "train_on_prompt": [[2, 3, 4, 9], [6, 9, -100, -100]],
}


def line(kind, name, t):
    dims = " ".join(str(d) for d in t.shape)
    values = t.flatten().tolist()
    text = " ".join(float.hex(v) for v in values) if kind == "tensor" else " ".join(str(v) for v in values)
    return f"{kind} {name} {t.dim()} {dims} {text}".replace("  ", " ")


def main():
    g = torch.Generator().manual_seed(49)
    logits = (torch.rand(2, 4, VOCAB, generator=g, dtype=torch.float64) * 6 - 3)
    out = ["# scratchgrad fixture: cross_entropy over collated instruction targets, torch " + torch.__version__ +
           ", float64. Written by make_sft_fixtures.py; do not edit.",
           line("tensor", "logits", logits)]
    for name, targets in TARGETS.items():
        t = torch.tensor(targets, dtype=torch.int64)
        x = logits.clone().requires_grad_()
        loss = F.cross_entropy(x.view(-1, VOCAB), t.view(-1))  # ignore_index=-100, mean over counted targets
        loss.backward()
        out += [line("itensor", name + ".targets", t), line("tensor", name + ".loss", loss.detach()),
                line("tensor", name + ".grad", x.grad)]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
