import torch
import torch.nn.functional as F

torch.manual_seed(3)
torch.set_printoptions(precision=2, sci_mode=False)

T = 4
tokens = ["<s>", "warm", "dosa", "please"]
scores = torch.randn(T, T)  # pretend these came from Q @ K^T / sqrt(d_k)

mask = torch.tril(torch.ones(T, T))          # lower triangle of ones
masked = scores.masked_fill(mask == 0, float("-inf"))
weights = F.softmax(masked, dim=-1)

print("Causal mask (1 = allowed, 0 = blocked):")
print(mask)
print("\nAttention weights after causal masking:")
print(weights)
print("\nRow by row (a token can only look left, never right):")
for i, tok in enumerate(tokens):
    seen = ", ".join(tokens[j] for j in range(T) if weights[i][j] > 0)
    print(f"  {tok:>8} can attend to: {seen}")
