"""Recurrent networks (ONNX LSTM and GRU).

LSTM language model: the "medium" model of Zaremba et al. 2014 ("Recurrent
Neural Network Regularization"): a 10,000-word vocabulary, two LSTM layers of
650 units over 35 steps, and a softmax over the vocabulary, without dropout
here. GRU tagger: word embeddings, a bidirectional GRU (Cho et al. 2014) and a
linear layer to the tags of each word; the real configuration (20,000 words,
embeddings of 100, 200 units per direction, the 17 universal POS tags, 64
words) has no single published counterpart.

Both take token ids [batch, steps] and return [batch, steps, classes]. The
real configurations' parameter counts are this module's, checked by
python/tests/test_export.py.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn


@dataclasses.dataclass(frozen=True)
class LstmConfig:
    vocab_size: int = 10000
    hidden: int = 650
    layers: int = 2
    seq_len: int = 35


LSTM_REAL = LstmConfig()
LSTM_TINY = LstmConfig(vocab_size=64, hidden=16, layers=2, seq_len=6)


class LstmLm(nn.Module):
    def __init__(self, config: LstmConfig = LSTM_REAL):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.hidden)
        self.lstm = nn.LSTM(config.hidden, config.hidden, config.layers, batch_first=True)
        self.head = nn.Linear(config.hidden, config.vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(self.embed(ids))[0])


@dataclasses.dataclass(frozen=True)
class GruConfig:
    vocab_size: int = 20000
    embedding: int = 100
    hidden: int = 200
    num_tags: int = 17
    seq_len: int = 64


GRU_REAL = GruConfig()
GRU_TINY = GruConfig(vocab_size=50, embedding=8, hidden=12, num_tags=5, seq_len=7)


class GruTagger(nn.Module):
    def __init__(self, config: GruConfig = GRU_REAL):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.embedding)
        self.gru = nn.GRU(config.embedding, config.hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * config.hidden, config.num_tags)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.gru(self.embed(ids))[0])
