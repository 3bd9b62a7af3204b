//===- Spectral.cpp - ONNX DFT, STFT and MelWeightMatrix as nn ops --------===//
//
// A discrete Fourier transform of static length is linear in its input: the
// transformed dim is moved next to the (real, imaginary) dim, the two are
// flattened, and one matmul with a constant [L * c, K * 2] matrix gives the K
// bins as (real, imaginary) pairs. Truncation and zero padding to
// dft_length are rows of that matrix left out. STFT is a constant gather of
// the frames, the window as a product, and the same matmul. MelWeightMatrix
// reads only constants and is a constant. The gradients are the matmul's,
// the gather's and the product's.
//
//===----------------------------------------------------------------------===//
#include "CompositeOps.h"
#include "Composer.h"

#include <cmath>
#include <sstream>

using namespace mlir;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace {
using Kind = AttrKind;

/// The real [rows * components, bins * 2] matrix of a DFT of `length`
/// points over the first min(rows, length) samples (the rest are cut; fewer
/// rows than points is zero padding), for inputs of 1 (real) or 2 (real,
/// imaginary) components. Entry ((j, a), (k, b)) is what component a of
/// sample j adds to component b of bin k; the inverse transform turns the
/// other way and divides by `length`.
Value dftMatrix(Composer &c, int64_t rows, int64_t components, int64_t length, int64_t bins,
                bool inverse, Type element) {
  const double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / length : 1.0;
  SmallVector<double> values(rows * components * bins * 2, 0.0);
  auto at = [&](int64_t j, int64_t a, int64_t k, int64_t b) -> double & {
    return values[(j * components + a) * bins * 2 + k * 2 + b];
  };
  for (int64_t j = 0; j < std::min(rows, length); ++j) {
    for (int64_t k = 0; k < bins; ++k) {
      // (j k mod length) keeps the angle exact for long transforms.
      const double angle = 2 * M_PI * double((j * k) % length) / double(length);
      const double cosine = std::cos(angle) * scale, sine = sign * std::sin(angle) * scale;
      // (re + i im)(cos + i sign sin) = re cos - im sign sin + i (im cos + re sign sin).
      at(j, 0, k, 0) = cosine;
      at(j, 0, k, 1) = sine;
      if (components == 2) {
        at(j, 1, k, 0) = -sine;
        at(j, 1, k, 1) = cosine;
      }
    }
  }
  return c.constantOf({rows * components, bins * 2}, values, element);
}

/// The DFT of x (static, float, its last dim the 1 or 2 components) along
/// `axis`, `length` points, the first `bins` of them kept.
Value dftAlong(Composer &c, Value x, int64_t axis, int64_t length, int64_t bins, bool inverse) {
  auto type = cast<RankedTensorType>(x.getType());
  const int64_t rank = type.getRank();
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    perm.push_back(d == axis ? rank - 2 : d == rank - 2 ? axis : d);
  const bool moved = axis != rank - 2;
  if (moved)
    x = c.transpose(x, perm);
  SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[axis], shape[rank - 2]);
  const int64_t rows = shape[rank - 2], components = shape[rank - 1];
  SmallVector<int64_t> flat(shape.begin(), shape.end() - 2);
  flat.push_back(rows * components);
  Value matrix = dftMatrix(c, rows, components, length, bins, inverse, type.getElementType());
  Value y = c.op("nn.matmul", {c.reshape(x, flat), matrix});
  SmallVector<int64_t> pairs(shape.begin(), shape.end() - 2);
  pairs.append({bins, 2});
  y = c.reshape(y, pairs);
  return moved ? c.transpose(y, perm) : y;
}

/// The input's type when it is a static float tensor of rank >= `minRank`
/// whose last dim holds 1 or 2 components.
FailureOr<RankedTensorType> signalInput(NodeImporter &n, int64_t minRank) {
  auto type = rankedInput(n, 0);
  if (!type || !type.hasStaticShape() || !isa<FloatType>(type.getElementType()))
    return n.error() << n.node.op_type() << " needs a static float input, got "
                     << n.input(0).getType();
  if (type.getRank() < minRank || (type.getShape().back() != 1 && type.getShape().back() != 2))
    return n.error() << n.node.op_type() << " input " << type << " must be of rank " << minRank
                     << " or more, its last dim 1 (real) or 2 (real, imaginary)";
  return type;
}

/// One positive value of a constant integer operand.
FailureOr<int64_t> positiveScalar(NodeImporter &n, unsigned i, llvm::StringRef what) {
  auto values = constantInts(n, i, what);
  if (failed(values))
    return failure();
  if (values->size() != 1 || (*values)[0] < 1)
    return n.error() << n.node.op_type() << " " << what << " must be one value of 1 or more";
  return (*values)[0];
}

/// DFT (opsets 17 and 20; axis an attribute, then an input, default -2).
Values importDft(NodeImporter &n) {
  const bool axisInput = n.version >= 20;
  std::vector<AttrSpec> specs{{"inverse", Kind::Int}, {"onesided", Kind::Int}};
  if (!axisInput)
    specs.push_back({"axis", Kind::Int});
  if (failed(n.expectInputs(1, axisInput ? 3 : 2)) || failed(n.expectAttributes(specs)))
    return failure();
  auto type = signalInput(n, 3);
  if (failed(type))
    return failure();
  const int64_t rank = type->getRank();
  int64_t axis = axisInput ? -2 : n.getInt("axis", 1);
  if (axisInput && n.input(2)) {
    auto given = constantInts(n, 2, "axis");
    if (failed(given))
      return failure();
    if (given->size() != 1)
      return n.error() << "DFT axis must be one value";
    axis = (*given)[0];
  }
  auto normalized = normalizedAxis(n, axis, rank);
  if (failed(normalized))
    return failure();
  if (*normalized == rank - 1)
    return n.error() << "DFT axis " << axis << " is the (real, imaginary) dim of " << *type
                     << "; it must be a signal dim";
  const int64_t samples = type->getDimSize(*normalized);
  int64_t length = samples;
  if (n.input(1)) {
    auto given = positiveScalar(n, 1, "dft_length");
    if (failed(given))
      return failure();
    length = *given;
  }
  const bool inverse = n.getInt("inverse", 0), onesided = n.getInt("onesided", 0);
  if (onesided && (inverse || type->getShape().back() == 2))
    return n.error() << "DFT onesided applies to the forward transform of a real signal "
                     << "(inverse " << inverse << ", input " << *type << ")";
  Composer c(n);
  const int64_t bins = onesided ? length / 2 + 1 : length;
  return c.result(dftAlong(c, n.input(0), *normalized, length, bins, inverse));
}

/// STFT: frames of frame_length samples every frame_step, each times the
/// window when one is given, transformed.
Values importStft(NodeImporter &n) {
  if (failed(n.expectInputs(2, 4)) || failed(n.expectAttributes({{"onesided", Kind::Int}})))
    return failure();
  auto type = signalInput(n, 3);
  auto step = positiveScalar(n, 1, "frame_step");
  if (failed(type) || failed(step))
    return failure();
  if (type->getRank() != 3)
    return n.error() << "STFT signal " << *type << " must be [batch, length, 1 or 2]";
  int64_t length = 0;
  auto window = n.input(2) ? rankedInput(n, 2) : RankedTensorType();
  if (n.input(2)) {
    if (!window || window.getRank() != 1 || !window.hasStaticShape())
      return n.error() << "STFT window must be a static 1-D tensor, got " << n.input(2).getType();
    length = window.getDimSize(0);
  }
  if (n.input(3)) {
    auto given = positiveScalar(n, 3, "frame_length");
    if (failed(given))
      return failure();
    if (length && *given != length)
      return n.error() << "STFT frame_length " << *given << " differs from the window's length "
                       << length;
    length = *given;
  }
  if (length == 0)
    return n.error() << "STFT needs a window or a frame_length";
  const int64_t samples = type->getDimSize(1), components = type->getDimSize(2);
  if (length > samples)
    return n.error() << "STFT frames of " << length << " samples do not fit the signal's "
                     << samples;
  const bool onesided = n.getInt("onesided", 1);
  if (onesided && components == 2)
    return n.error() << "STFT onesided applies to a real signal, got " << *type;
  const int64_t frames = (samples - length) / *step + 1;
  SmallVector<int64_t> starts;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < length; ++j)
      starts.push_back(f * *step + j);
  Composer c(n);
  Value positions = c.constant({frames, length}, starts);
  Value framed = c.op("nn.gather", {n.input(0), positions},
                      {n.builder.getNamedAttr("axis", n.builder.getI64IntegerAttr(1))});
  if (window)
    framed = c.mul(framed, c.reshape(n.input(2), {length, 1}));
  const int64_t bins = onesided ? length / 2 + 1 : length;
  return c.result(dftAlong(c, framed, 2, length, bins, false));
}

/// MelWeightMatrix: the [dft_length / 2 + 1, num_mel_bins] triangular
/// filters, their corners num_mel_bins + 2 points evenly spaced on the mel
/// scale between the edges, each rounded down to a spectrogram bin.
Values importMelWeightMatrix(NodeImporter &n) {
  if (failed(n.expectInputs(5, 5)) ||
      failed(n.expectAttributes({{"output_datatype", Kind::Int}})))
    return failure();
  auto mels = positiveScalar(n, 0, "num_mel_bins");
  auto dftLength = positiveScalar(n, 1, "dft_length");
  auto rate = positiveScalar(n, 2, "sample_rate");
  auto lower = constantFloats(n, 3, "lower_edge_hertz");
  auto upper = constantFloats(n, 4, "upper_edge_hertz");
  if (failed(mels) || failed(dftLength) || failed(rate) || failed(lower) || failed(upper))
    return failure();
  if (lower->size() != 1 || upper->size() != 1)
    return n.error() << "MelWeightMatrix edges must be one value each";
  const double low = (*lower)[0], high = (*upper)[0];
  auto plain = [](double value) { // 4096, not 4.096000e+03
    std::ostringstream text;
    text << value;
    return text.str();
  };
  if (!(low >= 0 && low < high && high <= *rate / 2.0))
    return n.error() << "MelWeightMatrix edges " << plain(low) << " and " << plain(high)
                     << " Hz must satisfy 0 <= lower < upper <= sample_rate / 2 ("
                     << plain(*rate / 2.0) << ")";
  Type element = convertDataType(n.getInt("output_datatype", 1), n.builder.getContext());
  if (!element || !isa<FloatType>(element))
    return n.error() << "MelWeightMatrix output_datatype " << n.getInt("output_datatype", 1)
                     << " is not a float type";
  auto toMel = [](double hertz) { return 2595 * std::log10(1 + hertz / 700); };
  const double lowMel = toMel(low), step = (toMel(high) - lowMel) / (*mels + 2);
  const int64_t bins = *dftLength / 2 + 1;
  SmallVector<int64_t> corner;
  for (int64_t i = 0; i < *mels + 2; ++i) {
    const double hertz = 700 * (std::pow(10, (i * step + lowMel) / 2595) - 1);
    corner.push_back(static_cast<int64_t>(std::floor((*dftLength + 1) * hertz / *rate)));
    if (corner.back() >= bins)
      return n.error() << "MelWeightMatrix filter corner " << i << " at " << plain(hertz)
                       << " Hz falls past the last of " << bins << " spectrogram bins";
  }
  SmallVector<double> values(bins * *mels, 0.0);
  auto at = [&](int64_t bin, int64_t mel) -> double & { return values[bin * *mels + mel]; };
  for (int64_t i = 0; i < *mels; ++i) {
    const int64_t left = corner[i], center = corner[i + 1], right = corner[i + 2];
    if (center == left)
      at(center, i) = 1;
    else
      for (int64_t j = left; j <= center; ++j)
        at(j, i) = double(j - left) / double(center - left);
    for (int64_t j = center; j < right; ++j)
      at(j, i) = double(right - j) / double(right - center);
  }
  Composer c(n);
  return c.result(c.constantOf({bins, *mels}, values, element));
}
} // namespace

void pipe::onnx_import::addSpectral(const AddOp &add) {
  add("DFT", {17, 20}, 17, importDft);
  add("STFT", {17}, 17, importStft);
  add("MelWeightMatrix", {17}, 17, importMelWeightMatrix);
}
