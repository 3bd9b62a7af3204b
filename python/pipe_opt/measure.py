"""Measures per-node forward and backward times of an ONNX training graph.

The graph is executed node by node with PyTorch: each ONNX op type that the
exported model families use has a small torch implementation below
(`OPS`). Initializers become tensors (float ones require a gradient, except
BatchNorm running statistics); graph inputs are random tensors of the bound
shapes. For every node that has a float output and a float input that needs
a gradient, the forward (the node's torch implementation on its concrete
inputs) and the backward (`torch.autograd.grad` of its float outputs with
respect to its inputs that need a gradient, with random upstream gradients)
are timed: median over `repeat` runs after `warmup` runs. Other nodes (shape
plumbing, constants, masks) get no entry.

The result, `{"<ONNX node name>": {"forward_ms": f, "backward_ms": b}}`, is
the profile format that `pipe-opt --profile=FILE` and the cost analysis'
`profile=FILE` option read.

    from pipe_opt.measure import GraphExecutor, measure_model
    times = measure_model(onnx.load("model.onnx"), micro_batch_size=8,
                          device="cuda", repeat=5)
"""

from __future__ import annotations

import json
import math
import statistics
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import onnx
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper

__all__ = ["GraphExecutor", "MeasureError", "measure_model", "write_profile", "SUPPORTED_OPS"]


class MeasureError(RuntimeError):
    """An unsupported op, an unbound dimension or a malformed node."""


ONNX_TO_TORCH = {
    onnx.TensorProto.FLOAT: torch.float32,
    onnx.TensorProto.DOUBLE: torch.float64,
    onnx.TensorProto.FLOAT16: torch.float16,
    onnx.TensorProto.BFLOAT16: torch.bfloat16,
    onnx.TensorProto.UINT8: torch.uint8,
    onnx.TensorProto.INT8: torch.int8,
    onnx.TensorProto.INT16: torch.int16,
    onnx.TensorProto.INT32: torch.int32,
    onnx.TensorProto.INT64: torch.int64,
    onnx.TensorProto.BOOL: torch.bool,
}


def _attrs(node: onnx.NodeProto) -> Dict[str, object]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _is_float(t: Optional[torch.Tensor]) -> bool:
    return t is not None and t.is_floating_point()


# ---------------------------------------------------------------------------
# Op implementations. Each takes (attrs, inputs, num_outputs) and returns a
# list of outputs. Inputs listed in HOST_INPUTS are passed as Python lists or
# scalars (converted before timing, so that no device sync is timed).
# ---------------------------------------------------------------------------

OpFn = Callable[[Dict[str, object], List[object], int], List[Optional[torch.Tensor]]]
OPS: Dict[str, OpFn] = {}
HOST_INPUTS: Dict[str, Tuple[int, ...]] = {}


def op(name: str, host: Tuple[int, ...] = ()):
    def register(fn: OpFn) -> OpFn:
        OPS[name] = fn
        HOST_INPUTS[name] = host
        return fn
    return register


def _spatial_pads(attrs, rank: int) -> List[int]:
    pads = list(attrs.get("pads", [0] * (2 * rank)))
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        raise MeasureError(f"auto_pad={attrs['auto_pad']!r} is not supported")
    return pads


def _torch_pad_order(begins: Sequence[int], ends: Sequence[int]) -> List[int]:
    """ONNX (begin..., end...) per axis → F.pad's (last_begin, last_end, ...)."""
    out: List[int] = []
    for b, e in zip(reversed(list(begins)), reversed(list(ends))):
        out += [int(b), int(e)]
    return out


def _pad_spatial(x: torch.Tensor, pads: List[int], rank: int, value: float = 0.0):
    """Returns (x, symmetric padding): pads x when begins and ends differ."""
    begins, ends = pads[:rank], pads[rank:]
    if begins == ends:
        return x, begins
    return F.pad(x, _torch_pad_order(begins, ends), value=value), [0] * rank


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


@op("Conv")
def _conv(attrs, inputs, _):
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    rank = x.dim() - 2
    x, padding = _pad_spatial(x, _spatial_pads(attrs, rank), rank)
    return [_CONV[rank](x, w, b, stride=list(attrs.get("strides", [1] * rank)), padding=padding,
                        dilation=list(attrs.get("dilations", [1] * rank)),
                        groups=int(attrs.get("group", 1)))]


_CONV_TRANSPOSE = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@op("ConvTranspose")
def _conv_transpose(attrs, inputs, _):
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    rank = x.dim() - 2
    pads = _spatial_pads(attrs, rank)
    if pads[:rank] != pads[rank:] or "output_shape" in attrs:
        raise MeasureError("ConvTranspose with asymmetric pads or output_shape is not supported")
    return [_CONV_TRANSPOSE[rank](
        x, w, b, stride=list(attrs.get("strides", [1] * rank)), padding=pads[:rank],
        output_padding=list(attrs.get("output_padding", [0] * rank)),
        groups=int(attrs.get("group", 1)), dilation=list(attrs.get("dilations", [1] * rank)))]


@op("Resize", host=(1, 2, 3))
def _resize(attrs, inputs, _):
    """The modes torch's F.interpolate has: linear with half_pixel,
    pytorch_half_pixel or align_corners; nearest with asymmetric and floor."""
    x = inputs[0]
    scales = inputs[2] if len(inputs) > 2 else None
    sizes = inputs[3] if len(inputs) > 3 else None
    spatial = x.shape[2:]
    if sizes:
        size = [int(v) for v in sizes[2:]]
    else:
        size = [int(math.floor(n * float(s))) for n, s in zip(spatial, scales[2:])]
    if (sizes and list(sizes[:2]) != list(x.shape[:2])) or \
            (not sizes and [float(s) for s in scales[:2]] != [1.0, 1.0]):
        raise MeasureError("Resize of the batch or channel dims is not supported")
    mode = _text(attrs.get("mode", "nearest"))
    transform = _text(attrs.get("coordinate_transformation_mode", "half_pixel"))
    if mode == "linear" and transform in ("half_pixel", "pytorch_half_pixel", "align_corners"):
        name = {1: "linear", 2: "bilinear", 3: "trilinear"}[len(spatial)]
        return [F.interpolate(x, size=size, mode=name, align_corners=transform == "align_corners")]
    if mode == "nearest" and transform == "asymmetric" and \
            _text(attrs.get("nearest_mode", "round_prefer_floor")) == "floor":
        return [F.interpolate(x, size=size, mode="nearest")]
    raise MeasureError(f"Resize mode {mode} with {transform} is not supported")


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _recurrent(attrs, inputs, num_outputs, cell: str):
    """ONNX LSTM and GRU through torch's own recurrent kernels (one layer;
    the gates reordered: ONNX iofc to torch ifgo, ONNX zrh to torch rzn)."""
    x, w, r = inputs[0], inputs[1], inputs[2]
    b = inputs[3] if len(inputs) > 3 else None
    if (len(inputs) > 4 and inputs[4] is not None) or (len(inputs) > 7 and inputs[7] is not None):
        raise MeasureError(f"{cell} with sequence_lens or peepholes is not supported")
    if "activations" in attrs or "clip" in attrs or int(attrs.get("layout", 0)) or \
            int(attrs.get("input_forget", 0)):
        raise MeasureError(f"{cell} with activations, clip, layout or input_forget")
    if _text(attrs.get("direction", "forward")) == "reverse":
        raise MeasureError(f"{cell} in reverse only (torch runs forward or both)")
    if cell == "GRU" and not int(attrs.get("linear_before_reset", 0)):
        raise MeasureError("GRU without linear_before_reset (torch's GRU has it)")
    hidden = int(attrs["hidden_size"])
    dirs = w.shape[0]
    order = [0, 2, 3, 1] if cell == "LSTM" else [1, 0, 2]

    def reorder(m):
        return torch.cat([m[k * hidden:(k + 1) * hidden] for k in order])
    params = []
    for d in range(dirs):
        params += [reorder(w[d]), reorder(r[d])]
        if b is not None:
            gates = len(order) * hidden
            params += [reorder(b[d][:gates]), reorder(b[d][gates:])]
    batch = x.shape[1]
    zeros = x.new_zeros(dirs, batch, hidden)
    h0 = inputs[5].to(x.dtype) if len(inputs) > 5 and inputs[5] is not None else zeros
    if cell == "LSTM":
        c0 = inputs[6].to(x.dtype) if len(inputs) > 6 and inputs[6] is not None else zeros
        y, h, c = torch._VF.lstm(x, (h0, c0), params, b is not None, 1, 0.0, False, dirs == 2,
                                 False)
        states = [h, c]
    else:
        y, h = torch._VF.gru(x, h0, params, b is not None, 1, 0.0, False, dirs == 2, False)
        states = [h]
    y = y.reshape(x.shape[0], batch, dirs, hidden).permute(0, 2, 1, 3)
    return ([y] + states)[:max(1, num_outputs)]


op("LSTM")(lambda attrs, inputs, n: _recurrent(attrs, inputs, n, "LSTM"))
op("GRU")(lambda attrs, inputs, n: _recurrent(attrs, inputs, n, "GRU"))


@op("TopK", host=(1,))
def _top_k(attrs, inputs, _):
    x, k = inputs[0], inputs[1]
    k = int(k[0] if isinstance(k, (list, tuple)) else k)
    values, indices = torch.topk(x, k, dim=int(attrs.get("axis", -1)),
                                 largest=bool(attrs.get("largest", 1)), sorted=True)
    return [values, indices]


@op("ScatterElements")
def _scatter_elements(attrs, inputs, _):
    data, indices, updates = inputs
    if data.is_floating_point() and updates.is_floating_point():
        data = data.to(updates.dtype)  # a constant's fp32 in a float64 reference
    axis = int(attrs.get("axis", 0))
    indices = torch.where(indices < 0, indices + data.shape[axis], indices)
    reduction = _text(attrs.get("reduction", "none"))
    if reduction == "none":
        return [torch.scatter(data, axis, indices, updates)]
    if reduction == "add":
        return [torch.scatter_add(data, axis, indices, updates)]
    return [torch.scatter_reduce(data, axis, indices, updates,
                                 {"mul": "prod", "max": "amax", "min": "amin"}[reduction])]


@op("Gemm")
def _gemm(attrs, inputs, _):
    a, b = inputs[0], inputs[1]
    if attrs.get("transA", 0):
        a = a.t()
    if attrs.get("transB", 0):
        b = b.t()
    y = a @ b
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        y = y * alpha
    if len(inputs) > 2 and inputs[2] is not None:
        c = inputs[2]
        y = y + (c if beta == 1.0 else beta * c)
    return [y]


@op("MatMul")
def _matmul(attrs, inputs, _):
    return [torch.matmul(inputs[0], inputs[1])]


@op("BatchNormalization")
def _batch_norm(attrs, inputs, num_outputs, update_running_stats=False):
    """update_running_stats: also write the new running statistics into the
    mean and var input tensors (persistent buffers of a training loop)."""
    x, scale, bias, mean, var = inputs[:5]
    training = bool(attrs.get("training_mode", 0)) or num_outputs > 1
    eps = float(attrs.get("epsilon", 1e-5))
    if not training:
        return [F.batch_norm(x, mean, var, scale, bias, training=False, eps=eps)]
    momentum = float(attrs.get("momentum", 0.9))
    running_mean, running_var = mean.detach().clone(), var.detach().clone()
    y = F.batch_norm(x, running_mean, running_var, scale, bias, training=True,
                     momentum=1.0 - momentum, eps=eps)
    if update_running_stats:
        with torch.no_grad():
            mean.copy_(running_mean)
            var.copy_(running_var)
    outputs = [y, running_mean, running_var]
    if num_outputs > 3:  # BatchNormalization-9 form: + saved mean, saved inverse std
        dims = [0] + list(range(2, x.dim()))
        with torch.no_grad():
            batch_mean = x.mean(dims)
            batch_var = x.var(dims, unbiased=False)
        outputs += [batch_mean, torch.rsqrt(batch_var + eps)]
    return outputs[:num_outputs]


@op("LayerNormalization")
def _layer_norm(attrs, inputs, num_outputs):
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    axis = int(attrs.get("axis", -1)) % x.dim()
    eps = float(attrs.get("epsilon", 1e-5))
    y = F.layer_norm(x, tuple(x.shape[axis:]), scale, bias, eps)
    if num_outputs == 1:
        return [y]
    dims = list(range(axis, x.dim()))
    mean = x.mean(dims, keepdim=True)
    inv_std = torch.rsqrt(x.var(dims, unbiased=False, keepdim=True) + eps)
    return [y, mean, inv_std][:num_outputs]


@op("Softmax")
def _softmax(attrs, inputs, _):
    return [torch.softmax(inputs[0], int(attrs.get("axis", -1)))]


@op("LogSoftmax")
def _log_softmax(attrs, inputs, _):
    return [torch.log_softmax(inputs[0], int(attrs.get("axis", -1)))]


for _name, _fn in (("Relu", torch.relu), ("Erf", torch.erf), ("Tanh", torch.tanh),
                   ("Sigmoid", torch.sigmoid), ("Sqrt", torch.sqrt), ("Neg", torch.neg),
                   ("Exp", torch.exp), ("Log", torch.log), ("Abs", torch.abs),
                   ("Reciprocal", torch.reciprocal), ("Sin", torch.sin), ("Cos", torch.cos),
                   ("Tan", torch.tan), ("Asin", torch.asin), ("Acos", torch.acos),
                   ("Atan", torch.atan), ("Sinh", torch.sinh), ("Cosh", torch.cosh),
                   ("Asinh", torch.asinh), ("Acosh", torch.acosh), ("Atanh", torch.atanh),
                   ("Round", torch.round), ("Sign", torch.sign)):
    op(_name)(lambda attrs, inputs, _, fn=_fn: [fn(inputs[0])])


@op("Add")
def _add(attrs, inputs, _):
    return [inputs[0] + inputs[1]]


@op("Sub")
def _sub(attrs, inputs, _):
    return [inputs[0] - inputs[1]]


@op("Mul")
def _mul(attrs, inputs, _):
    return [inputs[0] * inputs[1]]


@op("Div")
def _div(attrs, inputs, _):
    a, b = inputs
    if a.is_floating_point() or b.is_floating_point():
        return [a / b]
    return [torch.div(a, b, rounding_mode="trunc")]


@op("Pow")
def _pow(attrs, inputs, _):
    a, b = inputs
    if a.is_floating_point() and not b.is_floating_point():
        b = b.to(a.dtype)
    return [torch.pow(a, b)]


@op("Equal")
def _equal(attrs, inputs, _):
    return [torch.eq(inputs[0], inputs[1])]


@op("Where")
def _where(attrs, inputs, _):
    return [torch.where(inputs[0].bool(), inputs[1], inputs[2])]


@op("ReduceMean", host=(1,))
def _reduce_mean(attrs, inputs, _):
    x = inputs[0]
    axes = attrs.get("axes")
    if axes is None and len(inputs) > 1 and inputs[1] is not None:
        axes = inputs[1]
    keep = bool(attrs.get("keepdims", 1))
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(x.dim()))
    return [x.mean([int(a) for a in axes], keepdim=keep)]


def _reduction_axes(attrs, inputs, x):
    """The axes of a Reduce* node (attribute before opset 18, input since),
    or None for the identity of noop_with_empty_axes."""
    axes = attrs.get("axes")
    if axes is None and len(inputs) > 1 and inputs[1] is not None:
        axes = inputs[1]
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return None
        axes = list(range(x.dim()))
    return [int(a) for a in axes]


def _reduction(reduce_fn):
    def run(attrs, inputs, _):
        x = inputs[0]
        axes = _reduction_axes(attrs, inputs, x)
        if axes is None:
            return [x]
        return [reduce_fn(x, axes, bool(attrs.get("keepdims", 1)))]
    return run


for _name, _fn in (
        ("ReduceSum", lambda x, a, k: torch.sum(x, a, keepdim=k)),
        ("ReduceL1", lambda x, a, k: torch.linalg.vector_norm(x, 1, a, keepdim=k)),
        ("ReduceL2", lambda x, a, k: torch.linalg.vector_norm(x, 2, a, keepdim=k)),
        ("ReduceSumSquare", lambda x, a, k: torch.sum(torch.square(x), a, keepdim=k)),
        ("ReduceLogSum", lambda x, a, k: torch.log(torch.sum(x, a, keepdim=k))),
        ("ReduceLogSumExp", lambda x, a, k: torch.logsumexp(x, a, keepdim=k))):
    op(_name, host=(1,))(_reduction(_fn))


for _name, _fn in (("Elu", F.elu), ("Celu", F.celu)):
    op(_name)(lambda attrs, inputs, _, fn=_fn: [fn(inputs[0], float(attrs.get("alpha", 1.0)))])


@op("Selu")
def _selu(attrs, inputs, _):
    x = inputs[0]
    alpha = float(attrs.get("alpha", 1.67326319217681884765625))
    gamma = float(attrs.get("gamma", 1.05070102214813232421875))
    return [gamma * torch.where(x > 0, x, alpha * torch.expm1(x))]


@op("ThresholdedRelu")
def _thresholded_relu(attrs, inputs, _):
    x = inputs[0]
    return [torch.where(x > float(attrs.get("alpha", 1.0)), x, torch.zeros_like(x))]


@op("PRelu")
def _prelu(attrs, inputs, _):
    x, slope = inputs
    return [torch.where(x >= 0, x, slope * x)]


for _name, _fn in (("Softplus", F.softplus), ("Softsign", F.softsign), ("Mish", F.mish)):
    op(_name)(lambda attrs, inputs, _, fn=_fn: [fn(inputs[0])])


@op("Size")
def _size(attrs, inputs, _):
    return [torch.tensor(inputs[0].numel(), dtype=torch.int64, device=inputs[0].device)]


@op("CastLike")
def _cast_like(attrs, inputs, _):
    return [inputs[0].to(inputs[1].dtype)]


def _negative_log_likelihood(attrs, log_prob, target, weight):
    ignore = attrs.get("ignore_index")
    reduction = attrs.get("reduction", b"mean")
    if weight is not None:  # a float Constant in a float64 run
        weight = weight.to(log_prob.dtype)
    return F.nll_loss(log_prob, target.long(), weight=weight,
                      ignore_index=-100 if ignore is None else int(ignore),
                      reduction=reduction.decode() if isinstance(reduction, bytes) else reduction)


@op("NegativeLogLikelihoodLoss")
def _nll_loss(attrs, inputs, _):
    weight = inputs[2] if len(inputs) > 2 else None
    return [_negative_log_likelihood(attrs, inputs[0], inputs[1], weight)]


@op("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy_loss(attrs, inputs, num_outputs):
    log_prob = F.log_softmax(inputs[0], 1)
    weight = inputs[2] if len(inputs) > 2 else None
    return [_negative_log_likelihood(attrs, log_prob, inputs[1], weight), log_prob][:num_outputs]


def _wrapped(index: torch.Tensor, length: int) -> torch.Tensor:
    index = index.long()
    return torch.where(index < 0, index + length, index)


def _arg_extreme(maximum):
    def run(attrs, inputs, _):
        x = inputs[0]
        axis = int(attrs.get("axis", 0)) % x.dim()
        keep = bool(attrs.get("keepdims", 1))
        pick = torch.argmax if maximum else torch.argmin
        if attrs.get("select_last_index", 0):
            flipped = pick(torch.flip(x, [axis]), axis, keepdim=keep)
            return [x.shape[axis] - 1 - flipped]
        return [pick(x, axis, keepdim=keep)]
    return run


op("ArgMax")(_arg_extreme(True))
op("ArgMin")(_arg_extreme(False))


@op("Hardmax")
def _hardmax(attrs, inputs, _):
    x = inputs[0]
    axis = int(attrs.get("axis", -1)) % x.dim()
    hot = F.one_hot(torch.argmax(x, axis), x.shape[axis])
    return [hot.movedim(-1, axis).to(x.dtype)]


@op("OneHot", host=(1,))
def _one_hot(attrs, inputs, _):
    indices, depth, values = inputs[0], int(inputs[1][0] if isinstance(inputs[1], list)
                                            else inputs[1]), inputs[2]
    index = _wrapped(indices, depth)
    valid = (index >= 0) & (index < depth)
    hot = F.one_hot(index.clamp(0, depth - 1), depth) * valid.unsqueeze(-1)
    axis = int(attrs.get("axis", -1)) % (indices.dim() + 1)
    hot = hot.movedim(-1, axis).to(values.dtype)
    return [values[0] + (values[1] - values[0]) * hot]


@op("DepthToSpace")
def _depth_to_space(attrs, inputs, _):
    x, b = inputs[0], int(attrs["blocksize"])
    n, c, h, w = x.shape
    mode = attrs.get("mode", b"DCR")
    if (mode.decode() if isinstance(mode, bytes) else mode) == "DCR":
        # DCR numbers channels (i * b + j) * C' + c; pixel_shuffle reads c * b^2 + i * b + j.
        x = x.reshape(n, b * b, c // (b * b), h, w).transpose(1, 2).reshape(n, c, h, w)
    return [F.pixel_shuffle(x, b)]


@op("SpaceToDepth")
def _space_to_depth(attrs, inputs, _):
    x, b = inputs[0], int(attrs["blocksize"])
    y = F.pixel_unshuffle(x, b)  # channels c * b^2 + i * b + j; ONNX: (i * b + j) * C + c
    n, c = x.shape[:2]
    return [y.reshape(n, c, b * b, *y.shape[2:]).transpose(1, 2).reshape(y.shape)]


@op("InstanceNormalization")
def _instance_norm(attrs, inputs, _):
    x, scale, bias = inputs
    return [F.instance_norm(x, weight=scale, bias=bias, eps=float(attrs.get("epsilon", 1e-5)))]


@op("GatherElements")
def _gather_elements(attrs, inputs, _):
    data, index = inputs
    axis = int(attrs.get("axis", 0)) % data.dim()
    return [torch.gather(data, axis, _wrapped(index, data.shape[axis]))]


@op("Mean")
def _mean(attrs, inputs, _):
    return [sum(inputs[1:], inputs[0]) / len(inputs)]


@op("Reshape", host=(1,))
def _reshape(attrs, inputs, _):
    x, shape = inputs[0], [int(s) for s in inputs[1]]
    if not attrs.get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return [x.reshape(shape)]


@op("Transpose")
def _transpose(attrs, inputs, _):
    x = inputs[0]
    perm = attrs.get("perm") or list(reversed(range(x.dim())))
    return [x.permute(*[int(p) for p in perm])]


@op("Flatten")
def _flatten(attrs, inputs, _):
    x = inputs[0]
    axis = int(attrs.get("axis", 1)) % (x.dim() + 1) if x.dim() else 0
    outer = math.prod(x.shape[:axis])
    return [x.reshape(outer, -1)]


@op("Squeeze", host=(1,))
def _squeeze(attrs, inputs, _):
    x = inputs[0]
    axes = attrs.get("axes")
    if axes is None and len(inputs) > 1 and inputs[1] is not None:
        axes = inputs[1]
    if axes is None:
        axes = [i for i, s in enumerate(x.shape) if s == 1]
    keep = {int(a) % x.dim() for a in axes}
    return [x.reshape([s for i, s in enumerate(x.shape) if i not in keep])]


@op("Unsqueeze", host=(1,))
def _unsqueeze(attrs, inputs, _):
    x = inputs[0]
    axes = attrs.get("axes")
    if axes is None:
        axes = inputs[1]
    rank = x.dim() + len(axes)
    shape = list(x.shape)
    for a in sorted(int(a) % rank for a in axes):
        shape.insert(a, 1)
    return [x.reshape(shape)]


@op("Concat")
def _concat(attrs, inputs, _):
    return [torch.cat(list(inputs), int(attrs["axis"]))]


@op("Split", host=(1,))
def _split(attrs, inputs, num_outputs):
    x = inputs[0]
    axis = int(attrs.get("axis", 0))
    sizes = attrs.get("split")
    if sizes is None and len(inputs) > 1 and inputs[1] is not None:
        sizes = inputs[1]
    if sizes is None:
        n = int(attrs.get("num_outputs", num_outputs))
        dim = x.shape[axis]
        chunk = -(-dim // n)
        sizes = [chunk] * (dim // chunk) + ([dim % chunk] if dim % chunk else [])
    return list(torch.split(x, [int(s) for s in sizes], axis))


@op("Slice", host=(1, 2, 3, 4))
def _slice(attrs, inputs, _):
    x = inputs[0]
    starts, ends = inputs[1], inputs[2]
    axes = inputs[3] if len(inputs) > 3 and inputs[3] is not None else list(range(len(starts)))
    steps = inputs[4] if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts)
    index: List[object] = [slice(None)] * x.dim()
    flips = []
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = int(axis) % x.dim()
        dim = x.shape[axis]
        start, end, step = int(start), int(end), int(step)
        if step > 0:
            index[axis] = slice(*slice(start, end, step).indices(dim))
        else:  # negative step: index the positions explicitly
            positions = list(range(*slice(start, end, step).indices(dim)))
            flips.append((axis, positions))
    y = x[tuple(index)]
    for axis, positions in flips:
        y = y.index_select(axis, torch.tensor(positions, dtype=torch.long, device=y.device))
    return [y]


@op("Gather")
def _gather(attrs, inputs, _):
    data, indices = inputs
    axis = int(attrs.get("axis", 0)) % data.dim()
    idx = indices.long()
    idx = torch.where(idx < 0, idx + data.shape[axis], idx)
    out_shape = list(data.shape[:axis]) + list(idx.shape) + list(data.shape[axis + 1:])
    return [data.index_select(axis, idx.reshape(-1)).reshape(out_shape)]


@op("Shape")
def _shape(attrs, inputs, _):
    dims = list(inputs[0].shape)
    start = int(attrs.get("start", 0))
    end = attrs.get("end")
    dims = dims[start:] if end is None else dims[start:int(end)]
    return [torch.tensor(dims, dtype=torch.int64, device=inputs[0].device)]


@op("Expand", host=(1,))
def _expand(attrs, inputs, _):
    x, shape = inputs[0], [int(s) for s in inputs[1]]
    return [x.expand(torch.broadcast_shapes(tuple(x.shape), tuple(shape)))]


@op("Trilu", host=(1,))
def _trilu(attrs, inputs, _):
    k = int(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else 0
    fn = torch.triu if attrs.get("upper", 1) else torch.tril
    return [fn(inputs[0], k)]


@op("Cast")
def _cast(attrs, inputs, _):
    to = int(attrs["to"])
    if to not in ONNX_TO_TORCH:
        raise MeasureError(f"Cast to ONNX type {to} is not supported")
    return [inputs[0].to(ONNX_TO_TORCH[to])]


def _tensor_attr(value, device) -> torch.Tensor:
    return torch.from_numpy(numpy_helper.to_array(value).copy()).to(device)


@op("Constant")
def _constant(attrs, inputs, _, device="cpu"):
    if "value" in attrs:
        return [_tensor_attr(attrs["value"], device)]
    for key, dtype in (("value_float", torch.float32), ("value_floats", torch.float32),
                       ("value_int", torch.int64), ("value_ints", torch.int64)):
        if key in attrs:
            return [torch.tensor(attrs[key], dtype=dtype, device=device)]
    raise MeasureError(f"Constant with attributes {sorted(attrs)} is not supported")


@op("ConstantOfShape", host=(0,))
def _constant_of_shape(attrs, inputs, _, device="cpu"):
    shape = [int(s) for s in inputs[0]]
    if "value" in attrs:
        value = _tensor_attr(attrs["value"], device).reshape(())
        return [value.expand(shape).clone()]
    return [torch.zeros(shape, dtype=torch.float32, device=device)]


@op("Range", host=(0, 1, 2))
def _range(attrs, inputs, _, device="cpu", dtype=None):
    start, limit, delta = inputs
    return [torch.arange(start, limit, delta, dtype=dtype, device=device)]


def _pool_args(attrs, x):
    rank = x.dim() - 2
    kernel = [int(k) for k in attrs["kernel_shape"]]
    strides = [int(s) for s in attrs.get("strides", [1] * rank)]
    return rank, kernel, strides, _spatial_pads(attrs, rank)


_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


@op("MaxPool")
def _max_pool(attrs, inputs, num_outputs):
    x = inputs[0]
    rank, kernel, strides, pads = _pool_args(attrs, x)
    if num_outputs > 1:
        raise MeasureError("MaxPool with an Indices output is not supported")
    x, padding = _pad_spatial(x, pads, rank, value=-math.inf)
    dilation = [int(d) for d in attrs.get("dilations", [1] * rank)]
    return [_MAX_POOL[rank](x, kernel, strides, padding, dilation,
                            ceil_mode=bool(attrs.get("ceil_mode", 0)))]


@op("AveragePool")
def _average_pool(attrs, inputs, _):
    x = inputs[0]
    rank, kernel, strides, pads = _pool_args(attrs, x)
    include = bool(attrs.get("count_include_pad", 0))
    if pads[:rank] != pads[rank:] and not include and any(pads):
        raise MeasureError("AveragePool with asymmetric pads and count_include_pad=0")
    x, padding = _pad_spatial(x, pads, rank)
    return [_AVG_POOL[rank](x, kernel, strides, padding, ceil_mode=bool(attrs.get("ceil_mode", 0)),
                            count_include_pad=include)]


@op("GlobalAveragePool")
def _global_average_pool(attrs, inputs, _):
    x = inputs[0]
    return [x.mean(list(range(2, x.dim())), keepdim=True)]


@op("Pad", host=(1, 2, 3))
def _pad(attrs, inputs, _):
    x = inputs[0]
    pads = attrs.get("pads")
    if pads is None:
        pads = inputs[1]
    value = attrs.get("value", 0.0)
    if len(inputs) > 2 and inputs[2] is not None and inputs[2] != []:
        value = inputs[2]
    axes = inputs[3] if len(inputs) > 3 and inputs[3] is not None else list(range(x.dim()))
    axes = [int(a) % x.dim() for a in axes]
    n = len(axes)
    begins, ends = [0] * x.dim(), [0] * x.dim()
    for i, axis in enumerate(axes):
        begins[axis], ends[axis] = int(pads[i]), int(pads[n + i])
    # F.pad pads trailing dims; drop leading all-zero axes.
    first = next((i for i in range(x.dim()) if begins[i] or ends[i]), x.dim())
    torch_pads = _torch_pad_order(begins[first:], ends[first:])
    mode = attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode == "constant":
        return [F.pad(x, torch_pads, value=float(value))]
    return [F.pad(x, torch_pads, mode={"reflect": "reflect", "edge": "replicate"}[mode])]


@op("Dropout", host=(1, 2))
def _dropout(attrs, inputs, num_outputs, active=True):
    x = inputs[0]
    ratio = inputs[1] if len(inputs) > 1 and inputs[1] is not None else attrs.get("ratio", 0.5)
    training = bool(inputs[2]) if len(inputs) > 2 and inputs[2] is not None else False
    ratio = float(ratio)
    if not (training and active) or ratio == 0.0:
        return [x, torch.ones_like(x, dtype=torch.bool)][:num_outputs]
    mask = torch.rand_like(x) >= ratio
    return [x * mask / (1.0 - ratio), mask][:num_outputs]


@op("Identity")
def _identity(attrs, inputs, _):
    return [inputs[0]]


@op("Clip", host=(1, 2))
def _clip(attrs, inputs, _):
    lo = inputs[1] if len(inputs) > 1 and inputs[1] not in (None, []) else attrs.get("min")
    hi = inputs[2] if len(inputs) > 2 and inputs[2] not in (None, []) else attrs.get("max")
    return [torch.clamp(inputs[0], None if lo is None else float(lo),
                        None if hi is None else float(hi))]


SUPPORTED_OPS = tuple(sorted(OPS))


# ---------------------------------------------------------------------------
# Executor
# ---------------------------------------------------------------------------

def _median_ms(samples: List[float]) -> float:
    return statistics.median(samples) * 1e3


class _Timer:
    """Times a callable: CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def __call__(self, fn: Callable[[], object]) -> float:
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e-3
        begin = time.perf_counter()
        fn()
        return time.perf_counter() - begin


class GraphExecutor:
    """Runs an ONNX graph node by node with torch, optionally timing nodes.

    dims binds symbolic input dimensions by name (`batch` from
    micro_batch_size). dropout=False makes training-mode Dropout the identity
    (for deterministic checks).
    """

    def __init__(self, model: onnx.ModelProto, micro_batch_size: int = 1,
                 dims: Optional[Dict[str, int]] = None, device: str = "cpu",
                 seed: int = 0, dropout: bool = True):
        self.model = model
        self.graph = model.graph
        self.device = torch.device(device)
        self.dims = dict(dims or {})
        self.dims.setdefault("batch", micro_batch_size)
        self.seed = seed
        self.dropout = dropout
        unsupported = sorted({n.op_type for n in self.graph.node if n.op_type not in OPS})
        if unsupported:
            node = next(n for n in self.graph.node if n.op_type in unsupported)
            raise MeasureError(
                f"node '{node.name}': op type {node.op_type} is not supported "
                f"(unsupported in this graph: {', '.join(unsupported)}; "
                f"supported: {', '.join(SUPPORTED_OPS)})")
        self._buffers = self._buffer_names()
        self._update_running_stats = False

    # -- inputs ------------------------------------------------------------

    def _buffer_names(self) -> set:
        """Initializers that are not trainable: BatchNorm running statistics."""
        buffers = set()
        for node in self.graph.node:
            if node.op_type == "BatchNormalization":
                buffers.update(node.input[3:5])
        return buffers

    def initializers(self) -> Dict[str, torch.Tensor]:
        values = {}
        for init in self.graph.initializer:
            array = numpy_helper.to_array(init).copy()
            t = torch.from_numpy(array).to(self.device)
            if t.is_floating_point() and init.name not in self._buffers:
                t.requires_grad_(True)
            values[init.name] = t
        return values

    def _input_shape(self, value: onnx.ValueInfoProto) -> List[int]:
        shape = []
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_value"):
                shape.append(dim.dim_value)
            elif dim.dim_param in self.dims:
                shape.append(int(self.dims[dim.dim_param]))
            else:
                raise MeasureError(f"input '{value.name}': dimension '{dim.dim_param}' is not "
                                   f"bound (use --dim {dim.dim_param}=VALUE)")
        return shape

    def _index_bound(self, name: str, initializer_shapes: Dict[str, List[int]]) -> Optional[int]:
        """The first dim of an initializer that a Gather indexes with `name`."""
        for node in self.graph.node:
            if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == name \
                    and node.input[0] in initializer_shapes:
                axis = int(_attrs(node).get("axis", 0))
                return initializer_shapes[node.input[0]][axis]
        return None

    def random_inputs(self) -> Dict[str, torch.Tensor]:
        """Random graph inputs: normal floats; integer ids below the vocabulary
        size when an input indexes an embedding, else zeros."""
        generator = torch.Generator().manual_seed(self.seed)
        init_names = {i.name for i in self.graph.initializer}
        init_shapes = {i.name: list(i.dims) for i in self.graph.initializer}
        inputs = {}
        for value in self.graph.input:
            if value.name in init_names:
                continue
            shape = self._input_shape(value)
            dtype = ONNX_TO_TORCH.get(value.type.tensor_type.elem_type)
            if dtype is None:
                raise MeasureError(f"input '{value.name}': element type "
                                   f"{value.type.tensor_type.elem_type} is not supported")
            if dtype.is_floating_point:
                t = torch.randn(shape, generator=generator).to(dtype)
            else:
                bound = self._index_bound(value.name, init_shapes)
                t = torch.randint(0, bound, shape, generator=generator).to(dtype) if bound \
                    else torch.zeros(shape, dtype=dtype)
            inputs[value.name] = t.to(self.device)
        return inputs

    # -- execution ---------------------------------------------------------

    def _call(self, node: onnx.NodeProto, attrs, args: List[object]) -> List[Optional[torch.Tensor]]:
        fn = OPS[node.op_type]
        n_out = len(node.output)
        if node.op_type == "BatchNormalization" and self._update_running_stats:
            return fn(attrs, args, n_out, update_running_stats=True)
        if node.op_type in ("Constant", "ConstantOfShape"):
            return fn(attrs, args, n_out, device=self.device)
        if node.op_type == "Range":
            dtype = self._range_dtype
            return fn(attrs, args, n_out, device=self.device, dtype=dtype)
        if node.op_type == "Dropout":
            return fn(attrs, args, n_out, active=self.dropout)
        return fn(attrs, args, n_out)

    def _prepare(self, node: onnx.NodeProto, values: Dict[str, torch.Tensor]) -> List[object]:
        """The node's inputs: tensors, or Python values for HOST_INPUTS."""
        host = HOST_INPUTS[node.op_type]
        args: List[object] = []
        self._range_dtype = None
        for i, name in enumerate(node.input):
            if name == "":
                args.append(None)
                continue
            if name not in values:
                raise MeasureError(f"node '{node.name}' ({node.op_type}): input '{name}' "
                                   "has no value")
            t = values[name]
            if i in host:
                if node.op_type == "Range" and i == 0:
                    self._range_dtype = t.dtype
                t = t.tolist()
            args.append(t)
        return args

    def run(self, inputs: Optional[Dict[str, torch.Tensor]] = None,
            time_nodes: bool = False, repeat: int = 5, warmup: int = 2,
            progress: Optional[Callable[[str], None]] = None,
            parameters: Optional[Dict[str, torch.Tensor]] = None):
        """Executes the graph. Returns (outputs by name, times by node name).

        Values are kept with autograd across the whole graph only when
        time_nodes is False (so that the caller can differentiate the
        outputs); when timing, each node runs on detached copies of its inputs
        and values are freed after their last use.

        parameters: the caller's tensors for the initializers (e.g. from
        `initializers()`, kept across calls so that an optimizer can update
        them); training-mode BatchNormalization then updates the running
        statistics in them in place, run after run. Without it, fresh copies
        of the stored initializers are used and nothing persists.
        """
        torch.manual_seed(self.seed)
        self._update_running_stats = parameters is not None and not time_nodes
        values: Dict[str, torch.Tensor] = dict(
            self.initializers() if parameters is None else parameters)
        values.update(inputs if inputs is not None else self.random_inputs())
        outputs = [o.name for o in self.graph.output]
        remaining: Dict[str, int] = {}
        for node in self.graph.node:
            for name in node.input:
                remaining[name] = remaining.get(name, 0) + 1
        times: Dict[str, Tuple[float, float]] = {}
        timer = _Timer(self.device)
        for index, node in enumerate(self.graph.node):
            attrs = _attrs(node)
            try:
                args = self._prepare(node, values)
                if time_nodes:
                    leaf_args = [a.detach().requires_grad_(a.requires_grad)
                                 if isinstance(a, torch.Tensor) else a for a in args]
                    with torch.enable_grad():
                        results = self._call(node, attrs, leaf_args)
                    grad_inputs = [a for a in leaf_args if isinstance(a, torch.Tensor)
                                   and a.requires_grad]
                    grad_outputs = [r for r in results if _is_float(r) and r.requires_grad]
                    if grad_inputs and grad_outputs:
                        name = node.name or f"{node.op_type}#{index}"
                        times[name] = self._time_node(node, attrs, leaf_args, grad_inputs,
                                                      timer, repeat, warmup)
                        if progress:
                            progress(f"{name} {node.op_type} fwd {times[name][0]:.4f} ms "
                                     f"bwd {times[name][1]:.4f} ms")
                    results = [r.detach().requires_grad_(r.requires_grad) if _is_float(r) else r
                               for r in results]
                else:
                    results = self._call(node, attrs, args)
            except MeasureError as error:
                raise MeasureError(f"node '{node.name}' ({node.op_type}): {error}") from error
            except Exception as error:
                raise MeasureError(f"node '{node.name}' ({node.op_type}) failed: "
                                   f"{type(error).__name__}: {error}") from error
            for name, result in zip(node.output, results):
                if name:
                    values[name] = result
            if time_nodes:
                for name in node.input:
                    remaining[name] -= 1
                    if remaining[name] == 0 and name not in outputs:
                        values.pop(name, None)
        return {name: values[name] for name in outputs}, times

    def _time_node(self, node, attrs, args, grad_inputs, timer, repeat, warmup):
        def forward():
            return self._call(node, attrs, args)

        forward_samples = []
        with torch.enable_grad():
            for i in range(warmup + repeat):
                seconds = timer(forward)
                if i >= warmup:
                    forward_samples.append(seconds)
            results = forward()
        outs = [r for r in results if _is_float(r) and r.requires_grad]
        upstream = [torch.randn_like(r) for r in outs]

        def backward():
            return torch.autograd.grad(outs, grad_inputs, upstream, retain_graph=True,
                                       allow_unused=True)

        backward_samples = []
        for i in range(warmup + repeat):
            seconds = timer(backward)
            if i >= warmup:
                backward_samples.append(seconds)
        return _median_ms(forward_samples), _median_ms(backward_samples)


def measure_model(model: onnx.ModelProto, micro_batch_size: int = 1,
                  dims: Optional[Dict[str, int]] = None, device: str = "cpu",
                  repeat: int = 5, warmup: int = 2, seed: int = 0,
                  progress: Optional[Callable[[str], None]] = None) -> Dict[str, Dict[str, float]]:
    """Times every differentiable float node; returns the profile dict."""
    executor = GraphExecutor(model, micro_batch_size, dims, device, seed)
    _, times = executor.run(time_nodes=True, repeat=repeat, warmup=warmup, progress=progress)
    return {name: {"forward_ms": round(f, 6), "backward_ms": round(b, 6)}
            for name, (f, b) in times.items()}


def write_profile(times: Dict[str, Dict[str, float]], path: str,
                  meta: Optional[Dict[str, object]] = None) -> None:
    """Writes the profile; `meta` goes under "meta" next to "ops"."""
    document: Dict[str, object] = {"ops": times}
    if meta:
        document = {"meta": meta, "ops": times}
    with open(path, "w") as f:
        json.dump(document, f, indent=1, sort_keys=False)
        f.write("\n")
