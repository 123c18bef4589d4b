# attention_from_scratch.py -- the programs behind the web page "Attention from Scratch"
# (seed 000), following chapter 3 of Sebastian Raschka's "Build a Large Language Model
# (From Scratch)" (Apache 2.0 notebook).  Four acts plus "the lab".  A C++ twin prints the
# same bytes, so everything printed is a tensor, a shape tuple, or an f-string number.
import torch
import torch.nn as nn

# The page prints with 4 decimals.
torch.set_printoptions(precision=4)

inputs = torch.tensor(
    [[0.43, 0.15, 0.89],  # Your     (x^1)
     [0.55, 0.87, 0.66],  # journey  (x^2)
     [0.57, 0.85, 0.64],  # starts   (x^3)
     [0.22, 0.58, 0.33],  # with     (x^4)
     [0.77, 0.25, 0.10],  # one      (x^5)
     [0.05, 0.80, 0.55]]  # step     (x^6)
)
words = ["Your", "journey", "starts", "with", "one", "step"]
d_in, d_out = 3, 2

# ---------------------------------------------------------------------------
print("== Act 1: attention without weights ==")
attn_scores = inputs @ inputs.T
attn_weights = torch.softmax(attn_scores, dim=-1)
all_context_vecs = attn_weights @ inputs
print("attn_scores = inputs @ inputs.T")
print(attn_scores)
print("attn_weights = softmax(attn_scores, dim=-1)")
print(attn_weights)
print("row sums:", attn_weights.sum(dim=-1))
print("all_context_vecs = attn_weights @ inputs")
print(all_context_vecs)


# ---------------------------------------------------------------------------
class SelfAttention_v1(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x):
        keys = x @ self.W_key
        queries = x @ self.W_query
        values = x @ self.W_value
        attn_scores = queries @ keys.T  # omega
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        context_vec = attn_weights @ values
        return context_vec


class SelfAttention_v2(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.T
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        return attn_weights @ values


print()
print("== Act 2: trainable query, key and value weights ==")
torch.manual_seed(123)
sa_v1 = SelfAttention_v1(d_in, d_out)
print("SelfAttention_v1 (torch.manual_seed(123)) output:")
print(sa_v1(inputs))

torch.manual_seed(789)
sa_v2 = SelfAttention_v2(d_in, d_out)
print("SelfAttention_v2 (torch.manual_seed(789)) output:")
print(sa_v2(inputs))
with torch.no_grad():
    queries = sa_v2.W_query(inputs)
    keys = sa_v2.W_key(inputs)
    attn_scores_v2 = queries @ keys.T
    attn_weights_v2 = torch.softmax(attn_scores_v2 / keys.shape[-1]**0.5, dim=-1)
print("SelfAttention_v2 attention weights:")
print(attn_weights_v2)


# ---------------------------------------------------------------------------
class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask",
            torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores.masked_fill_(
            self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values
        return context_vec


print()
print("== Act 3: causal attention ==")
context_length = attn_scores_v2.shape[0]
mask = torch.triu(torch.ones(context_length, context_length), diagonal=1)
masked = attn_scores_v2.masked_fill(mask.bool(), -torch.inf)
print("masked scores (SelfAttention_v2, upper triangle = -inf):")
print(masked)
attn_weights_masked = torch.softmax(masked / keys.shape[-1]**0.5, dim=-1)
print("masked attention weights = softmax(masked / sqrt(d_k)):")
print(attn_weights_masked)

torch.manual_seed(123)
dropout = torch.nn.Dropout(0.5)
example = torch.ones(6, 6)
print("dropout(0.5) on ones(6, 6) (torch.manual_seed(123)):")
print(dropout(example))

batch = torch.stack((inputs, inputs), dim=0)
print("batch shape:", tuple(batch.shape))
torch.manual_seed(123)
context_length = batch.shape[1]
ca = CausalAttention(d_in, d_out, context_length, 0.0)
context_vecs = ca(batch)
print("CausalAttention (torch.manual_seed(123)) context_vecs:")
print(context_vecs)
print("context_vecs.shape:", tuple(context_vecs.shape))


# ---------------------------------------------------------------------------
class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
             for _ in range(num_heads)])

    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key   = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask",
            torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys    = self.W_key(x)      # (b, num_tokens, d_out)
        queries = self.W_query(x)
        values  = self.W_value(x)

        # split d_out into heads → (b, num_tokens, num_heads, head_dim)
        keys    = keys.view(b, num_tokens, self.num_heads, self.head_dim)
        values  = values.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)

        # heads become a batch dim → (b, num_heads, num_tokens, head_dim)
        keys, queries, values = keys.transpose(1, 2), queries.transpose(1, 2), values.transpose(1, 2)

        attn_scores = queries @ keys.transpose(2, 3)          # per-head dot products
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)

        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = (attn_weights @ values).transpose(1, 2) # (b, num_tokens, num_heads, head_dim)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)                     # combine heads


print()
print("== Act 4: multi-head attention ==")
torch.manual_seed(123)
context_length = batch.shape[1]
mha_wrapper = MultiHeadAttentionWrapper(d_in, d_out, context_length, 0.0, num_heads=2)
context_vecs = mha_wrapper(batch)
print("MultiHeadAttentionWrapper (torch.manual_seed(123), 2 heads) context_vecs:")
print(context_vecs)
print("context_vecs.shape:", tuple(context_vecs.shape))

torch.manual_seed(123)
batch_size, context_length, d_in = batch.shape
mha = MultiHeadAttention(d_in, d_out, context_length, 0.0, num_heads=2)
context_vecs = mha(batch)
print("MultiHeadAttention (torch.manual_seed(123), 2 heads) context_vecs:")
print(context_vecs)
print("context_vecs.shape:", tuple(context_vecs.shape))

# ---------------------------------------------------------------------------
print()
print("== The lab ==")
print("-- softmax temperature: softmax(attn_scores[1] / T), query 'journey' (act 1) --")
row = attn_scores[1]
print("attn_scores[1]:", row)
for T in [0.25, 0.5, 1.0, 2.0, 4.0]:
    w = torch.softmax(row / T, dim=-1)
    print(f"T = {T:.2f}:", w)

print("-- causal mask off vs on, query 'journey' (act 1, T = 1) --")
causal = torch.triu(torch.ones(6, 6), diagonal=1).bool()
w_off = torch.softmax(attn_scores, dim=-1)[1]
w_on = torch.softmax(attn_scores.masked_fill(causal, -torch.inf), dim=-1)[1]
print("mask off:", w_off)
print("mask on: ", w_on)
print("full causal weights (act 1 scores, mask on):")
print(torch.softmax(attn_scores.masked_fill(causal, -torch.inf), dim=-1))

print("-- one cell: query 'journey' meets key 'starts' --")
q_i, k_j = 1, 2
dot = (inputs[q_i] * inputs[k_j]).sum()
print("query:", inputs[q_i])
print("key:  ", inputs[k_j])
print("products:", inputs[q_i] * inputs[k_j])
print(f"score = {dot.item():.4f}, weight = {attn_weights[q_i, k_j].item():.4f}")

def row4(t):
    # plain fixed-point row: the unscaled weights span 1e-32..1, and their scientific-notation
    # digits would depend on the last bits of randn/exp
    return "[" + ", ".join(f"{v:.4f}" for v in t.tolist()) + "]"


print("-- the d_k slider: unscaled vs scaled softmax (torch.manual_seed(0)) --")
for d_k in [2, 8, 32, 128, 512]:
    torch.manual_seed(0)
    q = torch.randn(d_k)
    K = torch.randn(6, d_k)
    unscaled = torch.softmax(K @ q, dim=-1)
    scaled = torch.softmax(K @ q / d_k**0.5, dim=-1)
    print(f"d_k = {d_k}")
    print("  unscaled:", row4(unscaled))
    print("  scaled:  ", row4(scaled))
    print(f"  max weight: unscaled {unscaled.max().item():.4f}, scaled {scaled.max().item():.4f}")
