"""Segmentation networks: U-Net (Ronneberger et al. 2015, "U-Net: Convolutional
Networks for Biomedical Image Segmentation") and a fully convolutional net in
the style of Long et al. 2015 ("Fully Convolutional Networks for Semantic
Segmentation").

U-Net: an encoder of double 3x3 convolutions (with BatchNorm and ReLU, padded
so that the skip connections need no cropping) and 2x2 max pooling, a decoder
of 2x2 stride-2 transposed convolutions (ONNX ConvTranspose) whose output is
concatenated with the encoder's at the same scale, and a 1x1 classifier. The
real configuration (widths 64 to 1024, 2 classes) is the paper's network with
padded convolutions and BatchNorm, as it is usually trained.

FCN: a strided convolutional backbone (stride 8), a 1x1 classifier, and a
bilinear upsampling back to the image (F.interpolate: ONNX Resize).

Both return per-pixel logits channels-last, [batch, height, width, classes],
so that pipe-opt's default cross-entropy (over the last dim) is the per-pixel
loss. The real configurations' parameter counts are this module's, checked by
python/tests/test_export.py.
"""

from __future__ import annotations

import dataclasses
from typing import Tuple

import torch
from torch import nn
from torch.nn import functional as F


@dataclasses.dataclass(frozen=True)
class UNetConfig:
    widths: Tuple[int, ...] = (64, 128, 256, 512, 1024)
    num_classes: int = 2
    image_size: int = 256


REAL = UNetConfig()
TINY = UNetConfig(widths=(8, 16, 32), num_classes=3, image_size=32)


def double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class UNet(nn.Module):
    def __init__(self, config: UNetConfig = REAL):
        super().__init__()
        self.config = config
        widths = config.widths
        self.down = nn.ModuleList(
            [double_conv(3 if i == 0 else widths[i - 1], w) for i, w in enumerate(widths)])
        self.up = nn.ModuleList(
            [nn.ConvTranspose2d(widths[i], widths[i - 1], 2, stride=2)
             for i in range(len(widths) - 1, 0, -1)])
        self.merge = nn.ModuleList(
            [double_conv(2 * widths[i - 1], widths[i - 1]) for i in range(len(widths) - 1, 0, -1)])
        self.head = nn.Conv2d(widths[0], config.num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for index, block in enumerate(self.down):
            if index:
                x = F.max_pool2d(x, 2)
            x = block(x)
            skips.append(x)
        skips.pop()
        for up, merge in zip(self.up, self.merge):
            x = merge(torch.cat([skips.pop(), up(x)], dim=1))
        return self.head(x).permute(0, 2, 3, 1)


@dataclasses.dataclass(frozen=True)
class FcnConfig:
    widths: Tuple[int, ...] = (64, 128, 256, 512)
    num_classes: int = 21
    image_size: int = 224


FCN_REAL = FcnConfig()
FCN_TINY = FcnConfig(widths=(8, 16, 16, 32), num_classes=3, image_size=32)


class Fcn(nn.Module):
    def __init__(self, config: FcnConfig = FCN_REAL):
        super().__init__()
        self.config = config
        layers = []
        for index, width in enumerate(config.widths):
            cin = 3 if index == 0 else config.widths[index - 1]
            # Stride 2 in the first three stages: features at 1/8 of the image.
            layers += [nn.Conv2d(cin, width, 3, stride=2 if index < 3 else 1, padding=1,
                                 bias=False), nn.BatchNorm2d(width), nn.ReLU()]
        self.backbone = nn.Sequential(*layers)
        self.classifier = nn.Conv2d(config.widths[-1], config.num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.classifier(self.backbone(x))
        scores = F.interpolate(scores, size=x.shape[-2:], mode="bilinear", align_corners=False)
        return scores.permute(0, 2, 3, 1)
