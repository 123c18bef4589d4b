#!/usr/bin/python3
"""Write tiny Hugging Face folders of the Llama family and what PyTorch computes with them (issue 48),
under tests/reference/fixtures/hf/:

  <family>/config.json               as Hugging Face writes it for the architecture (the fields the model reads)
  <family>/generation_config.json    eos_token_id (a list for llama32, as Llama 3.2's; an id elsewhere)
  <family>/model.safetensors         the weights, BF16, under Hugging Face's names
      (smollm2: model-00001-of-00002.safetensors, model-00002-of-00002.safetensors and
       model.safetensors.index.json, its weight_map naming each tensor's shard)
  <family>_expected.safetensors      "ids" int64 [2, 12]; "logits" float32 [2, 12, vocab] of those ids;
                                     "loss" float32 [] the mean cross-entropy of predicting ids[:, 1:] from
                                     ids[:, :-1]'s logits, and "grad.<name>" float32 its gradient for every
                                     parameter; "greedy" int64 [8]: the greedy continuation of ids[0, :5]

The families:
  llama32   LlamaForCausalLM like Llama 3.2: rope_theta 500000, rope_scaling of type llama3, tied head, 4 heads
            sharing 2 key/value heads
  qwen2     Qwen2ForCausalLM: biases on q, k, v; sliding_window set but use_sliding_window false; tied
  qwen3     Qwen3ForCausalLM: RMSNorm over each head of q and k before RoPE; head_dim 16 with width 32 and
            4 heads (so q_proj is [64, 32]); untied head
  smollm2   LlamaForCausalLM shaped like SmolLM2 (3 heads, 1 key/value head, theta 100000), tied, in 2 shards
  mistral   MistralForCausalLM without a sliding window (sliding_window null); untied, 4 heads, 1 kv head

The model below is written from the blocks' description (no `transformers`): RMSNorm x·rsqrt(mean(x²)+eps)·w;
RoPE in Hugging Face's rotate_half convention (dimension j pairs with j + d/2), inv_freq = 1/θ^(2i/d) and
Llama 3's rescaling of the long wavelengths; grouped-query attention (query head h reads key/value head
h // (heads // kv_heads)), scores q·kᵀ·d^-½, causal, softmax; the SwiGLU MLP down(silu(gate(x))·up(x));
pre-norm residual blocks; logits = lm_head(norm(x)) with lm_head = embed_tokens when tied. Everything is
computed in float32 from the BF16-rounded weights (what a reader widening BF16 to float32 holds), on one thread.

The safetensors format is written with struct and json (8-byte little-endian header length, JSON header,
raw data), so the `safetensors` module is not needed.
Run with the Debian PyTorch:  /usr/bin/python3 tests/reference/make_llama_fixture.py
"""
import json
import math
import os
import struct

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "hf")

VOCAB = 64

FAMILIES = {
    "llama32": dict(architecture="LlamaForCausalLM", model_type="llama", hidden=32, intermediate=48, layers=2,
                    heads=4, kv_heads=2, head_dim=8, rope_theta=500000.0, tied=True, eos=[60, 61, 62],
                    rope_scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                  "original_max_position_embeddings": 512, "rope_type": "llama3"},  # pair 1 (wavelength 167) blended
                    max_positions=256, eps=1e-5),
    "qwen2": dict(architecture="Qwen2ForCausalLM", model_type="qwen2", hidden=32, intermediate=48, layers=2,
                  heads=4, kv_heads=2, head_dim=None, rope_theta=1000000.0, tied=True, eos=63, bias=True,
                  max_positions=128, eps=1e-6, sliding_window=32, use_sliding_window=False),
    "qwen3": dict(architecture="Qwen3ForCausalLM", model_type="qwen3", hidden=32, intermediate=48, layers=2,
                  heads=4, kv_heads=2, head_dim=16, rope_theta=1000000.0, tied=False, eos=[63, 62], qk_norm=True,
                  max_positions=128, eps=1e-6, sliding_window=None, use_sliding_window=False),
    "smollm2": dict(architecture="LlamaForCausalLM", model_type="llama", hidden=48, intermediate=64, layers=2,
                    heads=3, kv_heads=1, head_dim=None, rope_theta=100000.0, tied=True, eos=2, max_positions=64,
                    eps=1e-5, shards=2),
    "mistral": dict(architecture="MistralForCausalLM", model_type="mistral", hidden=32, intermediate=48, layers=2,
                    heads=4, kv_heads=1, head_dim=8, rope_theta=10000.0, tied=False, eos=2, max_positions=64,
                    eps=1e-5, sliding_window=None),
}


def head_dim_of(f):
    return f["head_dim"] or f["hidden"] // f["heads"]


def parameter_shapes(f):
    """Every tensor of the folder, in Hugging Face's order, with its shape."""
    h, d, i = f["hidden"], head_dim_of(f), f["intermediate"]
    shapes = {"model.embed_tokens.weight": (VOCAB, h)}
    for n in range(f["layers"]):
        p = f"model.layers.{n}."
        shapes[p + "self_attn.q_proj.weight"] = (f["heads"] * d, h)
        if f.get("bias"):
            shapes[p + "self_attn.q_proj.bias"] = (f["heads"] * d,)
        shapes[p + "self_attn.k_proj.weight"] = (f["kv_heads"] * d, h)
        if f.get("bias"):
            shapes[p + "self_attn.k_proj.bias"] = (f["kv_heads"] * d,)
        shapes[p + "self_attn.v_proj.weight"] = (f["kv_heads"] * d, h)
        if f.get("bias"):
            shapes[p + "self_attn.v_proj.bias"] = (f["kv_heads"] * d,)
        shapes[p + "self_attn.o_proj.weight"] = (h, f["heads"] * d)
        if f.get("qk_norm"):
            shapes[p + "self_attn.q_norm.weight"] = (d,)
            shapes[p + "self_attn.k_norm.weight"] = (d,)
        shapes[p + "mlp.gate_proj.weight"] = (i, h)
        shapes[p + "mlp.up_proj.weight"] = (i, h)
        shapes[p + "mlp.down_proj.weight"] = (h, i)
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
    shapes["model.norm.weight"] = (h,)
    if not f["tied"]:
        shapes["lm_head.weight"] = (VOCAB, h)
    return shapes


def random_weights(f, g):
    """Wider than the 0.02 of training from scratch, so that the logits differ clearly from token to token
    and a wrong pairing, head or transpose cannot hide. Rounded to BF16, the file's dtype."""
    w = {}
    for name, shape in parameter_shapes(f).items():
        t = torch.randn(*shape, generator=g)
        if name.endswith("norm.weight"):
            t = 1 + 0.2 * t
        elif name.endswith(".bias"):
            t = 0.3 * t
        elif name.endswith("embed_tokens.weight"):
            t = 1.0 * t
        else:
            t = t / math.sqrt(shape[1]) * 1.5  # fan-in scaled
        w[name] = t.to(torch.bfloat16)
    return w


def rms_norm(x, weight, eps):
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def inverse_frequencies(f):
    d = head_dim_of(f)
    inv_freq = 1.0 / (f["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    s = f.get("rope_scaling")
    if s:  # Llama 3's: long wavelengths stretched by factor, short ones kept, the middle blended
        factor, low, high, old = s["factor"], s["low_freq_factor"], s["high_freq_factor"], s["original_max_position_embeddings"]
        low_freq_wavelen, high_freq_wavelen = old / low, old / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
        inv_freq = torch.where(is_medium, smoothed, scaled)
    return inv_freq


def rope_tables(inv_freq, t):
    positions = torch.arange(t).float()
    freqs = positions[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def attention(f, w, p, x, cos, sin):
    b, t, _ = x.shape
    d, heads, kv_heads = head_dim_of(f), f["heads"], f["kv_heads"]
    q = F.linear(x, w[p + "q_proj.weight"], w.get(p + "q_proj.bias")).view(b, t, heads, d)
    k = F.linear(x, w[p + "k_proj.weight"], w.get(p + "k_proj.bias")).view(b, t, kv_heads, d)
    v = F.linear(x, w[p + "v_proj.weight"], w.get(p + "v_proj.bias")).view(b, t, kv_heads, d)
    if f.get("qk_norm"):
        q = rms_norm(q, w[p + "q_norm.weight"], f["eps"])
        k = rms_norm(k, w[p + "k_norm.weight"], f["eps"])
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    groups = heads // kv_heads  # query head h reads key/value head h // groups
    k = k.repeat_interleave(groups, dim=1)
    v = v.repeat_interleave(groups, dim=1)
    scores = torch.matmul(q, k.transpose(2, 3)) * d ** -0.5
    future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    out = torch.matmul(weights, v).transpose(1, 2).reshape(b, t, heads * d)
    return F.linear(out, w[p + "o_proj.weight"])


def forward(f, w, ids):
    cos, sin = rope_tables(inverse_frequencies(f), ids.shape[1])
    x = w["model.embed_tokens.weight"][ids]
    for n in range(f["layers"]):
        p = f"model.layers.{n}."
        x = x + attention(f, w, p + "self_attn.", rms_norm(x, w[p + "input_layernorm.weight"], f["eps"]), cos, sin)
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], f["eps"])
        m = p + "mlp."
        x = x + F.linear(F.silu(F.linear(h, w[m + "gate_proj.weight"])) * F.linear(h, w[m + "up_proj.weight"]),
                         w[m + "down_proj.weight"])
    x = rms_norm(x, w["model.norm.weight"], f["eps"])
    head = w["model.embed_tokens.weight"] if f["tied"] else w["lm_head.weight"]
    return F.linear(x, head)


def config_json(f):
    c = {"architectures": [f["architecture"]], "model_type": f["model_type"], "vocab_size": VOCAB,
         "hidden_size": f["hidden"], "intermediate_size": f["intermediate"], "num_hidden_layers": f["layers"],
         "num_attention_heads": f["heads"], "num_key_value_heads": f["kv_heads"],
         "max_position_embeddings": f["max_positions"], "rms_norm_eps": f["eps"], "rope_theta": f["rope_theta"],
         "hidden_act": "silu", "tie_word_embeddings": f["tied"], "torch_dtype": "bfloat16", "initializer_range": 0.02,
         "bos_token_id": 1, "eos_token_id": f["eos"] if isinstance(f["eos"], int) else f["eos"][0],
         "use_cache": True, "attention_dropout": 0.0}
    if f["head_dim"]:
        c["head_dim"] = f["head_dim"]
    if f["model_type"] == "llama":
        c.update(attention_bias=False, mlp_bias=False, pretraining_tp=1, rope_scaling=f.get("rope_scaling"))
    if f["model_type"] in ("qwen2", "qwen3"):
        c.update(sliding_window=f["sliding_window"], use_sliding_window=f["use_sliding_window"], max_window_layers=f["layers"],
                 rope_scaling=None)
    if f["model_type"] == "qwen3":
        c["attention_bias"] = False
    if f["model_type"] == "mistral":
        c["sliding_window"] = f["sliding_window"]
    return c


def tensor_bytes(t):
    if t.dtype == torch.bfloat16:
        return "BF16", t.contiguous().view(torch.int16).numpy().tobytes()
    codes = {torch.float32: "F32", torch.int64: "I64"}
    return codes[t.dtype], t.contiguous().numpy().tobytes()


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        code, data = tensor_bytes(t)
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    print("wrote", os.path.relpath(path, HERE), os.path.getsize(path), "bytes")


def write_json(path, value):
    with open(path, "w") as out:
        json.dump(value, out, indent=2)
        out.write("\n")


def write_folder(name, f, w):
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    write_json(os.path.join(folder, "config.json"), config_json(f))
    write_json(os.path.join(folder, "generation_config.json"), {"bos_token_id": 1, "eos_token_id": f["eos"]})
    shards = f.get("shards", 1)
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), w, {"format": "pt"})
        return
    names = list(w)
    per_shard = (len(names) + shards - 1) // shards
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: w[n] for n in names[s * per_shard:(s + 1) * per_shard]}
        write_safetensors(os.path.join(folder, file), part, {"format": "pt"})
        weight_map.update({n: file for n in part})
    total = sum(t.numel() * 2 for t in w.values())
    write_json(os.path.join(folder, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": weight_map})


def expected(f, w16, ids):
    w = {name: t.float().requires_grad_() for name, t in w16.items()}  # float32 from the BF16 values
    logits = forward(f, w, ids)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
    loss.backward()
    out = {"ids": ids, "logits": logits.detach().contiguous(), "loss": loss.detach().reshape(())}
    for name, t in w.items():
        out["grad." + name] = t.grad.contiguous()
    with torch.no_grad():  # greedy: the whole sequence again each step, no cache
        seq = ids[0, :5].tolist()
        for _ in range(8):
            seq.append(int(forward(f, w, torch.tensor([seq]))[0, -1].argmax()))
    out["greedy"] = torch.tensor(seq[5:], dtype=torch.int64)
    return out


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    for seed, (name, f) in enumerate(FAMILIES.items()):
        g = torch.Generator().manual_seed(4800 + seed)
        w = random_weights(f, g)
        ids = torch.randint(0, VOCAB, (2, 12), generator=g)
        write_folder(name, f, w)
        write_safetensors(os.path.join(OUT, name + "_expected.safetensors"), expected(f, w, ids),
                          {"source": "tests/reference/make_llama_fixture.py"})


if __name__ == "__main__":
    main()
