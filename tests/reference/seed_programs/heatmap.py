import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_printoptions(precision=3, sci_mode=False)

words = ["Aditi", "loves", "warm", "dosa"]
seq_len, d_model = 4, 4

# Toy token embeddings (normally learned)
X = torch.randn(seq_len, d_model)

# One shared set of projection weights (normally learned)
W_q = torch.randn(d_model, d_model) * 0.5
W_k = torch.randn(d_model, d_model) * 0.5
W_v = torch.randn(d_model, d_model) * 0.5

Q = X @ W_q            # Queries: "what am I looking for?"
K = X @ W_k            # Keys:    "what do I contain?"
V = X @ W_v            # Values:  "what do I offer?"

d_k = Q.shape[-1]
scores = Q @ K.T                 # every query dotted with every key
scaled = scores / (d_k ** 0.5)   # keep the numbers gentle
weights = F.softmax(scaled, dim=-1)  # each row becomes probabilities
output = weights @ V             # blend the values

print("Q = X @ W_q")
print(Q)
print("\nRaw scores = Q @ K^T, shape", tuple(scores.shape))
print(scores)
print("\nScaled scores = scores / sqrt(d_k), d_k =", d_k)
print(scaled)
print("\nAttention weights = softmax(scaled), each row sums to 1")
print(weights)
print("row sums:", weights.sum(dim=-1))
print("\nOutput = weights @ V, shape", tuple(output.shape))
print(output)

# --- heatmap.py (continues scaled_dot_product.py) ---

print("Attention map (rows = query word, columns = attended word):")
header = "          " + "".join(f"{w:>8}" for w in words)
print(header)
for i, w in enumerate(words):
    row = "".join(f"{weights[i][j].item():>8.2f}" for j in range(seq_len))
    print(f"{w:>10}{row}")
