"""VGG-16 (Simonyan & Zisserman 2015, configuration D), without batch norm.

At real size (224x224 input, 7x7 pooled features, 4096-wide classifier) it
has 138,357,544 parameters.
"""

from __future__ import annotations

import dataclasses
from typing import Tuple

import torch
from torch import nn

# Configuration D: convolution output channels, "M" for a 2x2 max pool.
VGG16_LAYERS: Tuple = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M",
                       512, 512, 512, "M", 512, 512, 512, "M")


@dataclasses.dataclass(frozen=True)
class VggConfig:
    # Every convolution width is divided by this.
    width_divisor: int = 1
    classifier_width: int = 4096
    num_classes: int = 1000
    image_size: int = 224
    dropout: float = 0.5

    @property
    def pooled_size(self) -> int:
        # The five max pools divide the image by 32; the adaptive pool then
        # keeps that size (7 at 224, as in the paper), an identity pool.
        return self.image_size // 32


REAL = VggConfig()
TINY = VggConfig(width_divisor=16, classifier_width=64, num_classes=10, image_size=64)


class Vgg(nn.Module):
    def __init__(self, config: VggConfig = REAL):
        super().__init__()
        self.config = config
        layers = []
        in_channels = 3
        for entry in VGG16_LAYERS:
            if entry == "M":
                layers.append(nn.MaxPool2d(2, stride=2))
                continue
            out_channels = entry // config.width_divisor
            layers += [nn.Conv2d(in_channels, out_channels, 3, padding=1), nn.ReLU(inplace=True)]
            in_channels = out_channels
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(config.pooled_size)
        hidden = config.classifier_width
        self.classifier = nn.Sequential(
            nn.Linear(in_channels * config.pooled_size**2, hidden),
            nn.ReLU(inplace=True),
            nn.Dropout(config.dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(inplace=True),
            nn.Dropout(config.dropout),
            nn.Linear(hidden, config.num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))
