import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(1)

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0
        self.h = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x, mask=None):
        B, T, D = x.shape
        q = self.W_q(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / (self.d_k ** 0.5)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        attn = F.softmax(scores, dim=-1)
        ctx = (attn @ v).transpose(1, 2).contiguous().view(B, T, D)
        return self.W_o(ctx)

d_model, heads = 8, 2
mine = MultiHeadAttention(d_model, heads)
ref = nn.MultiheadAttention(d_model, heads, batch_first=True)

# Copy PyTorch's packed Q/K/V weights into our separate layers
wq, wk, wv = ref.in_proj_weight.chunk(3, dim=0)
bq, bk, bv = ref.in_proj_bias.chunk(3, dim=0)
with torch.no_grad():
    mine.W_q.weight.copy_(wq); mine.W_q.bias.copy_(bq)
    mine.W_k.weight.copy_(wk); mine.W_k.bias.copy_(bk)
    mine.W_v.weight.copy_(wv); mine.W_v.bias.copy_(bv)
    mine.W_o.weight.copy_(ref.out_proj.weight); mine.W_o.bias.copy_(ref.out_proj.bias)

x = torch.randn(1, 5, d_model)
out_mine = mine(x)
out_ref, _ = ref(x, x, x)

print("Our output shape:      ", tuple(out_mine.shape))
print("PyTorch output shape:  ", tuple(out_ref.shape))
print("Max absolute difference:", (out_mine - out_ref).abs().max().item())
print("Outputs match (atol 1e-5):", torch.allclose(out_mine, out_ref, atol=1e-5))
