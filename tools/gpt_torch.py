"""The benchmark's GPT training step in PyTorch: the peer of examples/bench.rs `gpt_step` and of
src/models/gpt.rs. Same shape: token and position embeddings, pre-norm blocks of causal
self-attention (scaled_dot_product_attention) and a tanh-GELU MLP, a final LayerNorm, a linear
head without bias; AdamW (lr 3e-4, weight decay 0.1); next-token cross entropy over every
position of random tokens. Imported by tools/bench_compare.py, which times it eager and under
torch.compile.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.c_attn, self.c_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.c_fc, self.mlp_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, w = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(w, dim=2)
        q, k, v = (u.view(b, t, self.heads, w // self.heads).transpose(1, 2) for u in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, w)
        x = x + self.c_proj(attn)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, context, layers, heads, width):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.h = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def train_step(model, compiled):
    """A training step of `model` (compiled with torch.compile when `compiled`), closed over its
    optimizer: takes tokens [batch, tokens] and targets [batch * tokens], returns the loss."""
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    forward = torch.compile(model) if compiled else model

    def step(tokens, targets):
        opt.zero_grad()
        logits = forward(tokens)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets)
        loss.backward()
        opt.step()
        return loss.item()

    return step
