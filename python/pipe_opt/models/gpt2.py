"""GPT-2-style decoder (Radford et al. 2019): pre-LayerNorm blocks with causal
self-attention and a language-model head tied to the token embedding.

The real configuration is GPT-2 small: 124,439,808 parameters (the tied head
counted once). The causal mask is built in the graph (ones, lower triangle),
so it exports as ConstantOfShape + Trilu + Where and needs opset 14 or later.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn
from torch.nn import functional as F


@dataclasses.dataclass(frozen=True)
class Gpt2Config:
    vocab_size: int = 50257
    max_positions: int = 1024
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    mlp_ratio: int = 4
    dropout: float = 0.1
    layer_norm_eps: float = 1e-5
    # Sequence length of the exported graph (static).
    seq_len: int = 1024


REAL = Gpt2Config()
TINY = Gpt2Config(vocab_size=256, max_positions=32, hidden=48, layers=2, heads=4, seq_len=32)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: Gpt2Config):
        super().__init__()
        self.heads = config.heads
        self.hidden = config.hidden
        # Python ints, so the exported graph holds constants, not shape arithmetic.
        self.head_dim = config.hidden // config.heads
        self.c_attn = nn.Linear(config.hidden, 3 * config.hidden)
        self.c_proj = nn.Linear(config.hidden, config.hidden)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.size()
        hidden, head_dim = self.hidden, self.head_dim
        q, k, v = self.c_attn(x).split(hidden, dim=2)
        q = q.view(batch, seq, self.heads, head_dim).transpose(1, 2)
        k = k.view(batch, seq, self.heads, head_dim).transpose(1, 2)
        v = v.view(batch, seq, self.heads, head_dim).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head_dim))
        causal = torch.ones(seq, seq, dtype=x.dtype, device=x.device).tril()
        scores = scores.masked_fill(causal == 0, float("-inf"))
        probs = self.attn_dropout(F.softmax(scores, dim=-1))
        y = (probs @ v).transpose(1, 2).reshape(batch, seq, hidden)
        return self.resid_dropout(self.c_proj(y))


class Mlp(nn.Module):
    def __init__(self, config: Gpt2Config):
        super().__init__()
        inner = config.mlp_ratio * config.hidden
        self.c_fc = nn.Linear(config.hidden, inner)
        # GPT-2 uses the tanh approximation of GELU.
        self.act = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(inner, config.hidden)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class Block(nn.Module):
    """x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, config: Gpt2Config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.mlp = Mlp(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2(nn.Module):
    def __init__(self, config: Gpt2Config = REAL):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.hidden)
        self.wpe = nn.Embedding(config.max_positions, config.hidden)
        self.drop = nn.Dropout(config.dropout)
        self.h = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.ln_f = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.lm_head = nn.Linear(config.hidden, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one tensor, named wte.weight

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.drop(self.wte(input_ids) + self.wpe(positions))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))
