"""The seed's VarLenAttention module with eagle's varlen attention swapped in, trained to match a
teacher on packed ragged batches (Zipf-distributed lengths, a capacity tail of padding rows).

Runs on the GPU when one is there (bf16), else on the CPU (f32, small); checks that the loss
falls. Needs torch (skipped by the tests without it)."""

import math

import torch
from torch import nn

import eagle.torch as et


# [readme:py-torch]
class VarLenAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int) -> torch.Tensor:
        tokens = x.shape[0]
        q, k, v = self.qkv(x).view(tokens, 3, self.num_heads, self.head_dim).unbind(dim=1)
        attn = et.varlen_attn(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen)
        return self.out_proj(attn.reshape(tokens, -1))  # padding rows of attn are 0
# [/readme]


def zipf_batch(tokens, sequences, capacity, dim, device, dtype, gen):
    """A packed batch: `sequences` lengths from a Zipf law summing to `tokens`, padded to
    `capacity` rows. The padding rows hold stale values (what the last, longer batch left):
    finite, since the projections read them, and their gradient must be 0, not merely small."""
    ranks = torch.randperm(sequences, generator=gen) + 1
    weights = ranks.double().pow(-1.2)
    lengths = (weights * ((tokens - sequences) / weights.sum())).floor().long() + 1
    lengths[0] += tokens - int(lengths.sum())
    cu = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]).to(torch.int32)
    x = torch.randn(capacity, dim, generator=gen).to(device, dtype)
    x[tokens:] = 1e3 * torch.randn(capacity - tokens, dim, generator=gen).to(device, dtype)
    return x, cu.to(device), int(lengths.max())


def reference_attention(q, k, v, cu):
    """The teacher's attention: torch's SDPA per sequence."""
    out, bounds = [], cu.tolist()
    for s, e in zip(bounds[:-1], bounds[1:]):
        out.append(nn.functional.scaled_dot_product_attention(
            *(t[s:e].transpose(0, 1) for t in (q, k, v))).transpose(0, 1))
    return torch.cat(out)


def main():
    cuda = torch.cuda.is_available()
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    dim, heads, tokens, capacity, steps = (512, 8, 4096, 4608, 60) if cuda else (32, 4, 96, 112, 60)
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    teacher = nn.Linear(dim, 3 * dim, bias=False).to(device, dtype)
    model = VarLenAttention(dim, heads).to(device, dtype)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(steps):
        x, cu, max_len = zipf_batch(tokens, 8, capacity, dim, device, dtype, gen)
        with torch.no_grad():
            tq, tk, tv = teacher(x[:tokens]).view(tokens, 3, heads, dim // heads).unbind(dim=1)
            target = reference_attention(tq, tk, tv, cu).reshape(tokens, dim)
        y = model(x, cu, max_len)
        loss = (y[:tokens] - target).float().square().mean()
        opt.zero_grad()
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters()), "a NaN reached a gradient"
        opt.step()
        losses.append(loss.item())
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {steps} steps on {device}")
    assert losses[-1] < 0.7 * losses[0] and math.isfinite(losses[-1])


if __name__ == "__main__":
    main()
