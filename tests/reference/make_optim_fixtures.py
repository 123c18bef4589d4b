#!/usr/bin/python3
"""Write the optimizer fixtures under tests/reference/fixtures/optim/.

Model (float32):  torch.manual_seed(0)
                  model  = Sequential(Linear(4, 3), Tanh(), Linear(3, 2))
                  x      = torch.randn(5, 4)
                  target = torch.randn(5, 2)
                  loss   = ((model(x) - target) ** 2).mean()
Every configuration starts from the same initial parameters and takes 20 steps of
    opt.zero_grad(); loss = loss_fn(); loss.backward(); opt.step()

Run with the Debian PyTorch:  /usr/bin/python3 tests/reference/make_optim_fixtures.py
The script re-runs itself once per torch CPU kernel family (as make_random_fixtures.py does):
  ATEN_CPU_CAPABILITY=default -> fixtures/optim/default/  (portable scalar kernels, no fused multiply-add)
  ATEN_CPU_CAPABILITY=avx2    -> fixtures/optim/avx2/     (what a plain `python3` run uses on AVX2 machines)
and then replays every recorded step in numpy (verify()) to prove the documented update formulas.
The format is described in fixtures/optim/README.md.
"""
import copy
import os
import subprocess
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_ROOT = os.path.join(HERE, "fixtures", "optim")
CAPABILITIES = ("default", "avx2")
STEPS = 20

# (file stem, optimizer class name, kwargs).  kwargs list every hyperparameter the
# C++ side needs, so the header line is complete even where a value is a default.
CONFIGS = [
    ("sgd", "SGD", dict(lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False)),
    ("sgd_momentum", "SGD", dict(lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=False)),
    ("sgd_nesterov_wd", "SGD", dict(lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.01, nesterov=True)),
    ("sgd_momentum_dampening", "SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.0, nesterov=False)),
    ("adam", "Adam", dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False)),
    ("adam_wd", "Adam", dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1, amsgrad=False)),
    ("adam_amsgrad", "Adam", dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=True)),
    ("adamw", "AdamW", dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1, amsgrad=False)),
    ("adam_betas_eps", "Adam", dict(lr=0.05, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.0, amsgrad=False)),
]


def hexs(t):
    return " ".join(float.hex(float(v)) for v in t.detach().reshape(-1).tolist())


def tensor_line(name, t):
    fields = ["tensor", name, str(t.dim())] + [str(d) for d in t.shape] + [hexs(t)]
    return " ".join(fields)


def header_line(cls, kw):
    parts = [f"config {cls}"]
    for k, v in kw.items():
        if k == "betas":
            parts.append(f"beta1 {v[0]!r} beta2 {v[1]!r}")
        elif isinstance(v, bool):
            parts.append(f"{k} {int(v)}")
        else:
            parts.append(f"{k} {float(v)!r}")
    return " ".join(parts)


def generate(capability):
    assert os.environ.get("ATEN_CPU_CAPABILITY") == capability
    out = os.path.join(OUT_ROOT, capability)
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model0 = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    x = torch.randn(5, 4)
    target = torch.randn(5, 2)
    assert x.dtype == torch.float32

    for stem, cls, kw in CONFIGS:
        model = copy.deepcopy(model0)
        opt = getattr(torch.optim, cls)(model.parameters(), **kw)
        lines = [
            f"# scratchgrad optimizer fixture {stem}: torch {torch.__version__}, float32, "
            f"ATEN_CPU_CAPABILITY={capability}. Written by make_optim_fixtures.py; do not edit.",
            "# model Linear(4,3) Tanh Linear(3,2); loss mean((model(x)-target)^2)",
            header_line(cls, kw),
            f"steps {STEPS}",
            tensor_line("x", x),
            tensor_line("target", target),
            "init",
        ]
        for name, p in model.named_parameters():
            lines.append(tensor_line(name, p))
        for step in range(1, STEPS + 1):
            opt.zero_grad()
            loss = ((model(x) - target) ** 2).mean()
            loss.backward()
            lines.append(f"step {step} loss {float.hex(loss.item())}")
            for name, p in model.named_parameters():
                lines.append(tensor_line("grad." + name, p.grad))
            opt.step()
            for name, p in model.named_parameters():
                lines.append(tensor_line(name, p))
            for name, p in model.named_parameters():
                st = opt.state[p]
                for key in ("momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
                    if st.get(key) is not None:
                        lines.append(tensor_line(f"state.{name}.{key}", st[key]))
        with torch.no_grad():
            final = ((model(x) - target) ** 2).mean()
        lines.append(f"final loss {float.hex(final.item())}")
        lines.append("end")
        path = os.path.join(out, stem + ".txt")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{capability:8s} {stem:24s} final loss {final.item():.6f}")


# ---------------------------------------------------------------------------
# Self-check: re-read every written file with a plain line parser (the same rules a C++
# reader uses) and replay each step in numpy float32 from the recorded parameters, grads
# and optimizer state of the step before.  The update formulas below reproduce torch 1.13's
# CPU kernels bit for bit on these small tensors.  fma(a, b, c) is a*b + c: rounded once for
# the avx2 kernels (a fused multiply-add), twice (product, then sum) for the default ones.
def parse_fixture(path):
    import numpy as np
    cfg, tensors, init, steps, cur = None, {}, {}, [], None
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            if w[0] == "config":
                cfg = {"cls": w[1]}
                cfg.update({w[i]: float(w[i + 1]) for i in range(2, len(w), 2)})
            elif w[0] == "init":
                cur = init
            elif w[0] == "step":
                cur = {"loss": float.fromhex(w[3])}
                steps.append(cur)
            elif w[0] == "tensor":
                nd = int(w[2])
                shape = tuple(int(d) for d in w[3:3 + nd])
                vals = [float.fromhex(v) for v in w[3 + nd:]]
                arr = np.array(vals, dtype=np.float32).reshape(shape)
                (tensors if cur is None else cur)[w[1]] = arr
    return cfg, tensors, init, steps


def verify(capability):
    import math
    import numpy as np
    f32, f64 = np.float32, np.float64
    fused = capability != "default"

    def fma(a, b, c):
        if fused:
            return (np.asarray(a, f64) * np.asarray(b, f64) + np.asarray(c, f64)).astype(f32)
        return (np.asarray(a, f32) * np.asarray(b, f32) + np.asarray(c, f32)).astype(f32)

    for stem, _, _ in CONFIGS:
        cfg, _, init, steps = parse_fixture(os.path.join(OUT_ROOT, capability, stem + ".txt"))
        assert len(steps) == STEPS
        lr, wd = cfg["lr"], cfg["weight_decay"]
        prev = init
        for k, st in enumerate(steps, 1):
            for n in init:
                p, g = prev[n], st["grad." + n]
                zero = np.zeros_like(p)
                if cfg["cls"] == "SGD":
                    d = fma(f32(wd), p, g) if wd else g
                    mom = cfg["momentum"]
                    if mom:
                        buf = prev.get(f"state.{n}.momentum_buffer")
                        buf = d.copy() if buf is None else fma(f32(1 - cfg["dampening"]), d, buf * f32(mom))
                        assert np.array_equal(buf, st[f"state.{n}.momentum_buffer"]), (stem, k, n)
                        d = fma(f32(mom), buf, d) if cfg["nesterov"] else buf
                    new_p = fma(f32(-lr), d, p)
                else:
                    b1, b2, eps = cfg["beta1"], cfg["beta2"], cfg["eps"]
                    if cfg["cls"] == "AdamW":
                        p = p * f32(1 - lr * wd)
                    elif wd:
                        g = fma(f32(wd), p, g)
                    m = fma(f32(1 - b1), g, prev.get(f"state.{n}.exp_avg", zero) * f32(b1))
                    # addcmul_(g, g, value=1-b2): ((1-b2)*g) * g + v*b2
                    v = fma(f32(1 - b2) * g, g, prev.get(f"state.{n}.exp_avg_sq", zero) * f32(b2))
                    assert np.array_equal(m, st[f"state.{n}.exp_avg"]), (stem, k, n)
                    assert np.array_equal(v, st[f"state.{n}.exp_avg_sq"]), (stem, k, n)
                    if cfg["amsgrad"]:
                        v = np.maximum(prev.get(f"state.{n}.max_exp_avg_sq", zero), v)
                        assert np.array_equal(v, st[f"state.{n}.max_exp_avg_sq"]), (stem, k, n)
                    denom = np.sqrt(v) / f32(math.sqrt(1 - b2 ** k)) + f32(eps)
                    new_p = p + (f32(-lr / (1 - b1 ** k)) * m) / denom
                assert np.array_equal(new_p, st[n]), (stem, k, n, new_p - st[n])
            prev = st
    print(f"verify {capability}: every step of every fixture replays bit for bit")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--capability":
        generate(sys.argv[2])
        verify(sys.argv[2])
        return
    for capability in CAPABILITIES:
        env = dict(os.environ, ATEN_CPU_CAPABILITY=capability)
        subprocess.run([sys.executable, os.path.abspath(__file__), "--capability", capability],
                       env=env, check=True)


if __name__ == "__main__":
    main()
