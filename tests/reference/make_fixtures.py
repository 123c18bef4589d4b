#!/usr/bin/env python3
"""Writes tests/reference/fixtures/ops/*.txt: forward values of every op, computed by PyTorch 1.13.

PyTorch is a reference only: the C++ build never needs it. Run with the interpreter that has torch:

    /usr/bin/python3 tests/reference/make_fixtures.py

Each case has named inputs (fixed pseudo-random values from a torch.Generator seeded by the case name) and
one or more outputs. tests/test_ops_forward.cpp rebuilds the same inputs, applies the same op with the
engine and compares. Format, one item per line:

    # comment
    case <name>
    in <name> <dtype> <ndim> <dims...> <values...>
    out <dtype> <ndim> <dims...> <values...>
    end

dtype is float32, float64, int64 or bool. Floating values are written with float.hex ("0x1.8p-1", "inf",
"-inf", "nan"), so they are exact (a float32 value is exactly a double); int64 and bool are decimal.
Values are in row-major order of the logical shape. A C++ lambda with the same case name must exist in
test_ops_forward.cpp, and every lambda there must have a case here; the test fails otherwise.
"""
import math
import os
import zlib

import torch

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "ops")
F, D, L, B = torch.float32, torch.float64, torch.int64, torch.bool
DTYPE_NAMES = {F: "float32", D: "float64", L: "int64", B: "bool"}
INF = math.inf

FILES = {}  # file name -> list of (case name, inputs dict, outputs list)


# ---------------------------------------------------------------- inputs

class Spec:
    """How to make one input: shape, dtype and the kind of values."""

    def __init__(self, shape, dtype=F, kind="u", lo=None, hi=None, p=0.5):
        self.shape, self.dtype, self.kind, self.lo, self.hi, self.p = list(shape), dtype, kind, lo, hi, p

    def make(self, g):
        shape = self.shape
        if self.kind == "u":  # uniform in [lo, hi)
            lo, hi = (-1.0 if self.lo is None else self.lo), (1.0 if self.hi is None else self.hi)
            return (torch.rand(shape, generator=g, dtype=D) * (hi - lo) + lo).to(self.dtype)
        if self.kind == "nz":  # |v| in [0.2, 1): safe for relu/abs
            mag = torch.rand(shape, generator=g, dtype=D) * 0.8 + 0.2
            sign = torch.where(torch.rand(shape, generator=g, dtype=D) < 0.5, -1.0, 1.0)
            return (mag * sign).to(self.dtype)
        if self.kind == "int":  # integers in [lo, hi), in the given dtype (ties for comparisons and max)
            return torch.randint(self.lo, self.hi, shape, generator=g).to(self.dtype)
        if self.kind == "mask":  # bool, true with probability p
            return torch.rand(shape, generator=g, dtype=D) < self.p
        raise ValueError(self.kind)


def u(*shape, dtype=F, lo=None, hi=None):
    return Spec(shape, dtype, "u", lo, hi)


def pos(*shape, dtype=F):
    return Spec(shape, dtype, "u", 0.5, 2.0)


def nz(*shape, dtype=F):
    return Spec(shape, dtype, "nz")


def ints(lo, hi, *shape, dtype=L):
    return Spec(shape, dtype, "int", lo, hi)


def mask(*shape, p=0.5):
    return Spec(shape, B, "mask", p=p)


def fixed(values, dtype=L):
    return torch.tensor(values, dtype=dtype)


def case(file, name, inputs, fn):
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    made = {k: (v.make(g) if isinstance(v, Spec) else v) for k, v in inputs.items()}
    out = fn(**made)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    FILES.setdefault(file, []).append((name, made, outs))


# ---------------------------------------------------------------- elementwise

E = "elementwise.txt"
case(E, "add", {"a": u(2, 3), "b": u(2, 3)}, lambda a, b: a + b)
case(E, "add_broadcast", {"a": u(2, 3, 4), "b": u(3, 1)}, lambda a, b: a + b)
case(E, "add_f64", {"a": u(2, 3, dtype=D), "b": u(3, dtype=D)}, lambda a, b: a + b)
case(E, "add_int", {"a": ints(-5, 5, 2, 3), "b": ints(-5, 5, 3)}, lambda a, b: a + b)
case(E, "sub_broadcast", {"a": u(4), "b": u(2, 1, 4)}, lambda a, b: a - b)
case(E, "mul", {"a": u(3, 4), "b": u(3, 4)}, lambda a, b: a * b)
case(E, "mul_broadcast", {"a": u(2, 1, 4), "b": u(3, 1)}, lambda a, b: a * b)
case(E, "mul_transposed", {"a": u(4, 3), "b": u(3, 4)}, lambda a, b: a.t() * b)
case(E, "mul_scalar_tensor", {"a": u(2, 3), "b": u()}, lambda a, b: a * b)
case(E, "div", {"a": u(2, 3), "b": pos(2, 3)}, lambda a, b: a / b)
case(E, "div_broadcast", {"a": u(2, 3), "b": pos(3)}, lambda a, b: a / b)
case(E, "div_f64", {"a": u(2, 3, dtype=D), "b": pos(2, 3, dtype=D)}, lambda a, b: a / b)
case(E, "div_int", {"a": ints(-9, 9, 5), "b": ints(1, 4, 5)}, lambda a, b: a / b)
case(E, "add_scalar", {"a": u(2, 3)}, lambda a: a + 2.5)
case(E, "sub_scalar", {"a": u(2, 3)}, lambda a: a - 2.5)
case(E, "rsub_scalar", {"a": u(2, 3)}, lambda a: 2.5 - a)
case(E, "mul_scalar", {"a": u(2, 3)}, lambda a: a * -1.5)
case(E, "div_scalar", {"a": u(2, 3)}, lambda a: a / 3.0)
case(E, "rdiv_scalar", {"a": pos(2, 3)}, lambda a: 3.0 / a)
case(E, "scalar_f64", {"a": pos(2, 3, dtype=D)}, lambda a: (1.0 - a * 0.1) / 7.0 + 3.0 / a)
case(E, "mul_int_fraction", {"a": ints(-5, 5, 4)}, lambda a: a * 0.5)
case(E, "neg", {"a": u(2, 3)}, lambda a: -a)
case(E, "exp", {"a": u(3, 4, lo=-5, hi=5)}, lambda a: a.exp())
case(E, "exp_transposed", {"a": u(4, 3, lo=-5, hi=5)}, lambda a: a.t().exp())
case(E, "exp_f64", {"a": u(3, 4, lo=-5, hi=5, dtype=D)}, lambda a: a.exp())
case(E, "log", {"a": u(3, 4, lo=0.01, hi=10)}, lambda a: a.log())
case(E, "log_f64", {"a": u(3, 4, lo=0.01, hi=10, dtype=D)}, lambda a: a.log())
case(E, "log_special", {"a": fixed([0.0, -1.0, INF, 1.0], F)}, lambda a: a.log())
case(E, "sqrt", {"a": u(3, 4, lo=0, hi=10)}, lambda a: a.sqrt())
case(E, "sqrt_f64", {"a": u(3, 4, lo=0, hi=10, dtype=D)}, lambda a: a.sqrt())
case(E, "tanh", {"a": u(3, 4, lo=-4, hi=4)}, lambda a: a.tanh())
case(E, "tanh_f64", {"a": u(3, 4, lo=-4, hi=4, dtype=D)}, lambda a: a.tanh())
case(E, "relu", {"a": u(3, 4)}, lambda a: a.relu())
case(E, "relu_sliced", {"a": u(3, 8)}, lambda a: a[:, 1::2].relu())
case(E, "abs", {"a": u(3, 4)}, lambda a: a.abs())
case(E, "abs_int", {"a": ints(-5, 5, 6)}, lambda a: a.abs())
case(E, "pow_2", {"a": u(3, 4, lo=-3, hi=3)}, lambda a: a.pow(2.0))
case(E, "pow_3", {"a": u(3, 4, lo=-3, hi=3)}, lambda a: a.pow(3.0))
case(E, "pow_half", {"a": u(3, 4, lo=0, hi=4)}, lambda a: a.pow(0.5))
case(E, "pow_neg", {"a": pos(3, 4)}, lambda a: a.pow(-1.5))
case(E, "pow_2_5", {"a": pos(3, 4)}, lambda a: a.pow(2.5))
case(E, "pow_f64", {"a": pos(3, 4, dtype=D)}, lambda a: a.pow(1.7))
case(E, "where", {"c": mask(2, 3), "a": u(2, 3), "b": u(2, 3)}, lambda c, a, b: torch.where(c, a, b))
case(E, "where_broadcast", {"c": mask(2, 1, 3), "a": u(4, 1), "b": u(3)}, lambda c, a, b: torch.where(c, a, b))
case(E, "where_scalar", {"c": mask(2, 3), "a": u(2, 3)}, lambda c, a: torch.where(c, a, torch.tensor(-2.0)))
case(E, "where_transposed", {"c": mask(3, 2), "a": u(3, 2), "b": u(2, 3)},
     lambda c, a, b: torch.where(c.t(), a.t(), b))
CMP = {"a": ints(-2, 3, 3, 4, dtype=F), "b": ints(-2, 3, 4, dtype=F)}  # integer-valued: many ties
case(E, "lt", CMP, lambda a, b: a < b)
case(E, "le", CMP, lambda a, b: a <= b)
case(E, "gt", CMP, lambda a, b: a > b)
case(E, "ge", CMP, lambda a, b: a >= b)
case(E, "eq", CMP, lambda a, b: a == b)
case(E, "ne", CMP, lambda a, b: a != b)
case(E, "cmp_scalar", {"a": ints(-2, 3, 3, 4, dtype=F)},
     lambda a: (a < 1.0, a <= 1.0, a > 0.5, a >= 0.0, a == 1.0, a != -1.0))
case(E, "cmp_int_fraction", {"a": ints(-3, 4, 7)}, lambda a: (a < 0.5, a <= 1.5, a > -0.5, a >= 2.5, a == 1.5))
case(E, "to_f64", {"a": u(2, 3)}, lambda a: a.double())
case(E, "to_f32", {"a": u(2, 3, dtype=D)}, lambda a: a.float())
case(E, "to_f32_transposed", {"a": u(3, 2, dtype=D)}, lambda a: a.t().float())
case(E, "to_int", {"a": u(2, 3, lo=-5, hi=5)}, lambda a: a.long())
case(E, "to_bool", {"a": ints(-1, 2, 2, 3, dtype=F)}, lambda a: a.bool())
case(E, "bool_to_f32", {"a": mask(2, 3)}, lambda a: a.float())
case(E, "clone_transposed", {"a": u(3, 4)}, lambda a: a.t().clone())
case(E, "contiguous_transposed", {"a": u(3, 4)}, lambda a: a.t().contiguous())

# ---------------------------------------------------------------- reductions

R = "reduce.txt"
case(R, "sum_all", {"a": u(3, 4, 5)}, lambda a: a.sum())
case(R, "sum_dim", {"a": u(3, 4, 5)}, lambda a: a.sum(1))
case(R, "sum_dim_keepdim", {"a": u(3, 4, 5)}, lambda a: a.sum(-1, keepdim=True))
case(R, "sum_dims", {"a": u(3, 4, 5)}, lambda a: a.sum((0, 2)))
case(R, "sum_dims_keepdim", {"a": u(3, 4, 5)}, lambda a: a.sum((2, 0), keepdim=True))
case(R, "sum_transposed", {"a": u(4, 5)}, lambda a: a.t().sum(0))
case(R, "sum_f64", {"a": u(3, 4, 5, dtype=D)}, lambda a: (a.sum(), a.sum(1)))
case(R, "sum_long", {"a": u(1000)}, lambda a: a.sum())
case(R, "sum_long_dim", {"a": u(300, 7)}, lambda a: a.sum(0))
case(R, "sum_int", {"a": ints(-9, 9, 3, 4)}, lambda a: (a.sum(), a.sum(0)))
case(R, "sum_bool", {"a": mask(3, 4)}, lambda a: (a.sum(), a.sum(1)))
case(R, "sum_to", {"a": u(2, 3, 4)}, lambda a: (a.sum_to_size(3, 1), a.sum_to_size(1, 4), a.sum_to_size(2, 1, 4)))
case(R, "mean_all", {"a": u(3, 4, 5)}, lambda a: a.mean())
case(R, "mean_dim", {"a": u(3, 4, 5)}, lambda a: a.mean(1))
case(R, "mean_dim_keepdim", {"a": u(3, 4, 5)}, lambda a: a.mean(-1, keepdim=True))
case(R, "mean_transposed", {"a": u(4, 5)}, lambda a: a.t().mean(0))
case(R, "mean_f64", {"a": u(3, 4, dtype=D)}, lambda a: (a.mean(), a.mean(0)))
case(R, "max_dim", {"a": u(3, 4, 5)}, lambda a: tuple(a.max(1)))
case(R, "max_dim_keepdim", {"a": u(3, 4, 5)}, lambda a: tuple(a.max(-1, keepdim=True)))
case(R, "max_dim_transposed", {"a": u(4, 5)}, lambda a: tuple(a.t().max(1)))
case(R, "max_dim_ties", {"a": ints(0, 3, 4, 6, dtype=F)}, lambda a: tuple(a.max(1)))
case(R, "max_all", {"a": u(3, 4, 5)}, lambda a: a.max())
case(R, "max_f64", {"a": u(3, 4, dtype=D)}, lambda a: (a.max(), *a.max(0)))
case(R, "max_int", {"a": ints(-9, 9, 3, 4)}, lambda a: (a.max(), *a.max(1)))
case(R, "argmax", {"a": u(3, 4, 5)}, lambda a: (a.argmax(), a.argmax(2), a.argmax(0, keepdim=True)))

# ---------------------------------------------------------------- matmul and linear

M = "matmul.txt"
case(M, "dot", {"a": u(5), "b": u(5)}, lambda a, b: a @ b)
case(M, "vec_mat", {"a": u(3), "b": u(3, 4)}, lambda a, b: a @ b)
case(M, "mat_vec", {"a": u(3, 4), "b": u(4)}, lambda a, b: a @ b)
case(M, "mat_mat", {"a": u(3, 4), "b": u(4, 5)}, lambda a, b: a @ b)
case(M, "vec_batched", {"a": u(3), "b": u(2, 3, 4)}, lambda a, b: a @ b)
case(M, "batched_vec", {"a": u(2, 3, 4), "b": u(4)}, lambda a, b: a @ b)
case(M, "batched_3d", {"a": u(2, 3, 4), "b": u(2, 4, 5)}, lambda a, b: a @ b)
case(M, "batched_4d", {"a": u(2, 3, 4, 5), "b": u(2, 3, 5, 2)}, lambda a, b: a @ b)
case(M, "broadcast_batch", {"a": u(2, 1, 3, 4), "b": u(5, 4, 2)}, lambda a, b: a @ b)
case(M, "mat_batched", {"a": u(3, 4), "b": u(2, 4, 5)}, lambda a, b: a @ b)
case(M, "fold_3d_2d", {"a": u(2, 3, 4), "b": u(4, 5)}, lambda a, b: a @ b)
case(M, "fold_4d_2d", {"a": u(2, 2, 3, 4), "b": u(4, 5)}, lambda a, b: a @ b)
case(M, "fold_transposed", {"a": u(2, 4, 3), "b": u(5, 4)}, lambda a, b: a.transpose(1, 2) @ b.t())
case(M, "transposed", {"a": u(4, 3), "b": u(5, 4)}, lambda a, b: a.t() @ b.t())
case(M, "batched_mT", {"a": u(2, 3, 4), "b": u(2, 5, 4)}, lambda a, b: a @ b.mT)
case(M, "mat_mat_f64", {"a": u(3, 4, dtype=D), "b": u(4, 5, dtype=D)}, lambda a, b: a @ b)
# above 16K multiply-adds: the BLIS path
case(M, "large", {"a": u(24, 32), "b": u(32, 24)}, lambda a, b: a @ b)
case(M, "large_transposed", {"a": u(32, 24), "b": u(24, 32)}, lambda a, b: a.t() @ b.t())
case(M, "large_batched", {"a": u(2, 24, 32), "b": u(2, 32, 24)}, lambda a, b: a @ b)
case(M, "large_broadcast", {"a": u(2, 1, 24, 32), "b": u(2, 32, 24)}, lambda a, b: a @ b)
case(M, "large_fold", {"a": u(2, 12, 32), "b": u(32, 24)}, lambda a, b: a @ b)
case(M, "large_f64", {"a": u(24, 32, dtype=D), "b": u(32, 24, dtype=D)}, lambda a, b: a @ b)
case(M, "linear", {"x": u(2, 3, 4), "w": u(5, 4), "b": u(5)},
     lambda x, w, b: torch.nn.functional.linear(x, w, b))
case(M, "linear_no_bias", {"x": u(3, 4), "w": u(5, 4)}, lambda x, w: torch.nn.functional.linear(x, w))
case(M, "linear_vector", {"x": u(4), "w": u(5, 4), "b": u(5)}, lambda x, w, b: torch.nn.functional.linear(x, w, b))
case(M, "linear_large", {"x": u(2, 12, 32), "w": u(24, 32), "b": u(24)},
     lambda x, w, b: torch.nn.functional.linear(x, w, b))

# ---------------------------------------------------------------- neural-network ops

N = "nn.txt"
for d in (0, 1, 2, -1):
    case(N, f"softmax_dim{d}", {"x": u(2, 3, 4, lo=-4, hi=4)}, lambda x, d=d: x.softmax(d))
    case(N, f"log_softmax_dim{d}", {"x": u(2, 3, 4, lo=-4, hi=4)}, lambda x, d=d: x.log_softmax(d))
case(N, "softmax_transposed", {"x": u(4, 3, lo=-4, hi=4)}, lambda x: (x.t().softmax(-1), x.t().softmax(0)))
case(N, "log_softmax_transposed", {"x": u(4, 3, lo=-4, hi=4)}, lambda x: (x.t().log_softmax(-1), x.t().log_softmax(0)))
case(N, "softmax_f64", {"x": u(3, 5, lo=-4, hi=4, dtype=D)}, lambda x: (x.softmax(-1), x.log_softmax(-1)))
case(N, "softmax_large_values", {"x": u(2, 5, lo=-1000, hi=1000)}, lambda x: (x.softmax(-1), x.log_softmax(-1)))
case(N, "softmax_long_row", {"x": u(3, 300, lo=-4, hi=4)}, lambda x: (x.softmax(-1), x.log_softmax(-1)))
SOFTMAX_MASK = fixed([[False, True, False, True], [True, True, True, True], [False, False, False, False]], B)
case(N, "softmax_masked_rows", {"x": u(3, 4), "m": SOFTMAX_MASK},
     lambda x, m: (x.masked_fill(m, -INF).softmax(-1), x.masked_fill(m, -INF).log_softmax(-1)))
case(N, "softmax_inf_values", {"x": fixed([[1.0, INF, 0.0], [-INF, -INF, -INF], [0.0, 1.0, math.nan]], F)},
     lambda x: (x.softmax(-1), x.log_softmax(-1)))
case(N, "causal_attention", {"q": u(2, 4, 3), "k": u(2, 4, 3), "v": u(2, 4, 3)},
     lambda q, k, v: (q @ k.mT / math.sqrt(3)).masked_fill(torch.ones(4, 4, dtype=B).triu(1), -INF).softmax(-1) @ v)
# the blocked causal ops (ops/attention.cpp) against the dense ops they stand for; T > 32 so blocks are used
CAUSAL_40 = torch.ones(40, 40, dtype=B).triu(1)
case(N, "causal_scores", {"q": u(2, 40, 3), "k": u(2, 40, 3)},
     lambda q, k: (q @ k.mT / math.sqrt(3)).masked_fill(CAUSAL_40, -INF))
case(N, "tril_matmul", {"p": u(2, 40, 40), "v": u(2, 40, 5)}, lambda p, v: p.tril() @ v)
case(N, "masked_fill", {"x": u(3, 4), "m": mask(3, 4)}, lambda x, m: x.masked_fill(m, 0.5))
case(N, "masked_fill_broadcast", {"x": u(2, 3, 4), "m": mask(4)}, lambda x, m: x.masked_fill(m, -INF))
case(N, "masked_fill_broadcast_col", {"x": u(3, 4), "m": mask(3, 1)}, lambda x, m: x.masked_fill(m, -1e9))
case(N, "masked_fill_transposed", {"x": u(4, 3), "m": mask(3, 4)}, lambda x, m: x.t().masked_fill(m, INF))
case(N, "masked_fill_f64", {"x": u(3, 4, dtype=D), "m": mask(4)}, lambda x, m: x.masked_fill(m, -0.25))
case(N, "embedding", {"w": u(6, 3), "i": fixed([[0, 5, 5, 2], [3, 0, 1, 5]])},
     lambda w, i: torch.nn.functional.embedding(i, w))
case(N, "embedding_transposed", {"w": u(3, 6), "i": fixed([4, 4, 0, 1])}, lambda w, i: torch.nn.functional.embedding(i, w.t()))
case(N, "embedding_f64", {"w": u(4, 2, dtype=D), "i": fixed([[3], [1]])}, lambda w, i: torch.nn.functional.embedding(i, w))
CE = torch.nn.functional.cross_entropy
case(N, "cross_entropy", {"x": u(5, 4, lo=-3, hi=3), "t": fixed([0, 3, 1, 1, 2])}, lambda x, t: CE(x, t))
case(N, "cross_entropy_ignore", {"x": u(5, 4, lo=-3, hi=3), "t": fixed([0, -100, 1, -100, 2])}, lambda x, t: CE(x, t))
case(N, "cross_entropy_ignore_custom", {"x": u(5, 4, lo=-3, hi=3), "t": fixed([0, 2, 1, 2, 3])},
     lambda x, t: CE(x, t, ignore_index=2))
case(N, "cross_entropy_all_ignored", {"x": u(2, 4), "t": fixed([-100, -100])}, lambda x, t: CE(x, t))
case(N, "cross_entropy_transposed", {"x": u(4, 5, lo=-3, hi=3), "t": fixed([0, 3, 1, 1, 2])}, lambda x, t: CE(x.t(), t))
case(N, "cross_entropy_f64", {"x": u(5, 4, lo=-3, hi=3, dtype=D), "t": fixed([0, 3, 1, 1, 2])}, lambda x, t: CE(x, t))
case(N, "cross_entropy_large", {"x": u(16, 50, lo=-5, hi=5), "t": ints(0, 50, 16)}, lambda x, t: CE(x, t))
NLL = torch.nn.functional.nll_loss
case(N, "nll_loss", {"x": u(4, 3), "t": fixed([2, 0, 1, 2])}, lambda x, t: NLL(x, t))
case(N, "nll_loss_ignore", {"x": u(4, 3), "t": fixed([2, -100, 1, 2])}, lambda x, t: NLL(x, t))
case(N, "nll_loss_log_softmax", {"x": u(4, 3, dtype=D), "t": fixed([2, 0, 1, 2])}, lambda x, t: NLL(x.log_softmax(1), t))

# ---------------------------------------------------------------- views, joins, triangles

S = "shape.txt"
case(S, "view", {"a": u(3, 4)}, lambda a: (a.view(2, 6), a.view(-1), a.view(4, 1, 3)))
case(S, "view_transposed_split", {"a": u(3, 4)}, lambda a: a.t().view(2, 2, 3))
case(S, "reshape_copy", {"a": u(3, 4)}, lambda a: (a.t().reshape(-1), a.t().reshape(2, 6)))
case(S, "transpose", {"a": u(2, 3, 4)}, lambda a: (a.transpose(0, 2), a.transpose(-1, -2), a.mT))
case(S, "permute", {"a": u(2, 3, 4)}, lambda a: (a.permute(2, 0, 1), a.permute(1, 2, 0)))
case(S, "unsqueeze_squeeze", {"a": u(1, 3, 1)}, lambda a: (a.unsqueeze(0), a.unsqueeze(-1), a.squeeze(), a.squeeze(2)))
case(S, "expand", {"a": u(3, 1)}, lambda a: (a.expand(3, 4), a.expand(2, 3, 4), a.expand(2, -1, 2)))
case(S, "narrow", {"a": u(4, 5)}, lambda a: (a.narrow(1, 1, 3), a.narrow(0, 2, 2), a.t().narrow(0, 1, 2)))
case(S, "slice_step", {"a": u(5, 6)}, lambda a: (a[:, 1::2], a[1:5:3], a[-3:], a.t()[::2, 1:]))
case(S, "select", {"a": u(3, 4, 2)}, lambda a: (a[1], a[:, -1], a[:, :, 0], a.transpose(0, 1)[1]))
case(S, "cat", {"a": u(2, 3), "b": u(1, 3), "c": u(3, 2)},
     lambda a, b, c: (torch.cat([a, b], 0), torch.cat([a, c.t(), a], 1), torch.cat([a, b, a], -2)))
case(S, "cat_f64", {"a": u(2, 2, dtype=D), "b": u(2, 1, dtype=D)}, lambda a, b: torch.cat([a, b], 1))
case(S, "cat_int", {"a": ints(0, 9, 2), "b": ints(0, 9, 3)}, lambda a, b: torch.cat([a, b]))
case(S, "stack", {"a": u(2, 3), "b": u(2, 3)},
     lambda a, b: (torch.stack([a, b]), torch.stack([a, b], 1), torch.stack([a, b, a], -1)))
case(S, "stack_transposed", {"a": u(3, 2), "b": u(2, 3)}, lambda a, b: torch.stack([a.t(), b], 1))
case(S, "chunk", {"a": u(2, 7)}, lambda a: torch.chunk(a, 3, 1))
case(S, "chunk_rows", {"a": u(6, 2)}, lambda a: torch.chunk(a, 4, 0))
case(S, "tril_triu", {"a": u(3, 4)},
     lambda a: (a.tril(), a.triu(), a.tril(-1), a.triu(1), a.tril(2), a.triu(-2)))
case(S, "tril_triu_batched", {"a": u(2, 3, 3)}, lambda a: (a.tril(), a.triu(1)))
case(S, "tril_triu_transposed", {"a": u(4, 3)}, lambda a: (a.t().tril(), a.t().triu()))
case(S, "triu_bool", {}, lambda: torch.ones(4, 4, dtype=B).triu(1))
case(S, "flatten", {"a": u(2, 3, 4)},
     lambda a: (a.flatten(), a.flatten(1), a.flatten(0, 1), a.flatten(-2, -1), a.flatten(1, 1), a.flatten(-3, 0)))
case(S, "flatten_transposed", {"a": u(2, 3, 4)}, lambda a: (a.transpose(0, 2).flatten(1), a.transpose(0, 2).flatten(0, 1)))
case(S, "flatten_0d", {"a": u()}, lambda a: (a.flatten(), a.flatten(0, -1), a.flatten(-1, 0)))
case(S, "flatten_empty", {"a": u(2, 0, 3)}, lambda a: (a.flatten(0, 1), a.flatten(1), a.flatten()))
case(S, "flatten_int", {"a": ints(0, 9, 2, 2, 2)}, lambda a: a.flatten(1))


# ---------------------------------------------------------------- writing

def value_text(x, dtype):
    if dtype in (F, D):
        text = float(x).hex()  # "0x1.8000000000000p+1": drop the mantissa's trailing zeros
        if "p" in text:
            mantissa, exponent = text.split("p")
            text = mantissa.rstrip("0").rstrip(".") + "p" + exponent
        return text
    return str(int(x))


def tensor_text(t):
    t = t.detach()
    dims = list(t.shape)
    values = t.reshape(-1).tolist() if t.dim() > 0 else [t.item()]
    parts = [DTYPE_NAMES[t.dtype], str(len(dims))] + [str(d) for d in dims]
    parts += [value_text(v, t.dtype) for v in values]
    return " ".join(parts)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    for file, cases in FILES.items():
        names = [c[0] for c in cases]
        assert len(names) == len(set(names)), f"duplicate case names in {file}"
        lines = [f"# Forward values from PyTorch {torch.__version__}, written by tests/reference/make_fixtures.py.",
                 "# Do not edit: change the script and run it again. Format: see the script's docstring."]
        for name, inputs, outs in cases:
            lines.append(f"case {name}")
            for key, t in inputs.items():
                lines.append(f"in {key} {tensor_text(t)}")
            for t in outs:
                lines.append(f"out {tensor_text(t)}")
            lines.append("end")
        with open(os.path.join(OUT_DIR, file), "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{file}: {len(cases)} cases")


if __name__ == "__main__":
    main()
