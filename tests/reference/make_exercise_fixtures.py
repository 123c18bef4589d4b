#!/usr/bin/python3
"""Write the exercises' fixtures under tests/reference/fixtures/exercises/ (PyTorch 1.13's numbers).

Run with the Debian PyTorch:  /usr/bin/python3 tests/reference/make_exercise_fixtures.py
PyTorch's portable kernels (ATEN_CPU_CAPABILITY=default, one thread), as the parity fixtures use.

One file per rung of examples/exercises/, read by examples/exercises/teacher.cpp. Each line is
    KIND NAME NDIM D0 D1 ... V0 V1 ...
KIND is f64 or f32 (values as float.hex), i64 or bool (integers). A case NAME of a differentiable op
holds its inputs (NAME.a, NAME.b, ...), the upstream gradient NAME.g, the output NAME.out and the
gradient of each input that needs one, NAME.grad.a, ...
"""
import math
import os

os.environ["ATEN_CPU_CAPABILITY"] = "default"  # read when torch loads its kernels

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "exercises")


class Writer:
    def __init__(self, stem, what):
        self.path = os.path.join(OUT, stem + ".txt")
        self.lines = [f"# {what}", "# written by tests/reference/make_exercise_fixtures.py (PyTorch "
                      f"{torch.__version__}); do not edit"]

    def tensor(self, name, t):
        t = t.detach()
        if t.dtype == torch.bool:
            kind, values = "bool", [str(int(v)) for v in t.reshape(-1).tolist()]
        elif t.dtype == torch.int64:
            kind, values = "i64", [str(v) for v in t.reshape(-1).tolist()]
        else:
            kind = "f64" if t.dtype == torch.float64 else "f32"
            values = [float.hex(float(v)) for v in t.reshape(-1).tolist()]
        self.lines.append(" ".join([kind, name, str(t.dim())] + [str(d) for d in t.shape] + values))

    def case(self, name, fn, inputs, grad=None):
        """inputs: (name, tensor) pairs; grad: which of them need a gradient (default: all)."""
        grad = grad if grad is not None else [True] * len(inputs)
        leaves = []
        for (key, t), g in zip(inputs, grad):
            leaf = t.detach().clone().requires_grad_(g)
            leaves.append(leaf)
            self.tensor(f"{name}.{key}", leaf)
        out = fn(*leaves)
        upstream = torch.rand(out.shape, dtype=out.dtype) * 2 - 1
        out.backward(upstream)
        self.tensor(f"{name}.g", upstream)
        self.tensor(f"{name}.out", out)
        for (key, _), leaf, g in zip(inputs, leaves, grad):
            if g:
                self.tensor(f"{name}.grad.{key}", leaf.grad)

    def close(self):
        with open(self.path, "w") as f:
            f.write("\n".join(self.lines) + "\n")


def uniform(*shape, lo=-1.0, hi=1.0):
    return torch.rand(*shape, dtype=torch.float64) * (hi - lo) + lo


def causal(T):
    return torch.triu(torch.ones(T, T), diagonal=1).bool()


def attention(q, k, v):
    T, d = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    return torch.softmax(scores.masked_fill(causal(T), -math.inf), dim=-1) @ v


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)

    w = Writer("01_mul", "exercise 1: mul with broadcasting")
    w.case("same_shape", torch.mul, [("a", uniform(3, 4)), ("b", uniform(3, 4))])
    w.case("broadcast_b", torch.mul, [("a", uniform(4, 3)), ("b", uniform(3))])
    w.case("broadcast_both", torch.mul, [("a", uniform(4, 1)), ("b", uniform(1, 3))])
    w.close()

    w = Writer("02_sum_mean", "exercise 2: sum and mean along a dim")
    w.case("sum_dim0", lambda x: x.sum(0), [("x", uniform(3, 4))])
    w.case("sum_dim1_keepdim", lambda x: x.sum(1, keepdim=True), [("x", uniform(3, 4))])
    w.case("sum_3d_dim1", lambda x: x.sum(1), [("x", uniform(2, 3, 4))])
    w.case("mean_last_dim", lambda x: x.mean(-1), [("x", uniform(2, 3, 4))])
    w.case("mean_dim0_keepdim", lambda x: x.mean(0, keepdim=True), [("x", uniform(3, 4))])
    w.close()

    w = Writer("03_exp_log_tanh", "exercise 3: exp, log and tanh")
    w.case("exp", torch.exp, [("x", uniform(3, 4, lo=-2, hi=2))])
    w.case("log", torch.log, [("x", uniform(3, 4, lo=0.2, hi=3))])
    w.case("tanh", torch.tanh, [("x", uniform(3, 4, lo=-2, hi=2))])
    w.close()

    w = Writer("04_matmul", "exercise 4: matmul's two gradients")
    w.case("square", torch.matmul, [("a", uniform(3, 3)), ("b", uniform(3, 3))])
    w.case("rectangular", torch.matmul, [("a", uniform(2, 3)), ("b", uniform(3, 4))])
    w.case("batched", torch.matmul, [("a", uniform(2, 2, 3)), ("b", uniform(2, 3, 4))])
    w.case("batch_broadcast", torch.matmul, [("a", uniform(2, 2, 3)), ("b", uniform(3, 4))])
    w.close()

    w = Writer("06_softmax", "exercise 6: softmax's backward")
    w.case("rows", lambda x: torch.softmax(x, -1), [("x", uniform(3, 5, lo=-2, hi=2))])
    w.case("columns", lambda x: torch.softmax(x, 0), [("x", uniform(4, 3, lo=-2, hi=2))])
    w.case("large", lambda x: torch.softmax(x, -1), [("x", uniform(2, 4, lo=-30, hi=30))])
    w.close()

    w = Writer("07_cross_entropy", "exercise 7: log_softmax + nll_loss")
    w.case("small", F.cross_entropy, [("logits", uniform(5, 4, lo=-2, hi=2)), ("targets", torch.tensor([3, 0, 1, 1, 2]))],
           [True, False])
    large = torch.tensor([[1000.0, 0.0, -1000.0, 10.0], [-1000.0, 1000.0, 0.0, 5.0], [0.0, 3.0, 1000.0, -1000.0]],
                         dtype=torch.float64)
    w.case("large", F.cross_entropy, [("logits", large), ("targets", torch.tensor([2, 1, 3]))], [True, False])
    w.close()

    w = Writer("08_masked_fill", "exercise 8: masked_fill and the causal mask")
    w.case("full_mask", lambda x, m: x.masked_fill(m, 0.5), [("x", uniform(3, 4)), ("mask", torch.rand(3, 4) < 0.5)],
           [True, False])
    w.case("broadcast_mask", lambda x, m: x.masked_fill(m, 2.0),
           [("x", uniform(2, 3, 4)), ("mask", torch.tensor([[True, False, False, True]]))], [True, False])
    w.case("causal", lambda x, m: x.masked_fill(m, -math.inf), [("x", uniform(4, 4)), ("mask", causal(4))],
           [True, False])
    for T in (1, 4, 6):
        w.tensor(f"causal_{T}", causal(T))
    w.close()

    w = Writer("09_linear", "exercise 9: torch.nn.Linear's initial values and forward (float32)")
    torch.manual_seed(7)
    lin = torch.nn.Linear(24, 13)
    x = torch.randn(2, 5, 24)
    w.tensor("seed7.weight", lin.weight)
    w.tensor("seed7.bias", lin.bias)
    w.tensor("seed7.x", x)
    w.tensor("seed7.out", lin(x))
    torch.manual_seed(1)
    w.tensor("nobias.weight", torch.nn.Linear(3, 2, bias=False).weight)
    w.close()

    torch.manual_seed(10)
    w = Writer("10_attention_head", "exercise 10: one causal attention head")
    w.case("batched", attention, [("q", uniform(2, 4, 3)), ("k", uniform(2, 4, 3)), ("v", uniform(2, 4, 3))])
    w.case("single", attention, [("q", uniform(5, 2)), ("k", uniform(5, 2)), ("v", uniform(5, 2))])
    w.close()

    w = Writer("11_layer_norm", "exercise 11: LayerNorm over the last dim")
    w.case("rows", lambda x, g, b: F.layer_norm(x, (5,), g, b, 1e-5),
           [("x", uniform(2, 3, 5, lo=-2, hi=2)), ("weight", uniform(5)), ("bias", uniform(5))])
    w.close()

    w = Writer("12_gelu", "exercise 12: GELU, approximate='tanh'")
    w.case("line", lambda x: F.gelu(x, approximate="tanh"), [("x", torch.linspace(-4, 4, 21, dtype=torch.float64))])
    w.close()

    w = Writer("13_adam", "exercise 13: torch.optim.Adam on one float32 tensor, step by step")
    for name, steps, kw in (("default", 5, dict(lr=0.01)),
                            ("betas_eps", 3, dict(lr=0.05, betas=(0.8, 0.9), eps=1e-6))):
        torch.manual_seed(13)
        p = torch.randn(7, requires_grad=True)
        w.tensor(f"{name}.p0", p)
        opt = torch.optim.Adam([p], **kw)
        for t in range(1, steps + 1):
            g = torch.randn(7)
            p.grad = g.clone()
            opt.step()
            state = opt.state[p]
            w.tensor(f"{name}.g{t}", g)
            w.tensor(f"{name}.p{t}", p)
            w.tensor(f"{name}.m{t}", state["exp_avg"])
            w.tensor(f"{name}.v{t}", state["exp_avg_sq"])
    w.close()


if __name__ == "__main__":
    main()
