"""Calibrates the cost model's kernel families against measured times.

docs/cost-model.md ("Calibration") describes the model this fits: per kernel
family and direction,

    time = kernels x launch + FLOPs / (peak x exp(c . [1, ln k, ln m, ln n, ln stride]))

for GEMMs and convolutions (m, n, k: the implicit GEMM's shape), and

    time = kernels x launch + bytes / (bandwidth x e_mem) [+ FLOPs / (fp32 peak x e_flop)]

for the memory-bound families. Profilers that synchronise around every layer
they time (PipeDream) add a cost per layer; it is fitted too, per direction,
and added to predictions only when they are compared with such a profile.
The pieces:

- `read_profile` reads PipeDream/DAPPLE per-layer profiles (graph.txt);
- `map_profile` maps profile layers to the ONNX nodes of the same model, by op
  signature and graph structure (CNN layers one to one) or by module (a
  transformer layer to the nodes of that layer);
- `cost_records` runs `pipe-opt --test-print-pipe-cost` and reads per-op
  FLOPs, bytes, kernels, family and GEMM shape;
- `fit` fits the coefficients of every family from (record, measured time)
  samples, `predict` evaluates them (the same formula as the C++ analysis);
- `calibration_json` writes the "calibration" object of a target file.

scripts/cost-fit-report.py drives them: the fit, leave-one-model-out, the plan
regret. Fitting needs numpy only; exporting the models needs torch.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import subprocess
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

COMPUTE_FAMILIES = ("gemm", "conv_1x1", "conv_3x3s1", "conv_other")
MEMORY_FAMILIES = ("elementwise", "normalization", "reduction", "pooling", "data_movement")
FAMILIES = COMPUTE_FAMILIES + MEMORY_FAMILIES

# Exponent bounds of the compute families' efficiency (the C++ clamps the same).
MIN_LOG_EFFICIENCY = math.log(1e-3)
MAX_LOG_EFFICIENCY = math.log(10.0)


# ----------------------------------------------------------------------------
# Profiles
# ----------------------------------------------------------------------------

_NODE = re.compile(
    r"^\s*(node\d+) -- (.*?) -- forward_compute_time=([\d.eE+-]+), "
    r"backward_compute_time=([\d.eE+-]+), activation_size=(\[[^\]]*\]|[\d.eE+-]+), "
    r"parameter_size=([\d.eE+-]+)")
_EDGE = re.compile(r"^\s*(node\d+) -- (node\d+)\s*$")


@dataclasses.dataclass
class ProfileLayer:
    id: str
    description: str
    forward_ms: float
    backward_ms: float
    activation_bytes: float
    parameter_bytes: float

    @property
    def kind(self) -> str:
        """The module type: Conv2d, BatchNorm2d, ..., or the layer's name."""
        return re.match(r"[A-Za-z_0-9.]*", self.description).group(0)

    @property
    def timed(self) -> bool:
        """False for layers the profiler did not time (PipeDream reports 0
        for functional ops: Add, Concat, View)."""
        return self.forward_ms > 0 or self.backward_ms > 0


@dataclasses.dataclass
class Profile:
    path: str
    layers: Dict[str, ProfileLayer]
    order: List[str]  # file order
    edges: List[Tuple[str, str]]
    lines: List[str]  # the file, to write copies with other times

    def predecessors(self) -> Dict[str, List[str]]:
        preds: Dict[str, List[str]] = {n: [] for n in self.layers}
        for a, b in self.edges:
            preds[b].append(a)
        return preds

    def topological_order(self) -> List[str]:
        preds = self.predecessors()
        succs: Dict[str, List[str]] = {n: [] for n in self.layers}
        for a, b in self.edges:
            succs[a].append(b)
        indegree = {n: len(p) for n, p in preds.items()}
        ready = sorted((n for n, d in indegree.items() if d == 0), key=_node_number)
        order = []
        while ready:
            n = ready.pop(0)
            order.append(n)
            for s in succs[n]:
                indegree[s] -= 1
                if indegree[s] == 0:
                    ready.append(s)
            ready.sort(key=_node_number)
        if len(order) != len(self.layers):
            raise ValueError(f"{self.path}: the layer graph has a cycle")
        return order

    def with_times(self, times: Dict[str, Tuple[float, float]]) -> str:
        """The profile's text with the forward/backward times of `times`
        (layer id -> (forward_ms, backward_ms)) in place of the measured ones."""
        out = []
        for line in self.lines:
            m = _NODE.match(line)
            if m and m.group(1) in times:
                f, b = times[m.group(1)]
                line = (line[:m.start(3)] + f"{f:.6f}" + line[m.end(3):m.start(4)] +
                        f"{b:.6f}" + line[m.end(4):])
            out.append(line)
        return "".join(out)


def _node_number(node_id: str) -> int:
    return int(node_id[4:])


def read_profile(path: str) -> Profile:
    layers: Dict[str, ProfileLayer] = {}
    order, edges = [], []
    with open(path) as f:
        lines = f.readlines()
    for number, line in enumerate(lines, 1):
        m = _NODE.match(line)
        if m:
            nid, desc, f_ms, b_ms, act, params = m.groups()
            act_bytes = sum(float(x) for x in act.strip("[]").split(";") if x.strip())
            layers[nid] = ProfileLayer(nid, desc.strip(), float(f_ms), float(b_ms), act_bytes,
                                       float(params))
            order.append(nid)
            continue
        m = _EDGE.match(line)
        if m:
            edges.append((m.group(1), m.group(2)))
        elif line.strip():
            raise ValueError(f"{path}:{number}: neither a layer nor an edge: {line.strip()}")
    for a, b in edges:
        for n in (a, b):
            if n not in layers:
                raise ValueError(f"{path}: edge {a} -- {b} names an unknown layer {n}")
    return Profile(path, layers, order, edges, lines)


# ----------------------------------------------------------------------------
# The models the shared profiles measured
# ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class MeasuredModel:
    name: str
    profile: str  # relative to the profiles directory
    family: str  # pipe_opt.models family
    overrides: Tuple[Tuple[str, object], ...]  # on the family's real configuration
    batch: int  # the batch the profile was measured at (its activation sizes say so)
    mapping: str  # "signature" (one ONNX node per layer) or "modules" (a layer per block)
    description: str

    @property
    def per_layer_overhead(self) -> bool:
        """PipeDream's profiler synchronises around every layer it times."""
        return self.profile.startswith("pipedream/")


MEASURED_MODELS: Dict[str, MeasuredModel] = {m.name: m for m in (
    MeasuredModel("resnet50", "pipedream/resnet50.txt", "resnet50", (), 128, "signature",
                  "ResNet-50, batch 128, 224x224 (PipeDream, V100, PyTorch)"),
    MeasuredModel("resnet101", "pipedream/resnet101.txt", "resnet50",
                  (("blocks_per_stage", (3, 4, 23, 3)),), 64, "signature",
                  "ResNet-101, batch 64, 224x224 (PipeDream, V100, PyTorch)"),
    MeasuredModel("vgg16", "pipedream/vgg16.txt", "vgg16", (), 128, "signature",
                  "VGG-16, batch 128, 224x224 (PipeDream, V100, PyTorch)"),
    MeasuredModel("inception_v3", "pipedream/inception_v3.txt", "inception_v3", (), 128,
                  "signature", "Inception-v3 with its auxiliary head, batch 128, 299x299 "
                  "(PipeDream, V100, PyTorch)"),
    MeasuredModel("densenet121", "pipedream/densenet121.txt", "densenet121", (), 64,
                  "signature", "DenseNet-121, batch 64, 224x224 (PipeDream, V100, PyTorch)"),
    MeasuredModel("bert_large", "dapple/bert-24-pbs-6.txt", "bert",
                  (("hidden", 1024), ("layers", 24), ("heads", 16), ("intermediate", 4096),
                   ("seq_len", 384)), 6, "modules",
                  "BERT-large, micro-batch 6, sequence 384 (DAPPLE, V100)"),
)}


def export_measured_model(model: MeasuredModel, out_dir: str) -> str:
    """Exports `model` (training graph, weights in <file>.data) and returns its path."""
    from pipe_opt import export_for_pipeline, models  # torch

    family = models.FAMILIES[model.family]
    config = dataclasses.replace(family.configs["real"], **dict(model.overrides))
    built = models.build(model.family, "real", training=True, batch=2, config=config)
    path = os.path.join(out_dir, f"{model.name}.onnx")
    export_for_pipeline(built.model, built.example_inputs, path,
                        input_names=built.input_names, output_names=built.output_names,
                        external_data=True)
    return path


# ----------------------------------------------------------------------------
# Mapping profile layers to ONNX nodes
# ----------------------------------------------------------------------------

# Profile module -> ONNX op types it exports to. Layers of other kinds (Input,
# View, Size) are not computations and map to nothing.
_ONNX_TYPES = {
    "Conv2d": ("Conv",),
    "BatchNorm2d": ("BatchNormalization",),
    "ReLU": ("Relu",),
    "MaxPool2d": ("MaxPool",),
    "AvgPool2d": ("AveragePool", "GlobalAveragePool"),
    "AdaptiveAvgPool2d": ("GlobalAveragePool", "AveragePool"),
    "Linear": ("Gemm", "MatMul"),
    "Dropout": ("Dropout",),
    "Concat": ("Concat",),
    "Add": ("Add",),
}


def _ints(text: str, key: str) -> Optional[Tuple[int, ...]]:
    m = re.search(key + r"=\(([\d, ]+)\)", text) or re.search(key + r"=(\d+)", text)
    if not m:
        return None
    return tuple(int(x) for x in m.group(1).split(",") if x.strip())


class _OnnxGraph:
    """The parts of an ONNX graph the mapping reads (no weights needed)."""

    def __init__(self, path: str):
        import onnx
        model = onnx.load(path, load_external_data=False)
        graph = model.graph
        self.nodes = list(graph.node)
        self.shapes = {init.name: tuple(init.dims) for init in graph.initializer}
        producer = {}
        for index, node in enumerate(self.nodes):
            for output in node.output:
                producer[output] = index
        self.inputs_of = [[producer[i] for i in node.input if i in producer]
                          for node in self.nodes]

    def name(self, index: int) -> str:
        return self.nodes[index].name

    def attribute(self, index: int, name: str):
        import onnx
        for a in self.nodes[index].attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return None

    def signature_matches(self, index: int, layer: ProfileLayer) -> bool:
        node = self.nodes[index]
        desc = layer.description
        if layer.kind == "Conv2d":
            w = self.shapes.get(node.input[1])
            m = re.match(r"Conv2d\((\d+), (\d+)", desc)
            if not w or not m:
                return False
            groups = self.attribute(index, "group") or 1
            kernel = _ints(desc, "kernel_size")
            stride = _ints(desc, "stride") or (1,)
            strides = tuple(self.attribute(index, "strides") or (1, 1))
            return (w[0] == int(m.group(2)) and w[1] * groups == int(m.group(1)) and
                    (kernel is None or tuple(w[2:]) == _broadcast(kernel, len(w) - 2)) and
                    strides == _broadcast(stride, len(strides)))
        if layer.kind == "BatchNorm2d":
            scale = self.shapes.get(node.input[1])
            m = re.match(r"BatchNorm2d\((\d+)", desc)
            return bool(scale and m and scale[0] == int(m.group(1)))
        if layer.kind == "Linear":
            m = re.search(r"in_features=(\d+), out_features=(\d+)", desc)
            w = self.shapes.get(node.input[1])
            if not m or not w:
                return False
            transposed = node.op_type == "Gemm" and (self.attribute(index, "transB") or 0)
            k, n = (w[1], w[0]) if transposed else (w[0], w[1])
            return (k, n) == (int(m.group(1)), int(m.group(2)))
        if layer.kind in ("MaxPool2d", "AvgPool2d") and node.op_type != "GlobalAveragePool":
            kernel = _ints(desc, "kernel_size")
            shape = self.attribute(index, "kernel_shape")
            return kernel is None or not shape or tuple(shape) == _broadcast(kernel, len(shape))
        return True


def _broadcast(values: Tuple[int, ...], n: int) -> Tuple[int, ...]:
    return values * n if len(values) == 1 else values


@dataclasses.dataclass
class Mapping:
    """Profile layer id -> the ONNX node names it measured (the node it maps
    to first, then nodes of the export that run inside the same module)."""
    nodes: Dict[str, List[str]]
    unmapped: List[str]  # computation layers with no node (an error)


def map_profile(profile: Profile, onnx_path: str, how: str) -> Mapping:
    graph = _OnnxGraph(onnx_path)
    if how == "modules":
        return _map_modules(profile, graph)
    return _map_signatures(profile, graph)


def _map_signatures(profile: Profile, graph: _OnnxGraph) -> Mapping:
    """One ONNX node per computation layer. In topological order, a layer
    maps to the first unused node of its op type and signature whose nearest
    mapped computation ancestors are the images of the layer's nearest
    computation ancestors. Both sides may hold computations the other lacks
    (an identity average pool before VGG's classifier in the export; inner
    concatenations in PipeDream's Inception): ONNX nodes no layer claimed
    are looked through, and so are profile layers the profiler did not time
    (Concat, Add) when no node matches them. Concatenations are looked
    through on both sides, so that one concatenation of n inputs equals a
    chain of binary ones (DenseNet as PipeDream wrote it). A timed layer
    with no node is an error (`Mapping.unmapped`)."""
    preds = profile.predecessors()
    mapped_types = set(_ONNX_TYPES)
    transparent = set()  # untimed layers with no node

    def compute_preds(layer_id: str) -> set:
        found, stack, seen = set(), list(preds[layer_id]), set()
        while stack:
            p = stack.pop()
            if p in seen:
                continue
            seen.add(p)
            kind = profile.layers[p].kind
            if kind == "Size":  # a shape, not data (View(x, x.size(0)))
                continue
            if kind in mapped_types and kind != "Concat" and p not in transparent:
                found.add(p)
            else:
                stack.extend(preds[p])
        return found

    image: Dict[str, int] = {}
    used = set()

    def mapped_preds(index: int) -> frozenset:
        found, stack, seen = set(), list(graph.inputs_of[index]), set()
        while stack:
            p = stack.pop()
            if p in seen:
                continue
            seen.add(p)
            if p in used and graph.nodes[p].op_type != "Concat":
                found.add(p)
            else:
                stack.extend(graph.inputs_of[p])
        return frozenset(found)

    unmapped = []
    for layer_id in profile.topological_order():
        layer = profile.layers[layer_id]
        if layer.kind not in mapped_types:
            continue
        wanted = compute_preds(layer_id)
        choice = None
        if all(p in image for p in wanted):
            wanted_nodes = frozenset(image[p] for p in wanted)
            for index, node in enumerate(graph.nodes):
                if (index not in used and node.op_type in _ONNX_TYPES[layer.kind] and
                        graph.signature_matches(index, layer) and
                        mapped_preds(index) == wanted_nodes):
                    choice = index
                    break
        if choice is None:
            if layer.timed:
                unmapped.append(layer_id)
            else:
                transparent.add(layer_id)
            continue
        image[layer_id] = choice
        used.add(choice)
    # A node no layer claimed (a Pad the export put before an average pool,
    # a Flatten) runs inside the module of the first claimed node it feeds.
    consumers: List[List[int]] = [[] for _ in graph.nodes]
    for index, inputs in enumerate(graph.inputs_of):
        for p in inputs:
            consumers[p].append(index)
    layer_of = {i: lid for lid, i in image.items()}
    nodes = {lid: [graph.name(i)] for lid, i in image.items()}
    for index in range(len(graph.nodes)):
        if index in used:
            continue
        reached, stack, seen = [], list(consumers[index]), set()
        while stack:
            c = stack.pop()
            if c in seen:
                continue
            seen.add(c)
            if c in used:
                reached.append(c)
            else:
                stack.extend(consumers[c])
        if reached:
            nodes[layer_of[min(reached)]].append(graph.name(index))
    return Mapping(nodes, unmapped)


def _map_modules(profile: Profile, graph: _OnnxGraph) -> Mapping:
    """Transformer profiles time whole blocks: `layer_i` is every node of the
    i-th layer module (`/layers.i/...`), `embeddings` and `pooler` their
    modules; nodes outside any module (the attention-mask arithmetic) go to
    the `attention_mask` layer."""
    by_name = {layer.description: lid for lid, layer in profile.layers.items()}
    nodes: Dict[str, List[str]] = {lid: [] for lid in profile.layers}
    unmapped = []
    for node in graph.nodes:
        scope = node.name.lstrip("/").split("/")[0] if node.name.startswith("/") else ""
        m = re.fullmatch(r"layers\.(\d+)", scope)
        key = (f"layer_{m.group(1)}" if m else
               scope if scope in ("embeddings", "pooler") else "attention_mask")
        if key not in by_name:
            unmapped.append(node.name)
            continue
        nodes[by_name[key]].append(node.name)
    for lid, layer in profile.layers.items():
        if layer.timed and not nodes[lid] and layer.description not in ("input_ids",
                                                                         "reshape_input"):
            unmapped.append(lid)
    return Mapping({lid: names for lid, names in nodes.items() if names}, unmapped)


# ----------------------------------------------------------------------------
# pipe-opt's per-op costs
# ----------------------------------------------------------------------------

@dataclasses.dataclass
class CostRecord:
    name: str
    op: str
    kind: str  # kernel class
    family: str  # kernel family ("" for free ops)
    flops: Tuple[float, float]  # forward, backward
    weight_flops: float  # the backward's weight-gradient FLOPs
    bytes: Tuple[float, float]
    kernels: Tuple[int, int]
    shape: Tuple[float, ...]  # batch, m, n, k, stride
    seconds: Tuple[float, float]  # pipe-opt's predicted times


_FIELD = re.compile(r"(\w+)=('[^']*'|\S+)")


def parse_cost_output(text: str) -> List[CostRecord]:
    records = []
    for line in text.splitlines():
        m = re.match(r"op '((?:[^']|'')*)' (\S+) (.*)$", line)
        if not m:
            continue
        fields = dict(_FIELD.findall(m.group(3)))
        if "fwd_flops" not in fields:
            continue
        kernels = fields["kernels"].split("/")
        shape = tuple(float(x) for x in fields["gemm"].split("x")) if "gemm" in fields \
            else (0.0, 0.0, 0.0, 0.0, 1.0)
        records.append(CostRecord(
            name=m.group(1).replace("''", "'"), op=m.group(2), kind=fields.get("class", ""),
            family=fields.get("family", ""),
            flops=(float(fields["fwd_flops"]), float(fields["bwd_flops"])),
            weight_flops=float(fields["bwd_weight_flops"]),
            bytes=(float(fields["fwd_bytes"]), float(fields["bwd_bytes"])),
            kernels=(int(kernels[0]), int(kernels[1])), shape=shape,
            seconds=(float(fields["fwd_us"]) * 1e-6, float(fields["bwd_us"]) * 1e-6)))
    return records


def cost_records(pipe_opt: str, onnx_path: str, micro_batch: int, target: str,
                 dtype: str = "fp32", fuse: bool = True) -> List[CostRecord]:
    """pipe-opt's records of every op; fuse=False keeps every element-wise op
    its own kernel (as eager frameworks run them)."""
    command = [pipe_opt, onnx_path, f"--micro-batch-size={micro_batch}", "-o", os.devnull,
               f"--test-print-pipe-cost=target={target} dtype={dtype} fuse={int(fuse)}"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr.strip()}")
    return parse_cost_output(done.stdout)


def records_by_node(records: Iterable[CostRecord]) -> Dict[str, List[CostRecord]]:
    """Records under their ONNX node's name (ops an importer made from one
    node carry its name, or `<node>/...`)."""
    out: Dict[str, List[CostRecord]] = {}
    for r in records:
        out.setdefault(r.name, []).append(r)
    return out


# ----------------------------------------------------------------------------
# The model and its fit
# ----------------------------------------------------------------------------

@dataclasses.dataclass
class Hardware:
    peak_flops: float  # GEMM/conv peak at the calibrated dtype
    bandwidth: float  # bytes/s
    vector_flops: float  # fp32 CUDA-core peak (the memory families' FLOP term)
    launch_s: float  # per-kernel launch overhead


V100_FP32 = Hardware(15.7e12, 900e9, 15.7e12, 4e-6)  # the built-in v100 target

PASSES = ("forward", "backward", "backward_data", "backward_weight")
# The passes a direction is fitted as: compute families time the two
# gradient kernels apart, memory families the whole backward.
COMPUTE_PASSES = (("forward",), ("backward_data", "backward_weight"))
MEMORY_PASSES = (("forward",), ("backward",))


@dataclasses.dataclass
class FamilyModel:
    overhead_s: float = 0.0
    log_efficiency: Tuple[float, ...] = (0.0,) * 8
    memory_efficiency: float = 1.0
    samples: int = 0
    shape_min: Tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)  # reduction, rows, columns, stride
    shape_max: Tuple[float, ...] = (1e12, 1e12, 1e12, 1e12)
    flop_efficiency: float = 0.0  # memory families: 0 = no FLOP term
    memory_slope: float = 0.0  # memory families: efficiency ~ (bytes / 1 MB)^slope


@dataclasses.dataclass(frozen=True)
class Part:
    """One kernel group of an op in one pass: its work (FLOPs for compute
    families, bytes otherwise), kernels, dims (reduction, rows, columns,
    stride; compute families) and FLOPs (memory families' FLOP term)."""
    name: str  # a PASSES entry
    work: float
    kernels: int
    dims: Tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
    flops: float = 0.0


def kernel_dims(shape: Sequence[float], name: str) -> Tuple[float, float, float, float]:
    """(reduction, rows, columns, stride) of the kernel of pass `name` of a
    GEMM-like op with GemmShape (batch, m, n, k, stride), each >= 1 (the
    kernelDims of CostAnalysis.cpp)."""
    _, m, n, k, stride = (max(1.0, x) for x in shape)
    if name == "backward_data":
        return (n, m, k, stride)
    if name == "backward_weight":
        return (m, n, k, stride)
    return (k, m, n, stride)


def parts_of(record: "CostRecord", direction: int) -> List[Part]:
    """The kernels of `record` in `direction`, as the calibrated model times
    them (CostAnalysis.cpp): a compute op's backward is its data-gradient
    and weight-gradient kernels."""
    if record.family in COMPUTE_FAMILIES:
        if direction == 0:
            return [Part("forward", record.flops[0], record.kernels[0],
                         kernel_dims(record.shape, "forward"))] if record.flops[0] > 0 else []
        weight = record.weight_flops
        weight_kernels = 1 if weight > 0 and record.kernels[1] > 0 else 0
        parts = []
        if record.flops[1] - weight > 0:
            parts.append(Part("backward_data", record.flops[1] - weight,
                              record.kernels[1] - weight_kernels,
                              kernel_dims(record.shape, "backward_data")))
        if weight > 0:
            parts.append(Part("backward_weight", weight, weight_kernels,
                              kernel_dims(record.shape, "backward_weight")))
        return parts
    if record.bytes[direction] <= 0 and record.flops[direction] <= 0:
        return []
    return [Part(PASSES[direction], record.bytes[direction], record.kernels[direction],
                 flops=record.flops[direction])]


def features(values: Sequence[float], low: Sequence[float] = (1.0,) * 4,
             high: Sequence[float] = (1e12,) * 4) -> Tuple[float, ...]:
    """[1, ln r, ln a, ln b, ln stride, (ln r)^2/10, (ln a)^2/10, (ln b)^2/10]
    for a kernel of dims (r, a, b, stride), each clamped into [low, high]
    (the features of CostAnalysis.cpp)."""
    logs = tuple(math.log(min(max(max(1.0, x), low[i]), high[i])) for i, x in enumerate(values))
    return (1.0,) + logs + tuple(x * x / 10 for x in logs[:3])


NUM_FEATURES = 8


def predict(model: FamilyModel, family: str, hw: Hardware, part: Part) -> float:
    """Seconds of one kernel group (the formula of CostAnalysis.cpp)."""
    seconds = part.kernels * model.overhead_s
    if family in COMPUTE_FAMILIES:
        if part.work <= 0:
            return seconds
        f = features(part.dims, model.shape_min, model.shape_max)
        exponent = sum(c * x for c, x in zip(model.log_efficiency, f))
        exponent = min(max(exponent, MIN_LOG_EFFICIENCY), MAX_LOG_EFFICIENCY)
        return seconds + part.work / (hw.peak_flops * math.exp(exponent))
    seconds += part.work / (hw.bandwidth * memory_efficiency(model, part.work))
    if model.flop_efficiency > 0 and part.flops > 0:
        seconds += part.flops / (hw.vector_flops * model.flop_efficiency)
    return seconds


@dataclasses.dataclass
class Sample:
    """One layer's measured time in one direction, and the kernels it ran."""
    family: str
    direction: int
    parts: List[Part]
    seconds: float
    label: str = ""  # model/layer, for reports
    # The profiler's own cost per layer applies (PipeDream synchronises
    # around every layer it times).
    per_layer_overhead: bool = False


RIDGE_SHARED = 0.01  # on the size terms shared by the compute families
RIDGE_FAMILY = 1000.0  # on each family's departure from them
RIDGE_FAMILY_INTERCEPT = 0.01  # on its intercept's (identifiability only)
_FLOP_EFFICIENCY_GRID = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
_LAYER_OVERHEAD_GRID_US = (0, 10, 20, 30, 40, 50, 60, 80, 100, 120, 150, 175, 200, 250, 300,
                           400)
# The loss is the absolute log error (the fit's medians are then unbiased,
# which is what the report measures), minimised by reweighted least squares.
_L1_FLOOR = 0.02


def _loss(log_errors) -> float:
    import numpy as np
    return float(np.sum(np.abs(log_errors)))


def _fit_compute(hw: Hardware, groups: Dict[str, List[Sample]], fixed: Dict[str, List[float]],
                 passes: Sequence[str]) -> Dict[Tuple[str, str], FamilyModel]:
    """The compute families of one direction, fitted together. For each pass
    (the forward; or the backward's data- and weight-gradient kernels, which
    the measurements only show summed) each family's coefficients are shared
    size terms plus its own intercept and a departure from the shared terms
    (ridge), so that a family with few samples borrows the others' size
    dependence. Gauss-Newton on the log time, reweighted for the absolute
    error; `fixed` is each sample's time that is not kernels (the profiler)."""
    import numpy as np
    families = sorted(groups)
    samples = [s for f in families for s in groups[f]]
    index = [families.index(f) for f in families for _ in groups[f]]
    other = np.array([x for f in families for x in fixed[f]])
    width = NUM_FEATURES
    block = width * (1 + len(families))  # shared + one per family, per pass
    count = block * len(passes)
    phis = [np.zeros((len(samples), count)) for _ in passes]
    bases = [np.zeros(len(samples)) for _ in passes]  # seconds at peak
    launches = np.zeros(len(samples))
    ranges = {name: [] for name in passes}
    for row, (sample, f) in enumerate(zip(samples, index)):
        for part in sample.parts:
            p = passes.index(part.name)
            x = features(part.dims)
            phis[p][row, block * p:block * p + width] = x
            phis[p][row, block * p + width * (1 + f):block * p + width * (2 + f)] = x
            bases[p][row] = part.work / hw.peak_flops
            launches[row] += part.kernels * hw.launch_s
            ranges[part.name].append(part.dims)
    other = other + launches
    measured = np.array([s.seconds for s in samples])
    penalty = np.zeros(count)
    for p in range(len(passes)):
        penalty[block * p + 1:block * p + width] = RIDGE_SHARED
        for f in range(len(families)):
            start = block * p + width * (1 + f)
            penalty[start] = RIDGE_FAMILY_INTERCEPT
            penalty[start + 1:start + width] = RIDGE_FAMILY
    penalty = np.diag(penalty)

    def residuals(t):
        comps = []
        for phi, base in zip(phis, bases):
            exponent = np.clip(phi @ t, MIN_LOG_EFFICIENCY, MAX_LOG_EFFICIENCY)
            comps.append(base / np.exp(exponent))
        total = other + sum(comps)
        return np.log(total) - np.log(measured), [c / total for c in comps]

    def objective(t, r):
        return _loss(r) + float(t @ penalty @ t)

    # Start: every pass at the median efficiency of the whole direction.
    theta = np.zeros(count)
    compute = np.maximum(measured - other, 0.05 * measured)
    start = float(np.median(np.log(sum(bases) / compute)))
    for p in range(len(passes)):
        theta[block * p] = start
    r, shares = residuals(theta)
    cost = objective(theta, r)
    for _ in range(200):
        weights = 1.0 / np.maximum(np.abs(r), _L1_FLOOR)
        jacobian = -sum(share[:, None] * phi for share, phi in zip(shares, phis))
        jw = jacobian * weights[:, None]
        step = np.linalg.solve(jacobian.T @ jw + 2 * penalty + 1e-9 * np.eye(count),
                               -(jw.T @ r + 2 * penalty @ theta))
        scale, improved = 1.0, False
        while scale > 1e-4:
            trial = theta + scale * step
            r_trial, shares_trial = residuals(trial)
            trial_cost = objective(trial, r_trial)
            if trial_cost < cost:
                improved = True
                break
            scale /= 2
        if not improved:
            break
        done = cost - trial_cost < 1e-9 * max(1.0, cost)
        theta, r, shares, cost = trial, r_trial, shares_trial, trial_cost
        if done:
            break
    models = {}
    for p, name in enumerate(passes):
        seen = np.array(ranges[name]) if ranges[name] else np.ones((1, 4))
        low = tuple(float(x) for x in seen.min(axis=0))
        high = tuple(float(x) for x in seen.max(axis=0))
        for f, family in enumerate(families):
            if not any(part.name == name for s in groups[family] for part in s.parts):
                continue
            coefficients = theta[block * p:block * p + width] + \
                theta[block * p + width * (1 + f):block * p + width * (2 + f)]
            models[(family, name)] = FamilyModel(hw.launch_s,
                                                 tuple(float(c) for c in coefficients), 1.0,
                                                 len(groups[family]), low, high)
    return models


_MEMORY_SLOPE_GRID = tuple(x / 20 for x in range(-6, 7))  # -0.3 .. 0.3
MEMORY_REFERENCE_BYTES = 1e6  # the size at which the memory efficiency is e_mem


def memory_efficiency(model: FamilyModel, size: float) -> float:
    """e_mem x (bytes / 1 MB)^slope, clamped into [1e-3, 10]."""
    e = model.memory_efficiency * (max(size, 1.0) / MEMORY_REFERENCE_BYTES) ** model.memory_slope
    return min(max(e, 1e-3), 10.0)


def _fit_memory(hw: Hardware, samples: List[Sample], fixed: List[float]) -> FamilyModel:
    """One memory family in one pass: the FLOP efficiency and the size slope
    on grids, the memory efficiency by a golden-section search of the
    absolute log error."""
    import numpy as np
    other = np.array(fixed) + np.array([sum(p.kernels for p in s.parts) * hw.launch_s
                                        for s in samples])
    owner = np.array([i for i, s in enumerate(samples) for _ in s.parts])
    size = np.array([max(p.work, 1.0) for s in samples for p in s.parts])
    part_data = size / hw.bandwidth
    compute = np.array([sum(p.flops for p in s.parts) for s in samples]) / hw.vector_flops
    measured = np.log(np.array([s.seconds for s in samples]))
    best = None
    ratio = (math.sqrt(5) - 1) / 2
    for slope in _MEMORY_SLOPE_GRID:
        scale = (size / MEMORY_REFERENCE_BYTES) ** slope
        for flop_efficiency in _FLOP_EFFICIENCY_GRID:
            base = other + (compute / flop_efficiency if flop_efficiency > 0 else 0.0)

            def error(log_e: float) -> float:
                e = np.clip(math.exp(log_e) * scale, 1e-3, 10.0)
                data = np.bincount(owner, part_data / e, minlength=len(samples))
                return _loss(np.log(np.maximum(base + data, 1e-12)) - measured)
            lo, hi = math.log(1e-3), math.log(10.0)
            x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
            e1, e2 = error(x1), error(x2)
            for _ in range(30):  # brackets ln e to 1e-6 of its range
                if e1 < e2:
                    hi, x2, e2 = x2, x1, e1
                    x1 = hi - ratio * (hi - lo)
                    e1 = error(x1)
                else:
                    lo, x1, e1 = x1, x2, e2
                    x2 = lo + ratio * (hi - lo)
                    e2 = error(x2)
            log_e = (lo + hi) / 2
            err = error(log_e)
            if best is None or err < best[0]:
                best = (err, FamilyModel(hw.launch_s, memory_efficiency=math.exp(log_e),
                                         samples=len(samples), flop_efficiency=flop_efficiency,
                                         memory_slope=slope))
    return best[1]


@dataclasses.dataclass
class Fit:
    """Kernel models per (family, pass), and the profiler's cost per timed
    layer per direction (seconds) that the measurements include."""
    models: Dict[Tuple[str, str], FamilyModel]
    hardware: Hardware
    layer_overhead_s: Tuple[float, float] = (0.0, 0.0)

    def kernel_seconds(self, family: str, parts: Iterable[Part]) -> float:
        return sum(predict(self.models[(family, part.name)], family, self.hardware, part)
                   for part in parts)

    def measured_prediction(self, sample: Sample) -> float:
        """What the profiler would report for `sample` under this fit."""
        t = self.kernel_seconds(sample.family, sample.parts)
        return t + (self.layer_overhead_s[sample.direction] if sample.per_layer_overhead else 0)


def _fit_direction(groups: Dict[str, List[Sample]], hw: Hardware, direction: int,
                   overhead: float) -> Tuple[float, Dict[Tuple[str, str], FamilyModel]]:
    fixed = {f: [overhead if s.per_layer_overhead else 0.0 for s in group]
             for f, group in groups.items()}
    compute = {f: g for f, g in groups.items() if f in COMPUTE_FAMILIES}
    models = _fit_compute(hw, compute, {f: fixed[f] for f in compute},
                          COMPUTE_PASSES[direction]) if compute else {}
    for family, group in groups.items():
        if family not in COMPUTE_FAMILIES:
            models[(family, MEMORY_PASSES[direction][0])] = _fit_memory(hw, group, fixed[family])
    trial = Fit(models, hw, (overhead, overhead))
    total = sum(abs(math.log(max(trial.measured_prediction(s), 1e-12)) - math.log(s.seconds))
                for group in groups.values() for s in group)
    return total, models


# A (family, direction) with fewer samples than this keeps the roofline: its
# samples still inform the size terms the compute families share, but a
# handful of layers of one shape cannot say how its own efficiency moves with
# the shape. The CNNs' classifiers, four 1000-output GEMMs, were the GEMM
# family: extrapolated to BERT-large's GEMMs that fit predicted 1.37x the
# measured forward and 2.49x the backward (with the GEMMs on the roofline:
# 0.90 and 0.96).
MIN_FAMILY_SAMPLES = 10


def fit(samples: Iterable[Sample], hw: Hardware) -> Fit:
    """Fits every (family, direction) with at least 3 samples of positive
    time, keeps the models of those with at least MIN_FAMILY_SAMPLES, and per
    direction the profiler's cost per layer (one value shared
    by all families, chosen on a grid by the total absolute log error)."""
    by_direction: Dict[int, Dict[str, List[Sample]]] = {0: {}, 1: {}}
    for s in samples:
        if s.seconds > 0 and s.family in FAMILIES and s.parts:
            by_direction[s.direction].setdefault(s.family, []).append(s)
    result = Fit({}, hw, (0.0, 0.0))
    overheads = [0.0, 0.0]
    for direction, groups in by_direction.items():
        groups = {f: g for f, g in groups.items() if len(g) >= 3}
        if not groups:
            continue
        grid = _LAYER_OVERHEAD_GRID_US if any(s.per_layer_overhead for g in groups.values()
                                              for s in g) else (0,)
        best = min((_fit_direction(groups, hw, direction, us * 1e-6) + (us * 1e-6,)
                    for us in grid), key=lambda r: r[0])
        overheads[direction] = best[2]
        result.models.update({key: model for key, model in best[1].items()
                              if len(groups[key[0]]) >= MIN_FAMILY_SAMPLES})
    result.layer_overhead_s = (overheads[0], overheads[1])
    return result


def _round(x: float) -> float:
    return float(f"{x:.6g}")


def calibration_json(models: Dict[Tuple[str, str], FamilyModel], source: str,
                     fuse_elementwise: bool = False, dtype: str = "fp32") -> dict:
    """The "calibration" object of a target file (docs/cost-model.md)."""
    families: Dict[str, dict] = {}
    for (family, name), m in sorted(models.items(), key=lambda kv: (kv[0][0],
                                                                   PASSES.index(kv[0][1]))):
        entry = {"overhead_us": _round(m.overhead_s * 1e6), "samples": m.samples}
        if family in COMPUTE_FAMILIES:
            entry["log_efficiency"] = [_round(c) for c in m.log_efficiency]
            entry["shape_min"] = [_round(x) for x in m.shape_min]
            entry["shape_max"] = [_round(x) for x in m.shape_max]
        else:
            entry["memory_efficiency"] = _round(m.memory_efficiency)
            entry["flop_efficiency"] = _round(m.flop_efficiency)
            entry["memory_slope"] = _round(m.memory_slope)
        families.setdefault(family, {})[name] = entry
    return {"source": source, "dtype": dtype, "fuse_elementwise": fuse_elementwise,
            "families": families}


def models_from_json(calibration: dict) -> Dict[Tuple[str, str], FamilyModel]:
    models = {}
    for family, passes in calibration["families"].items():
        for name, entry in passes.items():
            models[(family, name)] = FamilyModel(
                entry.get("overhead_us", 0) * 1e-6,
                tuple(entry.get("log_efficiency", (0,) * NUM_FEATURES)),
                entry.get("memory_efficiency", 1.0), entry.get("samples", 0),
                tuple(entry.get("shape_min", (1.0,) * 4)),
                tuple(entry.get("shape_max", (1e12,) * 4)),
                entry.get("flop_efficiency", 0.0), entry.get("memory_slope", 0.0))
    return models


# ----------------------------------------------------------------------------
# Samples from a mapped profile
# ----------------------------------------------------------------------------

@dataclasses.dataclass
class MappedLayer:
    """A profile layer, the pipe-opt records of its ONNX nodes, and what it
    measured. `family` is the one family of its kernels, or "layer" when they
    span several (a transformer block)."""
    layer: ProfileLayer
    records: List[CostRecord]
    family: str
    # Records of untimed layers whose time the profiler put in this one.
    absorbed: List[CostRecord] = dataclasses.field(default_factory=list)

    def predicted_ms(self, direction: int) -> float:
        """pipe-opt's time of the layer's own ops (untimed layers: 0 is what
        the profiler reports) plus the ops it absorbed."""
        own = sum(r.seconds[direction] for r in self.records) if self.layer.timed else 0.0
        return (own + sum(r.seconds[direction] for r in self.absorbed)) * 1e3

    def measured_ms(self, direction: int) -> float:
        return self.layer.backward_ms if direction else self.layer.forward_ms


def _family_of(records: List[CostRecord]) -> str:
    families = {r.family for r in records if r.family and (r.kernels[0] or r.flops[0] or
                                                           r.bytes[0])}
    return families.pop() if len(families) == 1 else ("mixed" if families else "free")


def mapped_layers(profile: Profile, mapping: Mapping,
                  records: Dict[str, List[CostRecord]]) -> List[MappedLayer]:
    """The mapped layers in file order, each with the records of its nodes.
    A layer the profiler did not time (PipeDream's functional Add and Concat:
    its module hooks time a module from the previous hook, so their kernels
    land in the next module's time) hands its records to the first timed
    layer after it that consumes it."""
    out: Dict[str, MappedLayer] = {}
    for lid in profile.order:
        names = mapping.nodes.get(lid)
        if not names:
            continue
        recs = [r for n in names for r in records.get(n, [])]
        out[lid] = MappedLayer(profile.layers[lid], recs, _family_of(recs))
    successors: Dict[str, List[str]] = {n: [] for n in profile.layers}
    for a, b in profile.edges:
        successors[a].append(b)
    position = {lid: i for i, lid in enumerate(profile.topological_order())}
    for lid in sorted(out, key=position.get):
        ml = out[lid]
        if ml.layer.timed or not ml.records or ml.layer.kind == "Concat":
            continue
        consumers = sorted((c for c in successors[lid] if c in out and out[c].layer.timed),
                           key=position.get)
        if consumers:
            receiver = out[consumers[0]]
            receiver.absorbed.extend(ml.records)
    for ml in out.values():
        if ml.absorbed:
            ml.family = _family_of(ml.records + ml.absorbed)
    return [out[lid] for lid in profile.order if lid in out]


def samples_of(layers: Iterable[MappedLayer], label: str,
               per_layer_overhead: bool = False) -> List[Sample]:
    """Fitting samples: timed layers whose kernels are of one family, and
    (compute families) one op."""
    out = []
    for ml in layers:
        if ml.family not in FAMILIES or not ml.layer.timed:
            continue
        active = [r for r in ml.records + ml.absorbed if r.family == ml.family]
        if not active or (ml.family in COMPUTE_FAMILIES and len(active) != 1):
            continue
        for direction in (0, 1):
            seconds = ml.measured_ms(direction) * 1e-3
            parts = [part for r in active for part in parts_of(r, direction)]
            if seconds > 0 and parts:
                out.append(Sample(ml.family, direction, parts, seconds,
                                  f"{label}/{ml.layer.id}", per_layer_overhead))
    return out
