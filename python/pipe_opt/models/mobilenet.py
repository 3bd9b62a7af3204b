"""MobileNet-v2 (Sandler et al. 2018, "Inverted Residuals and Linear Bottlenecks").

Channel counts are rounded to multiples of 8 as in the reference design; at
width 1.0 and 1000 classes it has 3,504,872 parameters.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch
from torch import nn

# (expansion t, output channels c, repeats n, first stride s), Table 2 of the paper.
INVERTED_RESIDUAL_SETTINGS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def round_channels(value: float, divisor: int) -> int:
    """Nearest multiple of `divisor`, at least `divisor`, never 10% below `value`."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * value:
        rounded += divisor
    return rounded


@dataclasses.dataclass(frozen=True)
class MobileNetV2Config:
    width_multiplier: float = 1.0
    # Channel counts are rounded to multiples of this (8 in the paper's models).
    channel_divisor: int = 8
    stem_channels: int = 32
    # None: 1280 scaled by max(1, width_multiplier), as in the paper.
    last_channels: Optional[int] = None
    num_classes: int = 1000
    image_size: int = 224
    dropout: float = 0.2


REAL = MobileNetV2Config()
# Divisor 4 keeps the stem wider than the first block, so that block has no
# residual connection, as at real size.
TINY = MobileNetV2Config(width_multiplier=0.2, channel_divisor=4, last_channels=64,
                         num_classes=10, image_size=64)


def conv_bn_relu6(in_channels: int, out_channels: int, kernel: int, stride: int = 1,
                  groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel, stride=stride, padding=(kernel - 1) // 2,
                  groups=groups, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU6(inplace=True),
    )


class InvertedResidual(nn.Module):
    """1x1 expand, 3x3 depthwise, linear 1x1 project; residual when shapes allow."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, expansion: int):
        super().__init__()
        hidden = int(round(in_channels * expansion))
        layers = []
        if expansion != 1:
            layers.append(conv_bn_relu6(in_channels, hidden, 1))
        layers += [
            conv_bn_relu6(hidden, hidden, 3, stride=stride, groups=hidden),
            nn.Conv2d(hidden, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels),
        ]
        self.block = nn.Sequential(*layers)
        self.use_residual = stride == 1 and in_channels == out_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.use_residual else y


class MobileNetV2(nn.Module):
    def __init__(self, config: MobileNetV2Config = REAL):
        super().__init__()
        self.config = config
        width = config.width_multiplier
        divisor = config.channel_divisor
        channels = round_channels(config.stem_channels * width, divisor)
        last = config.last_channels or round_channels(1280 * max(1.0, width), divisor)
        layers = [conv_bn_relu6(3, channels, 3, stride=2)]
        for expansion, out, repeats, first_stride in INVERTED_RESIDUAL_SETTINGS:
            out_channels = round_channels(out * width, divisor)
            for index in range(repeats):
                stride = first_stride if index == 0 else 1
                layers.append(InvertedResidual(channels, out_channels, stride, expansion))
                channels = out_channels
        layers.append(conv_bn_relu6(channels, last, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(config.dropout),
                                        nn.Linear(last, config.num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))
