"""ResNet-50 (He et al. 2016, "Deep Residual Learning"), bottleneck v1.5.

The stride of a downsampling bottleneck sits on its 3x3 convolution, as in
the widely used v1.5 variant; at real size this has 25,557,032 parameters.
"""

from __future__ import annotations

import dataclasses
from typing import Tuple

import torch
from torch import nn


@dataclasses.dataclass(frozen=True)
class ResNetConfig:
    # Channels of the stem; the four stages use 1x, 2x, 4x, 8x this as their
    # bottleneck width and 4x that as their output width.
    base_width: int = 64
    blocks_per_stage: Tuple[int, ...] = (3, 4, 6, 3)
    num_classes: int = 1000
    image_size: int = 224


REAL = ResNetConfig()
TINY = ResNetConfig(base_width=4, num_classes=10, image_size=64)

EXPANSION = 4


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand, plus the (projected) identity."""

    def __init__(self, in_channels: int, width: int, stride: int):
        super().__init__()
        out_channels = width * EXPANSION
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


class ResNet(nn.Module):
    def __init__(self, config: ResNetConfig = REAL):
        super().__init__()
        self.config = config
        width = config.base_width
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        in_channels = width
        for stage, num_blocks in enumerate(config.blocks_per_stage):
            stage_width = config.base_width * 2**stage
            blocks = []
            for index in range(num_blocks):
                stride = 2 if stage > 0 and index == 0 else 1
                blocks.append(Bottleneck(in_channels, stage_width, stride))
                in_channels = stage_width * EXPANSION
            setattr(self, f"layer{stage + 1}", nn.Sequential(*blocks))
        self.num_stages = len(config.blocks_per_stage)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, config.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for stage in range(self.num_stages):
            x = getattr(self, f"layer{stage + 1}")(x)
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)
