"""DenseNet-121 (Huang et al. 2017, "Densely Connected Convolutional Networks").

DenseNet-BC: bottleneck 1x1 convolutions of 4k channels, transitions halving
the channels. Growth rate k=32, blocks of 6/12/24/16 layers; at real size it
has 7,978,856 parameters.
"""

from __future__ import annotations

import dataclasses
from typing import List, Tuple

import torch
from torch import nn


@dataclasses.dataclass(frozen=True)
class DenseNetConfig:
    growth_rate: int = 32
    layers_per_block: Tuple[int, ...] = (6, 12, 24, 16)
    stem_channels: int = 64
    bottleneck_factor: int = 4
    compression: float = 0.5
    num_classes: int = 1000
    image_size: int = 224


REAL = DenseNetConfig()
TINY = DenseNetConfig(growth_rate=4, stem_channels=8, num_classes=10, image_size=64)


class DenseLayer(nn.Module):
    """BN-ReLU-Conv1x1-BN-ReLU-Conv3x3 over the concatenation of all earlier maps."""

    def __init__(self, in_channels: int, growth_rate: int, bottleneck_factor: int):
        super().__init__()
        inner = bottleneck_factor * growth_rate
        self.norm1 = nn.BatchNorm2d(in_channels)
        self.conv1 = nn.Conv2d(in_channels, inner, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(inner)
        self.conv2 = nn.Conv2d(inner, growth_rate, 3, padding=1, bias=False)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, earlier: List[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(earlier, 1)
        x = self.conv1(self.relu(self.norm1(x)))
        return self.conv2(self.relu(self.norm2(x)))


class DenseBlock(nn.Module):
    def __init__(self, num_layers: int, in_channels: int, config: DenseNetConfig):
        super().__init__()
        self.layers = nn.ModuleList(
            DenseLayer(in_channels + i * config.growth_rate, config.growth_rate,
                       config.bottleneck_factor)
            for i in range(num_layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


class Transition(nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__(
            nn.BatchNorm2d(in_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(in_channels, out_channels, 1, bias=False),
            nn.AvgPool2d(2, stride=2),
        )


class DenseNet(nn.Module):
    def __init__(self, config: DenseNetConfig = REAL):
        super().__init__()
        self.config = config
        channels = config.stem_channels
        stages: List[nn.Module] = [
            nn.Conv2d(3, channels, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        ]
        for index, num_layers in enumerate(config.layers_per_block):
            stages.append(DenseBlock(num_layers, channels, config))
            channels += num_layers * config.growth_rate
            if index + 1 < len(config.layers_per_block):
                reduced = int(channels * config.compression)
                stages.append(Transition(channels, reduced))
                channels = reduced
        stages += [nn.BatchNorm2d(channels), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*stages)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(channels, config.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))
