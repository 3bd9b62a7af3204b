"""Export a torch model to ONNX in the form the pipe-opt importer expects.

pipe-opt plans training, so the export keeps the training-mode forward graph
(BatchNormalization with training_mode=1, Dropout with a training_mode input),
keeps every parameter as a named initializer (no constant folding, so the
initializer names are the framework's `state_dict` names), gives inputs and
outputs stable names, and marks dimension 0 of each as the symbolic `batch`.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import os
import time
import warnings
from typing import Dict, List, Optional, Sequence, Tuple, Union

import onnx
from onnx import external_data_helper, numpy_helper, shape_inference
import torch

# protobuf refuses to serialize a message of 2 GiB or more; torch switches to
# external data by itself above this, and so do we (leaving room for the graph).
PROTOBUF_LIMIT_BYTES = 2**31
EXTERNAL_DATA_THRESHOLD_BYTES = PROTOBUF_LIMIT_BYTES - 64 * 2**20

BATCH_DIM_NAME = "batch"


class ExportError(RuntimeError):
    """The exported graph does not have the form pipe-opt expects."""


@dataclasses.dataclass
class ExportReport:
    """What `export_for_pipeline` wrote and what it checked."""

    path: str
    opset: int
    training: bool
    num_parameters: int
    num_nodes: int
    op_counts: Dict[str, int]
    bytes: int
    seconds: float
    input_names: List[str]
    output_names: List[str]
    initializer_names: List[str]
    external_data_path: Optional[str] = None
    # Parameters of the model that are not initializers of the graph (the
    # traced forward never used them).
    missing_parameters: List[str] = dataclasses.field(default_factory=list)
    # Initializers whose name is not in the model's state_dict (a renamed or
    # folded tensor): the importer could not map them back to the framework.
    unexpected_initializers: List[str] = dataclasses.field(default_factory=list)
    # Buffers (e.g. BatchNorm's num_batches_tracked) that the graph does not
    # read; informative only.
    unused_buffers: List[str] = dataclasses.field(default_factory=list)
    # Everything found wrong (raised as ExportError when strict).
    errors: List[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _as_tuple(example_inputs) -> Tuple[torch.Tensor, ...]:
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    return tuple(example_inputs)


def _default_names(prefix: str, count: int) -> List[str]:
    if count == 1:
        return [prefix]
    return [f"{prefix}_{i}" for i in range(count)]


def _count_ops(graph: onnx.GraphProto, counts: collections.Counter) -> int:
    """Counts node op types, descending into subgraphs (If/Loop/Scan bodies)."""
    total = 0
    for node in graph.node:
        counts[node.op_type] += 1
        total += 1
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                total += _count_ops(attribute.g, counts)
            for subgraph in attribute.graphs:
                total += _count_ops(subgraph, counts)
    return total


def onnx_opset(model: onnx.ModelProto) -> int:
    """The default-domain opset version the model was exported at."""
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    raise ExportError("model imports no default-domain (ai.onnx) opset")


def op_counts(model: onnx.ModelProto) -> Dict[str, int]:
    counts: collections.Counter = collections.Counter()
    _count_ops(model.graph, counts)
    return dict(sorted(counts.items()))


def _batch_dim_errors(model: onnx.ModelProto, names: Sequence[str]) -> List[str]:
    values = {v.name: v for v in list(model.graph.input) + list(model.graph.output)}
    outputs = {v.name for v in model.graph.output}
    errors = []
    for name in names:
        value = values.get(name)
        if value is None:
            errors.append(f"graph has no input or output named '{name}'")
            continue
        dims = value.type.tensor_type.shape.dim
        if name in outputs and value.type.tensor_type.HasField("shape") and not dims:
            continue  # a scalar output (a loss reduced over the batch) has no batch dim
        if not dims or dims[0].dim_param != BATCH_DIM_NAME:
            got = dims[0].dim_param or dims[0].dim_value if dims else "scalar"
            errors.append(
                f"'{name}': dimension 0 is {got!r}, expected symbolic '{BATCH_DIM_NAME}'"
            )
    return errors


def _file_bytes(path: str, model: onnx.ModelProto) -> int:
    total = os.path.getsize(path)
    directory = os.path.dirname(os.path.abspath(path))
    locations = set()
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                locations.add(entry.value)
    for location in locations:
        total += os.path.getsize(os.path.join(directory, location))
    return total


def _external_locations(model: onnx.ModelProto) -> List[str]:
    locations = []
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value not in locations:
                locations.append(entry.value)
    return locations


def _save_with_one_data_file(model: onnx.ModelProto, path: str) -> str:
    location = os.path.basename(path) + ".data"
    data_path = os.path.join(os.path.dirname(os.path.abspath(path)), location)
    if os.path.exists(data_path):
        os.remove(data_path)  # onnx appends to an existing data file
    onnx.save_model(
        model,
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=location,
        size_threshold=0,
    )
    return data_path


def _merged_by_value(parameters: Dict[str, torch.Tensor], missing: Sequence[str],
                     initializer_names: set) -> Dict[str, str]:
    """Missing parameter -> the initializer holding an equal tensor, if any."""
    merged = {}
    for name in missing:
        tensor = parameters[name]
        for kept in initializer_names:
            other = parameters.get(kept)
            if (other is not None and other.shape == tensor.shape
                    and other.dtype == tensor.dtype and torch.equal(other, tensor)):
                merged[name] = kept
                break
    return merged


def _export_to_proto(model, inputs, path, export_args, over_protobuf_limit):
    """Runs torch.onnx.export; returns the whole model (weights in memory) and
    the per-tensor files torch wrote next to `path`, to be removed."""
    if not over_protobuf_limit:
        buffer = io.BytesIO()
        torch.onnx.export(model, inputs, buffer, **export_args)
        return onnx.load_model_from_string(buffer.getvalue()), []
    # Above the protobuf limit torch writes one file per tensor next to `path`.
    torch.onnx.export(model, inputs, path, **export_args)
    onnx_model = onnx.load_model(path, load_external_data=False)
    torch_files = _external_locations(onnx_model)
    external_data_helper.load_external_data_for_model(
        onnx_model, os.path.dirname(os.path.abspath(path)))
    return onnx_model, torch_files


def _restore_buffer_initializers(onnx_model: onnx.ModelProto,
                                 buffers: Dict[str, torch.Tensor]) -> None:
    """Training-mode tracing runs one forward pass, which updates BatchNorm's
    running statistics before torch copies them into the graph; put back the
    values the model had before the export."""
    for index, tensor in enumerate(onnx_model.graph.initializer):
        original = buffers.get(tensor.name)
        if original is not None:
            restored = numpy_helper.from_array(original.cpu().numpy(), tensor.name)
            onnx_model.graph.initializer[index].CopyFrom(restored)


def _static_output_dims(onnx_model: onnx.ModelProto) -> None:
    """Replaces symbolic non-batch output dimensions (torch names them e.g.
    `MatMullogits_dim_1` when a shape flowed through Shape/Range) by the
    values ONNX shape inference with data propagation finds. Inference runs
    on a copy without weights (initializers become typed inputs)."""
    skeleton = onnx.ModelProto()
    skeleton.ir_version = onnx_model.ir_version
    skeleton.opset_import.extend(onnx_model.opset_import)
    skeleton.graph.node.extend(onnx_model.graph.node)
    skeleton.graph.input.extend(onnx_model.graph.input)
    skeleton.graph.output.extend(onnx_model.graph.output)
    for tensor in onnx_model.graph.initializer:
        skeleton.graph.input.append(onnx.helper.make_tensor_value_info(
            tensor.name, tensor.data_type, list(tensor.dims)))
    try:
        inferred = shape_inference.infer_shapes(skeleton, data_prop=True)
    except Exception:  # inference is a convenience here, never a reason to fail
        return
    for output, inferred_output in zip(onnx_model.graph.output, inferred.graph.output):
        dims = output.type.tensor_type.shape.dim
        inferred_dims = inferred_output.type.tensor_type.shape.dim
        if len(dims) != len(inferred_dims):
            continue
        for dim, inferred_dim in zip(dims, inferred_dims):
            if dim.dim_param and dim.dim_param != BATCH_DIM_NAME and inferred_dim.dim_value:
                dim.dim_value = inferred_dim.dim_value  # clears dim_param (oneof)


def _save(onnx_model: onnx.ModelProto, path: str, external_data: bool,
          torch_files: Sequence[str]) -> Optional[str]:
    """Saves `onnx_model`; with external data, into the single `<path>.data`."""
    directory = os.path.dirname(os.path.abspath(path))
    data_path = None
    if external_data:
        data_path = _save_with_one_data_file(onnx_model, path)
    else:
        onnx.save_model(onnx_model, path)
    for location in torch_files:
        os.remove(os.path.join(directory, location))
    return data_path


def export_for_pipeline(
    model: torch.nn.Module,
    example_inputs: Union[torch.Tensor, Sequence[torch.Tensor]],
    path: str,
    input_names: Optional[Sequence[str]] = None,
    output_names: Optional[Sequence[str]] = None,
    opset: int = 17,
    training: bool = True,
    dynamic_batch: bool = True,
    external_data: Optional[bool] = None,
    strict: bool = True,
) -> ExportReport:
    """Exports `model` to `path` and checks the result.

    training: export the training-mode forward graph (TrainingMode.TRAINING);
      False exports the eval-mode graph (the model in eval mode, exported
      with TrainingMode.PRESERVE so that BatchNorm stays unfolded).
    dynamic_batch: name dimension 0 of every input and output `batch`.
    external_data: True writes the weights to `<path>.data` next to the
      model; otherwise this happens only when they would not fit in one
      protobuf (2 GiB).
    strict: raise ExportError when the graph's input/output names differ from
      the requested ones, a batch dimension is not symbolic, an initializer
      name is not a state_dict name, or a parameter is missing from the
      graph; False only records these in `report.errors`.
    """
    start = time.perf_counter()
    inputs = _as_tuple(example_inputs)
    input_names = list(input_names) if input_names else _default_names("input", len(inputs))
    if len(input_names) != len(inputs):
        raise ValueError(f"{len(input_names)} input names for {len(inputs)} inputs")
    output_names = list(output_names) if output_names else ["output"]

    dynamic_axes = None
    if dynamic_batch:
        dynamic_axes = {name: {0: BATCH_DIM_NAME} for name in input_names + output_names}

    parameters = dict(model.named_parameters())  # shared (tied) tensors once
    state_names = set(model.state_dict().keys())
    buffer_names = set(name for name, _ in model.named_buffers())
    parameter_bytes = sum(p.numel() * p.element_size() for p in parameters.values())
    parameter_bytes += sum(b.numel() * b.element_size() for _, b in model.named_buffers())
    over_protobuf_limit = parameter_bytes >= EXTERNAL_DATA_THRESHOLD_BYTES
    external_data = bool(external_data) or over_protobuf_limit

    was_training = model.training
    if training:
        mode = torch.onnx.TrainingMode.TRAINING
    else:
        # TrainingMode.EVAL would also run torch's eval peephole, which folds
        # BatchNorm into the preceding Conv (even without constant folding) and
        # names the folded weights `onnx::Conv_N`. PRESERVE on a model in eval
        # mode gives the same eval graph with the framework's names.
        model.eval()
        mode = torch.onnx.TrainingMode.PRESERVE
    export_args = dict(
        export_params=True,
        training=mode,
        input_names=input_names,
        output_names=output_names,
        opset_version=opset,
        do_constant_folding=False,
        keep_initializers_as_inputs=False,
        dynamic_axes=dynamic_axes,
    )
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    # Tracing in training mode updates BatchNorm statistics; the export must
    # leave the model, and put into the graph, the values it had before.
    buffers_before = {name: b.detach().clone() for name, b in model.named_buffers()}
    try:
        # Tracing needs the forward values only. With autograd on, every
        # activation a backward pass would need stays alive until the trace
        # ends: GPT-2 at 1,024 tokens peaked at 8.1 GB instead of 3.1 GB.
        with warnings.catch_warnings(), torch.no_grad():
            # Training mode drops BatchNorm's `num_batches_tracked += 1` (it only
            # matters when momentum is None); the report lists it in unused_buffers.
            warnings.filterwarnings(
                "ignore", message=r"ONNX Preprocess - Removing mutation .*num_batches_tracked")
            onnx_model, torch_files = _export_to_proto(model, inputs, path, export_args,
                                                       over_protobuf_limit)
    finally:
        model.train(was_training)
        with torch.no_grad():
            for name, buffer in model.named_buffers():
                buffer.copy_(buffers_before[name])
    _restore_buffer_initializers(onnx_model, buffers_before)
    _static_output_dims(onnx_model)
    data_path = _save(onnx_model, path, external_data, torch_files)
    if data_path is not None:
        onnx_model = onnx.load_model(path, load_external_data=False)

    # The path form lets the checker follow external data; otherwise the model in
    # memory is what was written, and checking it skips reading the file again
    # (VGG-16: 0.9 s instead of 2.5 s).
    if data_path is None:
        onnx.checker.check_model(onnx_model)
    else:
        onnx.checker.check_model(path)

    initializer_names = [t.name for t in onnx_model.graph.initializer]
    initializer_set = set(initializer_names)
    counts = op_counts(onnx_model)
    report = ExportReport(
        path=path,
        opset=onnx_opset(onnx_model),
        training=training,
        num_parameters=sum(p.numel() for p in parameters.values()),
        num_nodes=sum(counts.values()),
        op_counts=counts,
        bytes=_file_bytes(path, onnx_model),
        seconds=0.0,
        input_names=[v.name for v in onnx_model.graph.input],
        output_names=[v.name for v in onnx_model.graph.output],
        initializer_names=initializer_names,
        external_data_path=data_path,
        missing_parameters=sorted(set(parameters) - initializer_set),
        unexpected_initializers=sorted(initializer_set - state_names),
        unused_buffers=sorted(buffer_names - initializer_set),
    )

    errors = []
    if report.input_names != input_names:
        errors.append(f"graph inputs are {report.input_names}, expected {input_names}")
    if report.output_names != output_names:
        errors.append(f"graph outputs are {report.output_names}, expected {output_names}")
    if dynamic_batch:
        errors += _batch_dim_errors(onnx_model, input_names + output_names)
    merged = _merged_by_value(parameters, report.missing_parameters, initializer_set)
    if merged:
        errors.append(
            "torch's eval-mode export merges initializers with equal values (e.g. "
            "untrained BatchNorm weights); these parameters became another one's "
            "initializer (give them distinct values, or export in training mode): "
            + ", ".join(f"{name} -> {kept}" for name, kept in merged.items())
        )
    unexplained = [name for name in report.missing_parameters if name not in merged]
    if unexplained:
        errors.append(
            "parameters missing from the graph's initializers (unused by the traced "
            f"forward, or renamed): {unexplained}"
        )
    if report.unexpected_initializers:
        errors.append(
            "initializers whose names are not state_dict names (folded or renamed "
            f"by the exporter): {report.unexpected_initializers}"
        )
    report.errors = errors
    if errors and strict:
        raise ExportError(f"{path}:\n  " + "\n  ".join(errors))
    report.seconds = time.perf_counter() - start
    return report
