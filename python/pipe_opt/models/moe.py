"""Decoder with dense-softmax mixture-of-experts blocks (Jacobs et al. 1991,
"Adaptive Mixtures of Local Experts"; the softmax gate of Shazeer et al. 2017
without top-k selection): every expert runs on every token and the outputs
are summed with the gate's softmax weights.

Each block is GPT-2's pre-LayerNorm causal self-attention followed by the
mixture in place of the MLP. The experts are parallel branches of the graph
(one MatMul-GELU-MatMul chain each, joined by Concat, Mul and ReduceSum), which
makes the chain wide where a plain transformer's is a line.

The real configuration (hidden 512, 6 blocks, 8 experts of width 1024, vocab
32,000, 256 tokens) has no published counterpart; its 73,262,128 parameters
(head tied to the token embedding) are this module's count, checked by
python/tests/test_export.py.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from pipe_opt.models.gpt2 import CausalSelfAttention


@dataclasses.dataclass(frozen=True)
class MoeConfig:
    vocab_size: int = 32000
    max_positions: int = 256
    hidden: int = 512
    layers: int = 6
    heads: int = 8
    experts: int = 8
    expert_hidden: int = 1024
    dropout: float = 0.1
    layer_norm_eps: float = 1e-5
    # Sequence length of the exported graph (static).
    seq_len: int = 256
    # 0: the dense softmax gate; k > 0: Shazeer et al.'s top-k gate (softmax
    # over the k largest router logits, the other experts weighted 0).
    top_k: int = 0


REAL = MoeConfig()
TINY = MoeConfig(vocab_size=256, max_positions=32, hidden=32, layers=2, heads=4,
                 expert_hidden=64, seq_len=32)
TOP2_REAL = dataclasses.replace(REAL, top_k=2)
TOP2_TINY = dataclasses.replace(TINY, top_k=2)


class Expert(nn.Module):
    def __init__(self, config: MoeConfig):
        super().__init__()
        self.fc_in = nn.Linear(config.hidden, config.expert_hidden)
        self.act = nn.GELU()
        self.fc_out = nn.Linear(config.expert_hidden, config.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc_out(self.act(self.fc_in(x)))


class DenseMixture(nn.Module):
    """sum_e gate(router(x))_e * expert_e(x), every expert on every token (the
    top-k gate zeroes all but k weights; the experts still run densely)."""

    def __init__(self, config: MoeConfig):
        super().__init__()
        self.router = nn.Linear(config.hidden, config.experts)
        self.top_k = config.top_k
        self.experts = nn.ModuleList(Expert(config) for _ in range(config.experts))
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.router(x)  # (batch, seq, experts)
        if self.top_k:
            # ONNX TopK, Softmax and ScatterElements into zeros.
            best, chosen = torch.topk(logits, self.top_k, dim=-1)
            gates = torch.zeros_like(logits).scatter(-1, chosen, torch.softmax(best, dim=-1))
        else:
            gates = torch.softmax(logits, dim=-1)
        outputs = torch.stack([expert(x) for expert in self.experts], dim=-1)
        mixed = (outputs * gates.unsqueeze(-2)).sum(dim=-1)  # (batch, seq, hidden)
        return self.dropout(mixed)


class Block(nn.Module):
    """x + attn(ln_1(x)), then x + mixture(ln_2(x))."""

    def __init__(self, config: MoeConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.moe = DenseMixture(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.moe(self.ln_2(x))


class MoeDecoder(nn.Module):
    def __init__(self, config: MoeConfig = REAL):
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
