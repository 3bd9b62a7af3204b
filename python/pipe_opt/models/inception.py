"""Inception-v3 (Szegedy et al. 2016, "Rethinking the Inception Architecture").

Factorized 7x7 (1x7 then 7x1) and expanded 3x3 modules, BatchNorm (eps 1e-3)
after every convolution, 299x299 input. With the auxiliary classifier it has
27,161,264 parameters at real size, 23,834,568 without it. The auxiliary
logits are a second output in training mode only, as in the paper.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn
from torch.nn import functional as F


@dataclasses.dataclass(frozen=True)
class InceptionV3Config:
    # Every channel count of the paper is divided by this (16 keeps them integral).
    width_divisor: int = 1
    num_classes: int = 1000
    aux_logits: bool = True
    # The module strides need 299 for the auxiliary head's 5x5 convolution.
    image_size: int = 299
    dropout: float = 0.5


REAL = InceptionV3Config()
TINY = InceptionV3Config(width_divisor=16, num_classes=10)


class ConvBn(nn.Module):
    """Convolution without bias, BatchNorm, ReLU."""

    def __init__(self, in_channels: int, out_channels: int, kernel, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, stride=stride,
                              padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(out_channels, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


class ModuleA(nn.Module):
    """35x35 grid: 1x1, 5x5, double 3x3 and pooled branches (Figure 5)."""

    def __init__(self, in_channels: int, pool_channels: int, d: int):
        super().__init__()
        self.branch1x1 = ConvBn(in_channels, 64 // d, 1)
        self.branch5x5_1 = ConvBn(in_channels, 48 // d, 1)
        self.branch5x5_2 = ConvBn(48 // d, 64 // d, 5, padding=2)
        self.branch3x3dbl_1 = ConvBn(in_channels, 64 // d, 1)
        self.branch3x3dbl_2 = ConvBn(64 // d, 96 // d, 3, padding=1)
        self.branch3x3dbl_3 = ConvBn(96 // d, 96 // d, 3, padding=1)
        self.branch_pool = ConvBn(in_channels, pool_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([b1, b5, b3, bp], 1)


class ReductionA(nn.Module):
    """35x35 -> 17x17 grid reduction."""

    def __init__(self, in_channels: int, d: int):
        super().__init__()
        self.branch3x3 = ConvBn(in_channels, 384 // d, 3, stride=2)
        self.branch3x3dbl_1 = ConvBn(in_channels, 64 // d, 1)
        self.branch3x3dbl_2 = ConvBn(64 // d, 96 // d, 3, padding=1)
        self.branch3x3dbl_3 = ConvBn(96 // d, 96 // d, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3(x)
        bd = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = F.max_pool2d(x, 3, stride=2)
        return torch.cat([b3, bd, bp], 1)


class ModuleB(nn.Module):
    """17x17 grid with 7x7 convolutions factorized into 1x7 and 7x1 (Figure 6)."""

    def __init__(self, in_channels: int, channels_7x7: int, d: int):
        super().__init__()
        c = channels_7x7
        self.branch1x1 = ConvBn(in_channels, 192 // d, 1)
        self.branch7x7_1 = ConvBn(in_channels, c, 1)
        self.branch7x7_2 = ConvBn(c, c, (1, 7), padding=(0, 3))
        self.branch7x7_3 = ConvBn(c, 192 // d, (7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = ConvBn(in_channels, c, 1)
        self.branch7x7dbl_2 = ConvBn(c, c, (7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = ConvBn(c, c, (1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = ConvBn(c, c, (7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = ConvBn(c, 192 // d, (1, 7), padding=(0, 3))
        self.branch_pool = ConvBn(in_channels, 192 // d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        bd = self.branch7x7dbl_1(x)
        bd = self.branch7x7dbl_3(self.branch7x7dbl_2(bd))
        bd = self.branch7x7dbl_5(self.branch7x7dbl_4(bd))
        bp = self.branch_pool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([b1, b7, bd, bp], 1)


class ReductionB(nn.Module):
    """17x17 -> 8x8 grid reduction."""

    def __init__(self, in_channels: int, d: int):
        super().__init__()
        self.branch3x3_1 = ConvBn(in_channels, 192 // d, 1)
        self.branch3x3_2 = ConvBn(192 // d, 320 // d, 3, stride=2)
        self.branch7x7x3_1 = ConvBn(in_channels, 192 // d, 1)
        self.branch7x7x3_2 = ConvBn(192 // d, 192 // d, (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = ConvBn(192 // d, 192 // d, (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = ConvBn(192 // d, 192 // d, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_2(self.branch7x7x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(b7))
        bp = F.max_pool2d(x, 3, stride=2)
        return torch.cat([b3, b7, bp], 1)


class ModuleC(nn.Module):
    """8x8 grid with expanded filter banks: 3x3 split into parallel 1x3 and 3x1 (Figure 7)."""

    def __init__(self, in_channels: int, d: int):
        super().__init__()
        self.branch1x1 = ConvBn(in_channels, 320 // d, 1)
        self.branch3x3_1 = ConvBn(in_channels, 384 // d, 1)
        self.branch3x3_2a = ConvBn(384 // d, 384 // d, (1, 3), padding=(0, 1))
        self.branch3x3_2b = ConvBn(384 // d, 384 // d, (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = ConvBn(in_channels, 448 // d, 1)
        self.branch3x3dbl_2 = ConvBn(448 // d, 384 // d, 3, padding=1)
        self.branch3x3dbl_3a = ConvBn(384 // d, 384 // d, (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = ConvBn(384 // d, 384 // d, (3, 1), padding=(1, 0))
        self.branch_pool = ConvBn(in_channels, 192 // d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = torch.cat([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], 1)
        bp = self.branch_pool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([b1, b3, bd, bp], 1)


class AuxiliaryHead(nn.Module):
    """Side classifier on the last 17x17 grid, trained as a regularizer."""

    def __init__(self, in_channels: int, num_classes: int, d: int):
        super().__init__()
        self.conv0 = ConvBn(in_channels, 128 // d, 1)
        self.conv1 = ConvBn(128 // d, 768 // d, 5)
        self.fc = nn.Linear(768 // d, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.avg_pool2d(x, 5, stride=3)
        x = self.conv1(self.conv0(x))
        x = F.adaptive_avg_pool2d(x, 1)
        return self.fc(torch.flatten(x, 1))


class InceptionV3(nn.Module):
    def __init__(self, config: InceptionV3Config = REAL):
        super().__init__()
        self.config = config
        d = config.width_divisor
        self.Conv2d_1a_3x3 = ConvBn(3, 32 // d, 3, stride=2)
        self.Conv2d_2a_3x3 = ConvBn(32 // d, 32 // d, 3)
        self.Conv2d_2b_3x3 = ConvBn(32 // d, 64 // d, 3, padding=1)
        self.Conv2d_3b_1x1 = ConvBn(64 // d, 80 // d, 1)
        self.Conv2d_4a_3x3 = ConvBn(80 // d, 192 // d, 3)
        self.Mixed_5b = ModuleA(192 // d, 32 // d, d)
        self.Mixed_5c = ModuleA(256 // d, 64 // d, d)
        self.Mixed_5d = ModuleA(288 // d, 64 // d, d)
        self.Mixed_6a = ReductionA(288 // d, d)
        self.Mixed_6b = ModuleB(768 // d, 128 // d, d)
        self.Mixed_6c = ModuleB(768 // d, 160 // d, d)
        self.Mixed_6d = ModuleB(768 // d, 160 // d, d)
        self.Mixed_6e = ModuleB(768 // d, 192 // d, d)
        self.AuxLogits = AuxiliaryHead(768 // d, config.num_classes, d) if config.aux_logits else None
        self.Mixed_7a = ReductionB(768 // d, d)
        self.Mixed_7b = ModuleC(1280 // d, d)
        self.Mixed_7c = ModuleC(2048 // d, d)
        self.dropout = nn.Dropout(config.dropout)
        self.fc = nn.Linear(2048 // d, config.num_classes)

    def forward(self, x: torch.Tensor):
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
        x = F.max_pool2d(x, 3, stride=2)
        x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x))
        x = F.max_pool2d(x, 3, stride=2)
        x = self.Mixed_5d(self.Mixed_5c(self.Mixed_5b(x)))
        x = self.Mixed_6a(x)
        x = self.Mixed_6e(self.Mixed_6d(self.Mixed_6c(self.Mixed_6b(x))))
        aux = self.AuxLogits(x) if self.AuxLogits is not None and self.training else None
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        logits = self.fc(self.dropout(x))
        if aux is not None:
            return logits, aux
        return logits
