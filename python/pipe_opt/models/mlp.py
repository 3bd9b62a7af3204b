"""Multi-layer perceptron: fully connected layers with ReLU between them and a
linear classifier on top, no normalization and no dropout.

The real configuration is the 784-300-100-10 network of LeCun et al. 1998
("Gradient-based learning applied to document recognition", the 3-layer net
with 300 and 100 hidden units on MNIST): 266,610 parameters. The input is a
flattened image, [batch, in_features].
"""

from __future__ import annotations

import dataclasses
from typing import Tuple

import torch
from torch import nn


@dataclasses.dataclass(frozen=True)
class MlpConfig:
    in_features: int = 784
    hidden: Tuple[int, ...] = (300, 100)
    num_classes: int = 10


REAL = MlpConfig()
TINY = MlpConfig(in_features=32, hidden=(64, 32), num_classes=10)


class Mlp(nn.Module):
    def __init__(self, config: MlpConfig = REAL):
        super().__init__()
        self.config = config
        widths = (config.in_features,) + tuple(config.hidden)
        # fc1 .. fcN: initializers fc1.weight, fc1.bias, ...
        self.layers = len(widths)
        for index in range(1, len(widths)):
            setattr(self, f"fc{index}", nn.Linear(widths[index - 1], widths[index]))
        setattr(self, f"fc{len(widths)}", nn.Linear(widths[-1], config.num_classes))
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index in range(1, self.layers):
            x = self.relu(getattr(self, f"fc{index}")(x))
        return getattr(self, f"fc{self.layers}")(x)


class MlpWithLoss(nn.Module):
    """The same network with its training loss inside the graph: forward(x,
    labels) is the mean cross-entropy of the logits against the labels, which
    torch.onnx.export writes as SoftmaxCrossEntropyLoss (opset 12 on). The
    graph's output is the loss, so pipe-opt trains it with --loss=output."""

    def __init__(self, config: MlpConfig = REAL):
        super().__init__()
        self.config = config
        self.net = Mlp(config)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(self.net(x), labels)
