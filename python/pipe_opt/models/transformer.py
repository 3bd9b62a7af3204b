"""Encoder-decoder Transformer (Vaswani et al. 2017, "Attention Is All You
Need"): an encoder of self-attention blocks, a decoder of causal
self-attention, cross-attention over the encoder's output and feed-forward
blocks, post-LayerNorm (LN(x + sublayer(x))) with ReLU feed-forward layers.

As in the paper, one embedding matrix is shared by the source tokens, the
target tokens and the pre-softmax projection, and embeddings are multiplied
by sqrt(d_model). Positions are learned embeddings (one table per side), the
variant of the paper's Table 3 row (E), instead of sinusoids, so that the
graph needs no Sin/Cos. The real configuration is the base model (N = 6,
d_model 512, 8 heads, d_ff 2048, dropout 0.1) with a shared vocabulary of
37,000 tokens and 512 positions: 63,606,784 parameters (the paper's Table 3
gives 65 million for its base model).

Inputs are `src_ids` [batch, src_len] and `tgt_ids` [batch, tgt_len] (the
decoder's input, the targets shifted right); the output is `logits`
[batch, tgt_len, vocab].
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import torch
from torch import nn
from torch.nn import functional as F


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    vocab_size: int = 37000
    max_positions: int = 512
    hidden: int = 512          # d_model
    layers: int = 6            # N, for the encoder and for the decoder
    heads: int = 8
    ffn: int = 2048            # d_ff
    dropout: float = 0.1
    layer_norm_eps: float = 1e-5
    # Sequence lengths of the exported graph (static).
    src_len: int = 128
    tgt_len: int = 128


REAL = TransformerConfig()
TINY = TransformerConfig(vocab_size=128, max_positions=16, hidden=32, layers=2, heads=4,
                         ffn=128, src_len=16, tgt_len=12)


class Attention(nn.Module):
    """Multi-head attention; keys and values from `memory` (cross-attention)
    or from x itself (self-attention), optionally causal."""

    def __init__(self, config: TransformerConfig, causal: bool = False):
        super().__init__()
        self.heads = config.heads
        self.hidden = config.hidden
        # Python ints, so the exported graph holds constants, not shape arithmetic.
        self.head_dim = config.hidden // config.heads
        self.causal = causal
        self.query = nn.Linear(config.hidden, config.hidden)
        self.key = nn.Linear(config.hidden, config.hidden)
        self.value = nn.Linear(config.hidden, config.hidden)
        self.output = nn.Linear(config.hidden, config.hidden)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, memory: Optional[torch.Tensor] = None) -> torch.Tensor:
        source = x if memory is None else memory
        batch, length, _ = x.size()
        source_length = source.size(1)
        heads, head_dim = self.heads, self.head_dim
        q = self.query(x).view(batch, length, heads, head_dim).transpose(1, 2)
        k = self.key(source).view(batch, source_length, heads, head_dim).transpose(1, 2)
        v = self.value(source).view(batch, source_length, heads, head_dim).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head_dim))
        if self.causal:
            allowed = torch.ones(length, source_length, dtype=x.dtype, device=x.device).tril()
            scores = scores.masked_fill(allowed == 0, float("-inf"))
        probs = self.dropout(F.softmax(scores, dim=-1))
        y = (probs @ v).transpose(1, 2).reshape(batch, length, self.hidden)
        return self.output(y)


class FeedForward(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.hidden, config.ffn)
        self.fc2 = nn.Linear(config.ffn, config.hidden)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


class EncoderLayer(nn.Module):
    """LN(x + self_attn(x)), then LN(x + ffn(x))."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.self_attn = Attention(config)
        self.self_attn_dropout = nn.Dropout(config.dropout)
        self.self_attn_norm = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.ffn = FeedForward(config)
        self.ffn_dropout = nn.Dropout(config.dropout)
        self.ffn_norm = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.self_attn_norm(x + self.self_attn_dropout(self.self_attn(x)))
        return self.ffn_norm(x + self.ffn_dropout(self.ffn(x)))


class DecoderLayer(nn.Module):
    """LN(x + causal_self_attn(x)), LN(x + cross_attn(x, memory)), LN(x + ffn(x))."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.self_attn = Attention(config, causal=True)
        self.self_attn_dropout = nn.Dropout(config.dropout)
        self.self_attn_norm = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.cross_attn = Attention(config)
        self.cross_attn_dropout = nn.Dropout(config.dropout)
        self.cross_attn_norm = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.ffn = FeedForward(config)
        self.ffn_dropout = nn.Dropout(config.dropout)
        self.ffn_norm = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        x = self.self_attn_norm(x + self.self_attn_dropout(self.self_attn(x)))
        x = self.cross_attn_norm(x + self.cross_attn_dropout(self.cross_attn(x, memory)))
        return self.ffn_norm(x + self.ffn_dropout(self.ffn(x)))


class Transformer(nn.Module):
    def __init__(self, config: TransformerConfig = REAL):
        super().__init__()
        self.config = config
        self.scale = math.sqrt(config.hidden)
        # Shared by source and target tokens and the output projection.
        self.embedding = nn.Embedding(config.vocab_size, config.hidden)
        self.src_positions = nn.Embedding(config.max_positions, config.hidden)
        self.tgt_positions = nn.Embedding(config.max_positions, config.hidden)
        self.src_dropout = nn.Dropout(config.dropout)
        self.tgt_dropout = nn.Dropout(config.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(config) for _ in range(config.layers))
        self.decoder = nn.ModuleList(DecoderLayer(config) for _ in range(config.layers))
        # Scaled by sqrt(d_model) on the way in and used as the output
        # projection, the shared embedding starts at std d_model^-1/2 (as in
        # the paper's reference implementation, tensor2tensor).
        nn.init.normal_(self.embedding.weight, std=config.hidden ** -0.5)

    def embed(self, ids: torch.Tensor, positions: nn.Embedding) -> torch.Tensor:
        index = torch.arange(ids.size(1), device=ids.device)
        return self.embedding(ids) * self.scale + positions(index)

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        memory = self.src_dropout(self.embed(src_ids, self.src_positions))
        for layer in self.encoder:
            memory = layer(memory)
        x = self.tgt_dropout(self.embed(tgt_ids, self.tgt_positions))
        for layer in self.decoder:
            x = layer(x, memory)
        # The pre-softmax projection is the embedding matrix (tied, no bias).
        return x @ self.embedding.weight.t()
