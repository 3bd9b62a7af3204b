"""Reference training of an ONNX model with PyTorch, step for step as
`pipe-run` trains the programs pipe-opt generates.

The graph runs node by node with `GraphExecutor` (dropout off) on parameter
tensors that persist across steps. One step:

- every micro-batch k = 0 .. m-1 of the mini-batch runs on its own, in order,
  so BatchNorm normalizes with the statistics of that micro-batch and updates
  the running statistics once per micro-batch, in order;
- the loss of micro-batch k is the mean over its elements (cross entropy over
  the last dim of model output 0, or the mean squared error), or model output
  0 itself for "output" (a loss the graph computes); the step's loss
  is the mean of the micro-batch losses (sum / m);
- `(loss_k / m).backward()` accumulates the gradients, so after the last
  micro-batch every trainable parameter holds the gradient of the step's loss
  (a parameter the loss does not reach gets a zero gradient);
- then one `torch.optim` step (SGD, SGD with momentum, Adam or AdamW) with
  the hyper-parameters of `program.json`.

    trainer = ReferenceTrainer(onnx.load("model.onnx"), micro_batch_size=2,
                               microbatches=4, loss="cross-entropy",
                               optimizer=OptimizerConfig("adam", lr=1e-3))
    result = trainer.step({"input_ids": ids}, [labels])   # [m * b, ...] each
    result.loss, result.gradients["wte.weight"], trainer.weights()
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np
import onnx
import torch
import torch.nn.functional as F

from pipe_opt.measure import GraphExecutor

__all__ = ["LOSSES", "OPTIMIZERS", "OptimizerConfig", "ReferenceTrainer", "StepResult",
           "loss_of"]

LOSSES = ("cross-entropy", "mse", "output")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """The optimizer of `program.json` (`optimizer`: kind, lr, momentum,
    beta1, beta2, eps, weight_decay)."""

    kind: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.9
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0

    @classmethod
    def from_program(cls, program: Mapping[str, object]) -> "OptimizerConfig":
        o = program["optimizer"]
        return cls(str(o["kind"]), float(o["lr"]), float(o.get("momentum", 0.0)),
                   float(o.get("beta1", 0.9)), float(o.get("beta2", 0.999)),
                   float(o.get("eps", 1e-8)), float(o.get("weight_decay", 0.0)))

    def make(self, params: Sequence[torch.Tensor]) -> torch.optim.Optimizer:
        """The torch.optim optimizer (single-tensor implementations)."""
        if self.kind == "sgd":
            return torch.optim.SGD(params, lr=self.lr, weight_decay=self.weight_decay,
                                   foreach=False)
        if self.kind == "momentum":
            return torch.optim.SGD(params, lr=self.lr, momentum=self.momentum, dampening=0.0,
                                   nesterov=False, weight_decay=self.weight_decay, foreach=False)
        if self.kind in ("adam", "adamw"):
            optimizer = torch.optim.Adam if self.kind == "adam" else torch.optim.AdamW
            return optimizer(params, lr=self.lr, betas=(self.beta1, self.beta2), eps=self.eps,
                             weight_decay=self.weight_decay, foreach=False)
        raise ValueError(f"unknown optimizer '{self.kind}' (known: {', '.join(OPTIMIZERS)})")


def loss_of(kind: str, output: torch.Tensor, label: Optional[torch.Tensor]) -> torch.Tensor:
    """The loss of one micro-batch: a scalar mean over its elements, or the
    output itself for "output" (a loss computed in the graph; no label)."""
    kind = kind.replace("_", "-")
    if kind == "output":
        if output.dim() != 0:
            raise ValueError(f"loss 'output' needs a scalar model output, got {tuple(output.shape)}")
        return output
    if kind == "cross-entropy":
        classes = output.shape[-1]
        return F.cross_entropy(output.reshape(-1, classes), label.reshape(-1).long())
    if kind == "mse":
        return F.mse_loss(output, label.to(output.dtype))
    raise ValueError(f"unknown loss '{kind}' (known: {', '.join(LOSSES)})")


@dataclasses.dataclass
class StepResult:
    loss: float                          # mean of the micro-batch losses
    microbatch_losses: List[float]
    gradients: Dict[str, np.ndarray]     # accumulated, before the update


class ReferenceTrainer:
    """Trains `model` in torch as pipe-run trains its pipelined programs.

    trainable: names of the parameters the optimizer updates (default: the
    float initializers other than BatchNorm running statistics, as
    GraphExecutor decides; pass program.json's `trainable` ones to train the
    same set). dtype: the floating-point type parameters and float inputs are
    converted to (float32, or float64 to see the reference's own rounding).
    """

    def __init__(self, model: onnx.ModelProto, micro_batch_size: int, microbatches: int,
                 loss: str = "cross-entropy", optimizer: OptimizerConfig = OptimizerConfig(),
                 trainable: Optional[Sequence[str]] = None, dtype: torch.dtype = torch.float32,
                 dims: Optional[Dict[str, int]] = None):
        self.executor = GraphExecutor(model, micro_batch_size, dims, dropout=False)
        self.micro_batch_size = micro_batch_size
        self.microbatches = microbatches
        self.loss_kind = loss
        self.dtype = dtype
        self.output_name = model.graph.output[0].name
        self.parameters: Dict[str, torch.Tensor] = {}
        for name, value in self.executor.initializers().items():
            if value.is_floating_point():
                value = value.detach().to(dtype).requires_grad_(value.requires_grad)
            self.parameters[name] = value
        if trainable is None:
            trainable = [n for n, t in self.parameters.items() if t.requires_grad]
        unknown = [n for n in trainable if n not in self.parameters]
        if unknown:
            raise ValueError(f"trainable parameters that are not initializers: {unknown}")
        trainable_set = set(trainable)
        for name, value in self.parameters.items():
            if value.is_floating_point():
                value.requires_grad_(name in trainable_set)
        self.trainable: Dict[str, torch.Tensor] = {n: self.parameters[n] for n in trainable}
        self.optimizer = optimizer.make(list(self.trainable.values()))

    def _microbatch(self, array, k: int) -> torch.Tensor:
        t = torch.as_tensor(np.asarray(array)) if not isinstance(array, torch.Tensor) else array
        b = self.micro_batch_size
        t = t[k * b:(k + 1) * b]
        return t.to(self.dtype) if t.is_floating_point() else t

    def step(self, inputs: Mapping[str, object], labels: Sequence[object]) -> StepResult:
        """One training step on a mini-batch: inputs by graph input name and
        labels (label 0 is the loss's), each [microbatches * micro_batch_size, ...]."""
        m = self.microbatches
        for p in self.trainable.values():
            p.grad = None
        losses = []
        for k in range(m):
            feed = {name: self._microbatch(value, k) for name, value in inputs.items()}
            outputs, _ = self.executor.run(feed, parameters=self.parameters)
            label = self._microbatch(labels[0], k) if labels else None
            loss = loss_of(self.loss_kind, outputs[self.output_name], label)
            (loss / m).backward()
            losses.append(float(loss.detach()))
        for p in self.trainable.values():
            if p.grad is None:  # not reached by the loss
                p.grad = torch.zeros_like(p)
        gradients = {n: p.grad.detach().cpu().numpy().copy() for n, p in self.trainable.items()}
        self.optimizer.step()
        return StepResult(sum(losses) / m, losses, gradients)

    def weights(self) -> Dict[str, np.ndarray]:
        """Every initializer's current value (trained weights, BatchNorm
        running statistics, integer constants)."""
        return {n: t.detach().cpu().numpy().copy() for n, t in self.parameters.items()}
