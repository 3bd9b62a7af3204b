#!/usr/bin/python3
"""Writes node-test folders (model.onnx, test_data_set_0/{input,output}_N.pb)
for the forms of GridSample, RoiAlign, MaxUnpool, Det, DFT and STFT that the
ONNX node tests leave out, their outputs computed independently: torch's
grid_sample, max_pool2d and max_unpool2d, torchvision's roi_align, numpy's
FFTs and determinants, and for RoiAlign's max mode a loop over the samples as
the ONNX operator describes it. onnx_node_values.py checks them through
pipe-opt and pipe-run.

  make_sampling_spectral.py DIR
"""
import os
import sys

import numpy as np
import onnx
import torch
import torchvision
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def info(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, value):
    return helper.make_node("Constant", [], [name], name=name,
                            value=numpy_helper.from_array(np.asarray(value)))


def write(root, name, nodes, inputs, outputs, opset):
    """inputs and outputs: (name, array) pairs; the graph's inputs and
    outputs are declared from the arrays."""
    def declare(entries):
        return [info(n, F if a.dtype == np.float32 else I64, list(a.shape)) for n, a in entries]
    graph = helper.make_graph(nodes, name, declare(inputs), declare(outputs))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    folder = os.path.join(root, name)
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    for kind, entries in (("input", inputs), ("output", outputs)):
        for index, (_, array) in enumerate(entries):
            with open(os.path.join(data, f"{kind}_{index}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(array).SerializeToString())


def f32(array):
    return np.asarray(array, dtype=np.float32)


def grid_sample(root, rng, name, x_shape, grid_shape, reach, mode, padding, align, opset):
    """GridSample against torch's grid_sample; `mode` is (torch's, ONNX's) name."""
    x = f32(rng.standard_normal(x_shape))
    grid = f32(rng.uniform(-reach, reach, grid_shape))
    y = torch.nn.functional.grid_sample(torch.from_numpy(x), torch.from_numpy(grid),
                                        mode=mode[0], padding_mode=padding,
                                        align_corners=bool(align)).numpy()
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], name="sample", mode=mode[1],
                            padding_mode=padding, align_corners=align)
    write(root, name, [node], [("x", x), ("grid", grid)], [("y", y)], opset)


def grid_sample_3d(root, rng):
    """Opset 20's N-d GridSample: trilinear, border padding."""
    grid_sample(root, rng, "test_extra_gridsample_3d_linear_border", (1, 2, 3, 4, 5),
                (1, 2, 3, 4, 3), 1.3, ("bilinear", "linear"), "border", 0, 20)


def grid_sample_bicubic(root, rng):
    """Bicubic with reflection and aligned corners: each tap reflected."""
    grid_sample(root, rng, "test_extra_gridsample_bicubic_reflection", (2, 3, 5, 6),
                (2, 4, 3, 2), 1.4, ("bicubic", "bicubic"), "reflection", 1, 16)


ROIS = f32([[0.5, 1.0, 9.0, 7.5], [2.0, 0.0, 5.0, 11.0], [-1.0, 3.0, 14.0, 9.0]])


def roi_align_adaptive(root, rng):
    """sampling_ratio 0: ceil(roi size / output size) samples per bin, read
    from the constant rois; half_pixel is torchvision's aligned=True."""
    x = f32(rng.standard_normal((2, 3, 8, 10)))
    batch = np.array([1, 0, 1], dtype=np.int64)
    boxes = np.concatenate([batch[:, None].astype(np.float32), ROIS], axis=1)
    y = torchvision.ops.roi_align(torch.from_numpy(x), torch.from_numpy(boxes), (3, 2),
                                  spatial_scale=0.5, sampling_ratio=-1, aligned=True).numpy()
    nodes = [const("rois", ROIS),
             helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], name="align",
                              output_height=3, output_width=2, sampling_ratio=0,
                              spatial_scale=0.5, coordinate_transformation_mode="half_pixel")]
    write(root, "test_extra_roialign_adaptive", nodes, [("x", x), ("batch", batch)], [("y", y)],
          16)


def bilinear_corners(image, y, x):
    """The four weighted corner values of one RoiAlign sample (all zero
    beyond [-1, size]), as the operator describes them."""
    height, width = image.shape
    if y < -1.0 or y > height or x < -1.0 or x > width:
        return [0.0] * 4
    y, x = max(y, 0.0), max(x, 0.0)
    y_low, x_low = int(y), int(x)
    if y_low >= height - 1:
        y_low = y_high = height - 1
        y = float(y_low)
    else:
        y_high = y_low + 1
    if x_low >= width - 1:
        x_low = x_high = width - 1
        x = float(x_low)
    else:
        x_high = x_low + 1
    ly, lx = y - y_low, x - x_low
    hy, hx = 1 - ly, 1 - lx
    return [hy * hx * image[y_low, x_low], hy * lx * image[y_low, x_high],
            ly * hx * image[y_high, x_low], ly * lx * image[y_high, x_high]]


def roi_align_max(root, rng):
    """Max mode, output_half_pixel: the largest weighted corner of the
    samples of each bin."""
    x = f32(rng.standard_normal((1, 2, 9, 11)))
    rois = f32([[1.0, 1.5, 8.0, 6.0], [0.0, 0.0, 10.5, 8.5]])
    batch = np.zeros(2, dtype=np.int64)
    out_h, out_w, ratio, scale = 2, 3, 2, 1.0
    y = np.zeros((2, 2, out_h, out_w), dtype=np.float64)
    for r, (x1, y1, x2, y2) in enumerate(rois.astype(np.float64) * scale):
        roi_h, roi_w = max(y2 - y1, 1.0), max(x2 - x1, 1.0)
        bin_h, bin_w = roi_h / out_h, roi_w / out_w
        for c in range(2):
            for ph in range(out_h):
                for pw in range(out_w):
                    best = -np.inf
                    for iy in range(ratio):
                        for ix in range(ratio):
                            sy = y1 + ph * bin_h + (iy + 0.5) * bin_h / ratio
                            sx = x1 + pw * bin_w + (ix + 0.5) * bin_w / ratio
                            best = max(best, *bilinear_corners(x[0, c], sy, sx))
                    y[r, c, ph, pw] = best
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], name="align", mode="max",
                            output_height=out_h, output_width=out_w, sampling_ratio=ratio,
                            spatial_scale=scale, coordinate_transformation_mode="output_half_pixel")
    write(root, "test_extra_roialign_max", [node], [("x", x), ("rois", rois), ("batch", batch)],
          [("y", f32(y))], 16)


def det_pivoting(root, rng):
    """4x4 determinants whose elimination must swap rows: a zero, and a
    smaller entry than one below, on the diagonal."""
    x = rng.standard_normal((3, 4, 4))
    x[0, 0, 0] = 0.0
    x[1, 1, :] = 0.1 * x[1, 1, :]
    x[2] = x[2][[3, 1, 0, 2]]
    x = f32(x)
    y = f32(np.linalg.det(x.astype(np.float64)))
    write(root, "test_extra_det_pivoting", [helper.make_node("Det", ["x"], ["y"], name="det")],
          [("x", x)], [("y", y)], 11)


def dft_padded(root, rng):
    """A real signal of 12 samples padded to 16 points, one-sided."""
    x = f32(rng.standard_normal((2, 12, 1)))
    spectrum = np.fft.rfft(x[..., 0].astype(np.float64), n=16, axis=1)
    y = f32(np.stack([spectrum.real, spectrum.imag], axis=-1))
    nodes = [const("length", np.array(16, dtype=np.int64)),
             helper.make_node("DFT", ["x", "length"], ["y"], name="dft", axis=1, onesided=1)]
    write(root, "test_extra_dft_onesided_padded", nodes, [("x", x)], [("y", y)], 17)


def dft_inverse_axis_input(root, rng):
    """Opset 20: the axis as an input (-2, the last signal dim), inverse."""
    x = f32(rng.standard_normal((2, 3, 7, 2)))
    signal = x[..., 0].astype(np.float64) + 1j * x[..., 1].astype(np.float64)
    result = np.fft.ifft(signal, axis=2)
    y = f32(np.stack([result.real, result.imag], axis=-1))
    nodes = [const("axis", np.array(-2, dtype=np.int64)),
             helper.make_node("DFT", ["x", "", "axis"], ["y"], name="dft", inverse=1)]
    write(root, "test_extra_dft_inverse_axis_input", nodes, [("x", x)], [("y", y)], 20)


def stft_complex(root, rng):
    """A complex signal, both sides of the spectrum, a window and its length."""
    x = f32(rng.standard_normal((1, 40, 2)))
    window = f32(0.5 - 0.5 * np.cos(2 * np.pi * np.arange(10) / 10))
    signal = x[0, :, 0].astype(np.float64) + 1j * x[0, :, 1].astype(np.float64)
    frames = [np.fft.fft(signal[s:s + 10] * window) for s in range(0, 31, 5)]
    spectrum = np.stack(frames)[None]
    y = f32(np.stack([spectrum.real, spectrum.imag], axis=-1))
    nodes = [const("step", np.array(5, dtype=np.int64)),
             const("length", np.array(10, dtype=np.int64)),
             helper.make_node("STFT", ["x", "step", "window", "length"], ["y"], name="stft",
                              onesided=0)]
    write(root, "test_extra_stft_complex_two_sided", nodes, [("x", x), ("window", window)],
          [("y", y)], 17)


def max_unpool_after_pool(root, rng):
    """MaxPool's indices into an odd-sized input, unpooled to that size."""
    source = torch.from_numpy(f32(rng.standard_normal((2, 3, 7, 9))))
    pooled, plane = torch.nn.functional.max_pool2d(source, 3, 2, 1, return_indices=True)
    y = torch.nn.functional.max_unpool2d(pooled, plane, 3, 2, 1, output_size=(7, 9)).numpy()
    # PyTorch numbers each plane; ONNX numbers the whole tensor.
    offsets = (torch.arange(2 * 3).reshape(2, 3, 1, 1) * 7 * 9)
    indices = (plane + offsets).numpy().astype(np.int64)
    nodes = [const("shape", np.array([2, 3, 7, 9], dtype=np.int64)),
             helper.make_node("MaxUnpool", ["x", "indices", "shape"], ["y"], name="unpool",
                              kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
    write(root, "test_extra_maxunpool_after_pool", nodes,
          [("x", pooled.numpy()), ("indices", indices)], [("y", y)], 11)


def main():
    root = sys.argv[1]
    rng = np.random.default_rng(7)
    for case in (grid_sample_3d, grid_sample_bicubic, roi_align_adaptive, roi_align_max,
                 det_pivoting, dft_padded, dft_inverse_axis_input, stft_complex,
                 max_unpool_after_pool):
        case(root, rng)


if __name__ == "__main__":
    main()
