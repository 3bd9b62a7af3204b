"""BERT-style encoder (Devlin et al. 2019): word + position + token-type
embeddings, post-LayerNorm encoder blocks, and the tanh pooler.

The real configuration is BERT-base: 109,482,240 parameters for the encoder
and pooler (no pre-training or task heads). The attention mask input is
optional; padded positions get -10000 added to their scores, as in the
original implementation.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Tuple

import torch
from torch import nn
from torch.nn import functional as F


@dataclasses.dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522
    max_positions: int = 512
    type_vocab_size: int = 2
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    intermediate: int = 3072
    dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    # Sequence length of the exported graph (static).
    seq_len: int = 128


REAL = BertConfig()
TINY = BertConfig(vocab_size=256, max_positions=64, hidden=48, layers=2, heads=4,
                  intermediate=192, seq_len=32)

MASKED_SCORE = -10000.0


class Embeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden)
        self.position_embeddings = nn.Embedding(config.max_positions, config.hidden)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden)
        self.LayerNorm = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: Optional[torch.Tensor]):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
             + self.token_type_embeddings(token_type_ids))
        return self.dropout(self.LayerNorm(x))


class SelfAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.heads = config.heads
        self.hidden = config.hidden
        # Python ints, so the exported graph holds constants, not shape arithmetic.
        self.head_dim = config.hidden // config.heads
        self.query = nn.Linear(config.hidden, config.hidden)
        self.key = nn.Linear(config.hidden, config.hidden)
        self.value = nn.Linear(config.hidden, config.hidden)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, mask_bias: Optional[torch.Tensor]) -> torch.Tensor:
        batch, seq, _ = x.size()
        hidden, head_dim = self.hidden, self.head_dim

        def split_heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, seq, self.heads, head_dim).transpose(1, 2)

        q, k, v = split_heads(self.query(x)), split_heads(self.key(x)), split_heads(self.value(x))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head_dim))
        if mask_bias is not None:
            scores = scores + mask_bias
        probs = self.dropout(F.softmax(scores, dim=-1))
        return (probs @ v).transpose(1, 2).reshape(batch, seq, hidden)


class Layer(nn.Module):
    """LN(x + attn(x)), then LN(x + ffn(x)): post-LayerNorm."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = SelfAttention(config)
        self.attention_output = nn.Linear(config.hidden, config.hidden)
        self.attention_dropout = nn.Dropout(config.dropout)
        self.attention_norm = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.intermediate = nn.Linear(config.hidden, config.intermediate)
        self.output = nn.Linear(config.intermediate, config.hidden)
        self.output_dropout = nn.Dropout(config.dropout)
        self.output_norm = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)

    def forward(self, x: torch.Tensor, mask_bias: Optional[torch.Tensor]) -> torch.Tensor:
        attended = self.attention_dropout(self.attention_output(self.attention(x, mask_bias)))
        x = self.attention_norm(x + attended)
        y = self.output_dropout(self.output(F.gelu(self.intermediate(x))))
        return self.output_norm(x + y)


class Bert(nn.Module):
    def __init__(self, config: BertConfig = REAL):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(Layer(config) for _ in range(config.layers))
        self.pooler = nn.Linear(config.hidden, config.hidden)

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        x = self.embeddings(input_ids, token_type_ids)
        mask_bias = None
        if attention_mask is not None:
            # [batch, seq] of 1 (attend) / 0 (padding) -> [batch, 1, 1, seq] bias.
            keep = attention_mask[:, None, None, :].to(x.dtype)
            mask_bias = (1.0 - keep) * MASKED_SCORE
        for layer in self.layers:
            x = layer(x, mask_bias)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled
