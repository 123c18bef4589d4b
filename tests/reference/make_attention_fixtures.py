#!/usr/bin/python3
"""Write tests/reference/fixtures/attention/sdpa.txt: scaled dot-product attention computed by PyTorch 1.13
in float64, for tests/test_flash_attention.cpp (autograd's scaled_dot_product_attention).

Run with the Debian PyTorch:  /usr/bin/python3 tests/reference/make_attention_fixtures.py

PyTorch 1.13 has no F.scaled_dot_product_attention (it came with 2.0), so the reference is the definition
that 2.0's documentation gives for it, written out with explicit ops in float64:

    scores = q @ k.transpose(-2, -1) * scale            scale = 1 / sqrt(d) unless given
    causal: scores.masked_fill(ones(T, S).tril() == 0, -inf)   (the mask aligned to the top left)
    out = softmax(scores, -1) @ v

and, for the cases with a `grad_out`, the gradients of (out * grad_out).sum() with respect to q, k and v
from PyTorch's autograd. float64 everywhere, so the fixture is the true value to ~1e-16 and the C++ test can
hold the kernel to tight tolerances in float64 (and compare float32 results against it loosely).

File format (one tensor per line, '#' lines are comments; the format of fixtures/nn, read by
testing_helpers::read_recorded):
    tensor NAME NDIM D0 D1 ... V0 V1 ...   float64 values, each as float.hex
    case   NAME causal(0|1) scale(float.hex, or "default")
Names of a case's tensors: <case>.q, <case>.k, <case>.v, <case>.out, and optionally <case>.grad_out,
<case>.dq, <case>.dk, <case>.dv.
"""
import math
import os
import zlib

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "attention", "sdpa.txt")
D = torch.float64


def reference(q, k, v, causal, scale):
    s = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * s
    if causal:
        T, S = q.size(-2), k.size(-2)
        scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool).tril() == 0, -math.inf)
    return torch.softmax(scores, -1) @ v


def tensor_line(name, t):
    t = t.detach().contiguous()
    dims = " ".join(str(n) for n in t.shape)
    values = " ".join(float(x).hex() for x in t.reshape(-1).tolist())
    return f"tensor {name} {t.dim()} {dims} {values}".replace("  ", " ").rstrip()


CASES = [
    # name, q shape, k shape, v shape, causal, scale, with gradients
    ("causal_one_row", [1, 1], [1, 1], [1, 1], True, None, True),
    ("causal_d1", [6, 1], [6, 1], [6, 1], True, None, True),
    ("causal_small", [5, 3], [5, 3], [5, 4], True, None, True),
    ("causal_two_blocks", [1, 2, 70, 4], [1, 2, 70, 4], [1, 2, 70, 4], True, None, True),
    ("causal_three_blocks", [1, 1, 150, 4], [1, 1, 150, 4], [1, 1, 150, 4], True, None, False),
    ("causal_fewer_queries", [7, 4], [11, 4], [11, 3], True, None, True),
    ("causal_more_queries", [11, 4], [7, 4], [7, 3], True, None, True),
    ("full_rectangular", [2, 9, 4], [2, 70, 4], [2, 70, 5], False, None, True),
    ("full_scale", [3, 20, 6], [3, 20, 6], [3, 20, 6], False, 0.3, False),
    ("causal_broadcast_batch", [2, 3, 10, 4], [3, 10, 4], [1, 3, 10, 4], True, None, True),
    ("causal_large_scores", [1, 66, 4], [1, 66, 4], [1, 66, 4], True, 3.0, True),
]


def main():
    lines = ["# scaled dot-product attention in float64 by PyTorch " + torch.__version__ +
             " (tests/reference/make_attention_fixtures.py)"]
    for name, qs, ks, vs, causal, scale, grads in CASES:
        g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
        q = (torch.rand(qs, generator=g, dtype=D) * 2 - 1).requires_grad_()
        k = (torch.rand(ks, generator=g, dtype=D) * 2 - 1).requires_grad_()
        v = (torch.rand(vs, generator=g, dtype=D) * 2 - 1).requires_grad_()
        out = reference(q, k, v, causal, scale)
        lines.append(f"case {name} {int(causal)} {'default' if scale is None else float(scale).hex()}")
        lines += [tensor_line(f"{name}.{n}", t) for n, t in (("q", q), ("k", k), ("v", v), ("out", out))]
        if grads:
            grad_out = torch.rand(out.shape, generator=g, dtype=D) * 2 - 1
            dq, dk, dv = torch.autograd.grad(out, (q, k, v), grad_out)
            lines += [tensor_line(f"{name}.{n}", t)
                      for n, t in (("grad_out", grad_out), ("dq", dq), ("dk", dk), ("dv", dv))]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {OUT}: {len(CASES)} cases")


if __name__ == "__main__":
    main()
