//===- Target.cpp - built-in GPU targets and the JSON target format -------===//
//
// Every rate, capacity and intra-node link of the built-in table comes from the
// vendor document named in `source` (dense rates: the data-center datasheets
// print the 2:4-sparsity rate for tensor cores, marked with an asterisk, and we
// use half of it); the inter-node link is a default (see below).
// docs/cost-model.md lists the table with its citations and the conventions
// (capacities in GiB, link bandwidth per direction = half the datasheet's
// bidirectional figure).
//
//===----------------------------------------------------------------------===//
#include "pipe/Analysis/Target.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/FileSystem.h"
#include <cmath>

using namespace pipe;
using llvm::StringRef;

static constexpr StringRef kDtypeNames[] = {"fp32", "tf32", "fp16", "bf16", "fp8"};
static constexpr StringRef kClassNames[] = {"free",          "gemm",      "conv",
                                            "elementwise",   "normalization",
                                            "reduction",     "pooling",   "data_movement"};

std::optional<ComputeDtype> pipe::parseComputeDtype(StringRef text) {
  for (unsigned i = 0; i < 5; ++i)
    if (text.equals_insensitive(kDtypeNames[i]))
      return static_cast<ComputeDtype>(i);
  return std::nullopt;
}
StringRef pipe::toString(ComputeDtype dtype) {
  return kDtypeNames[static_cast<unsigned>(dtype)];
}
unsigned pipe::storageBytes(ComputeDtype dtype) {
  switch (dtype) {
  case ComputeDtype::FP32:
  case ComputeDtype::TF32:
    return 4;
  case ComputeDtype::FP16:
  case ComputeDtype::BF16:
  case ComputeDtype::FP8: // fp8 GEMMs, bf16 activations (Transformer-Engine style)
    return 2;
  }
  return 4;
}

StringRef pipe::toString(KernelClass kind) {
  return kClassNames[static_cast<unsigned>(kind)];
}
std::optional<KernelClass> pipe::parseKernelClass(StringRef text) {
  for (unsigned i = 0; i < kNumKernelClasses; ++i)
    if (text.equals_insensitive(kClassNames[i]))
      return static_cast<KernelClass>(i);
  return std::nullopt;
}

static constexpr StringRef kPassNames[] = {"forward", "backward", "backward_data",
                                           "backward_weight"};
StringRef pipe::toString(KernelPass pass) { return kPassNames[static_cast<unsigned>(pass)]; }

static constexpr StringRef kFamilyNames[] = {
    "none",        "gemm",          "conv_1x1",  "conv_3x3s1", "conv_other",
    "elementwise", "normalization", "reduction", "pooling",    "data_movement"};

StringRef pipe::toString(KernelFamily family) {
  return kFamilyNames[static_cast<unsigned>(family)];
}
std::optional<KernelFamily> pipe::parseKernelFamily(StringRef text) {
  for (unsigned i = 1; i < kNumKernelFamilies; ++i)
    if (text.equals_insensitive(kFamilyNames[i]))
      return static_cast<KernelFamily>(i);
  return std::nullopt;
}
KernelFamily pipe::familyOf(KernelClass kind) {
  switch (kind) {
  case KernelClass::Free:
    return KernelFamily::None;
  case KernelClass::Gemm:
    return KernelFamily::Gemm;
  case KernelClass::Conv:
    return KernelFamily::ConvGeneral;
  case KernelClass::Elementwise:
    return KernelFamily::Elementwise;
  case KernelClass::Normalization:
    return KernelFamily::Normalization;
  case KernelClass::Reduction:
    return KernelFamily::Reduction;
  case KernelClass::Pooling:
    return KernelFamily::Pooling;
  case KernelClass::DataMovement:
    return KernelFamily::DataMovement;
  }
  return KernelFamily::None;
}
bool pipe::isComputeFamily(KernelFamily family) {
  return family == KernelFamily::Gemm || family == KernelFamily::ConvPointwise ||
         family == KernelFamily::ConvWinograd || family == KernelFamily::ConvGeneral;
}

double Target::peakFlops(KernelClass kind, ComputeDtype dtype) const {
  if (kind == KernelClass::Gemm || kind == KernelClass::Conv)
    return gemmPeakFlops[static_cast<unsigned>(dtype)];
  return vectorPeakFlops;
}

// Assumed fractions of peak (docs/cost-model.md, "Efficiency factors"): large
// GEMMs reach 70-80% of tensor-core peak and convolutions somewhat less;
// streaming kernels reach 70-90% of DRAM bandwidth, strided copies less.
std::array<Efficiency, kNumKernelClasses> Target::defaultEfficiencies() {
  std::array<Efficiency, kNumKernelClasses> e;
  e[static_cast<unsigned>(KernelClass::Free)] = {1.0, 1.0};
  e[static_cast<unsigned>(KernelClass::Gemm)] = {0.70, 0.80};
  e[static_cast<unsigned>(KernelClass::Conv)] = {0.60, 0.80};
  e[static_cast<unsigned>(KernelClass::Elementwise)] = {1.0, 0.80};
  e[static_cast<unsigned>(KernelClass::Normalization)] = {1.0, 0.70};
  e[static_cast<unsigned>(KernelClass::Reduction)] = {1.0, 0.70};
  e[static_cast<unsigned>(KernelClass::Pooling)] = {1.0, 0.70};
  e[static_cast<unsigned>(KernelClass::DataMovement)] = {1.0, 0.60};
  return e;
}

namespace {
constexpr double T = 1e12;   // TFLOP/s
constexpr double GBs = 1e9;  // GB/s
constexpr double GiB = 1073741824.0;
constexpr double us = 1e-6;

struct Entry {
  const char *name, *aliases, *description, *source;
  double fp32, tf32, fp16, bf16, fp8; // dense tensor-core TFLOP/s (fp32: CUDA cores)
  double bandwidthGBs, memoryGiB;
  const char *intraKind;
  double intraGBsBidirectional;
  const char *interKind;
  double interGbitPerSecond; // per GPU
};

// Sources (docs/cost-model.md gives the exact table rows used):
//  V100: "NVIDIA Tesla V100 GPU Accelerator" datasheet, V100 SXM2 column.
//  A100: "NVIDIA A100 Tensor Core GPU" datasheet, A100 40GB/80GB SXM columns.
//  H100: "NVIDIA H100 Tensor Core GPU" datasheet, H100 SXM column and (2022
//  edition) H100 PCIe column.
//  H200: "NVIDIA H200 Tensor Core GPU" datasheet, H200 SXM column.
//  L4: "NVIDIA L4 Tensor Core GPU" datasheet. L40S: "NVIDIA L40S" datasheet.
//  RTX 4090: "NVIDIA Ada GPU Architecture" whitepaper (v2.02 or later), Appendix A
//  RTX 4090 table (FP32-accumulate tensor rates, which are half the
//  FP16-accumulate ones on GeForce parts; v2.02 corrected the FP8 one).
// Inter-node defaults are the per-GPU share of the NICs of the matching DGX
// system: DGX-1/DGX-2 (V100) have one EDR port per two GPUs, DGX A100 one HDR
// port per GPU, DGX H100/H200 one NDR port per GPU. PCIe cards: an assumption.
const Entry kEntries[] = {
    {"v100-32gb", "v100", "NVIDIA Tesla V100 SXM2 32GB",
     "NVIDIA Tesla V100 GPU Accelerator datasheet", 15.7, 0, 125, 0, 0, 900, 32,
     "NVLink 2", 300, "EDR InfiniBand 100 Gb/s per 2 GPUs", 50},
    {"a100-40gb", "a10040", "NVIDIA A100 SXM4 40GB",
     "NVIDIA A100 Tensor Core GPU datasheet", 19.5, 156, 312, 312, 0, 1555, 40,
     "NVLink 3", 600, "HDR InfiniBand 200 Gb/s", 200},
    {"a100-80gb", "a100", "NVIDIA A100 SXM4 80GB",
     "NVIDIA A100 Tensor Core GPU datasheet", 19.5, 156, 312, 312, 0, 2039, 80,
     "NVLink 3", 600, "HDR InfiniBand 200 Gb/s", 200},
    {"h100-sxm", "h100", "NVIDIA H100 SXM5 80GB",
     "NVIDIA H100 Tensor Core GPU datasheet", 67, 494.5, 989.5, 989.5, 1979, 3350,
     80, "NVLink 4", 900, "NDR InfiniBand 400 Gb/s", 400},
    {"h100-pcie", "", "NVIDIA H100 PCIe 80GB",
     "NVIDIA H100 Tensor Core GPU datasheet", 51, 378, 756.5, 756.5, 1513, 2000, 80,
     "PCIe 5.0 x16", 128, "Ethernet 100 Gb/s", 100},
    {"h200", "h200-sxm", "NVIDIA H200 SXM 141GB",
     "NVIDIA H200 Tensor Core GPU datasheet", 67, 494.5, 989.5, 989.5, 1979, 4800,
     141, "NVLink 4", 900, "NDR InfiniBand 400 Gb/s", 400},
    {"l4", "", "NVIDIA L4 24GB", "NVIDIA L4 Tensor Core GPU datasheet", 30.3, 60,
     121, 121, 242.5, 300, 24, "PCIe 4.0 x16", 64, "Ethernet 100 Gb/s", 100},
    {"l40s", "", "NVIDIA L40S 48GB", "NVIDIA L40S GPU datasheet", 91.6, 183,
     362.05, 362.05, 733, 864, 48, "PCIe 4.0 x16", 64, "Ethernet 100 Gb/s", 100},
    {"rtx4090", "4090", "NVIDIA GeForce RTX 4090 24GB",
     "NVIDIA Ada GPU Architecture whitepaper", 82.6, 82.6, 165.2, 165.2, 330.3,
     1008, 24, "PCIe 4.0 x16", 64, "Ethernet 100 Gb/s", 100},
};

/// Built-in targets that are another one with fitted kernel models: the base's
/// figures, the calibration data/calibration/<name>.json.
struct CalibratedVariant {
  const char *name, *base, *description;
};
const CalibratedVariant kVariants[] = {
    {"v100-pytorch", "v100-32gb",
     "NVIDIA Tesla V100 SXM2 32GB, eager PyTorch kernels (calibrated)"},
};

/// The compiled-in data/calibration/<target>.json files.
struct BuiltinCalibration {
  const char *target;
  const char *json;
};
const BuiltinCalibration kCalibrations[] = {
#include "BuiltinCalibrations.inc"
    {nullptr, nullptr}};

/// Built-in targets whose calibration file does not parse, with the reason:
/// looking one of them up fails with it (the others stay usable, so that the
/// fitting tool can run to rewrite the file).
llvm::StringMap<std::string> &brokenCalibrations() {
  static llvm::StringMap<std::string> broken;
  return broken;
}

std::vector<Target> buildTable() {
  std::vector<Target> table;
  for (const Entry &e : kEntries) {
    Target t;
    t.name = e.name;
    t.description = e.description;
    t.source = e.source;
    t.gemmPeakFlops[0] = e.fp32 * T;
    t.gemmPeakFlops[1] = e.tf32 * T;
    t.gemmPeakFlops[2] = e.fp16 * T;
    t.gemmPeakFlops[3] = e.bf16 * T;
    t.gemmPeakFlops[4] = e.fp8 * T;
    t.vectorPeakFlops = e.fp32 * T;
    t.memoryBandwidthBytesPerSecond = e.bandwidthGBs * GBs;
    t.memoryBytes = e.memoryGiB * GiB;
    t.intraNode = {e.intraKind, e.intraGBsBidirectional / 2 * GBs, 5 * us};
    t.interNode = {e.interKind, e.interGbitPerSecond / 8 * GBs, 10 * us};
    table.push_back(std::move(t));
  }
  for (const CalibratedVariant &v : kVariants) {
    Target t = *llvm::find_if(table, [&](const Target &b) { return b.name == v.base; });
    t.name = v.name;
    t.description = v.description;
    t.source += ("; data/calibration/" + StringRef(v.name) + ".json").str();
    table.push_back(std::move(t));
  }
  for (Target &t : table)
    for (const BuiltinCalibration *c = kCalibrations; c->target; ++c) {
      if (t.name != c->target)
        continue;
      auto calibration = parseCalibrationJson(c->json);
      if (calibration)
        t.calibration = std::move(*calibration);
      else
        brokenCalibrations()[t.name] = ("built-in target '" + t.name + "': data/calibration/" +
                                        c->target + ".json: " +
                                        llvm::toString(calibration.takeError()));
    }
  return table;
}

std::string normalizeName(StringRef name) {
  std::string out;
  for (char c : name)
    if (c != '-' && c != '_' && c != ' ')
      out.push_back(llvm::toLower(c));
  return out;
}
} // namespace

llvm::ArrayRef<Target> pipe::builtinTargets() {
  static const std::vector<Target> table = buildTable();
  return table;
}

static llvm::Error brokenCalibrationError(const Target &t) {
  auto it = brokenCalibrations().find(t.name);
  if (it == brokenCalibrations().end())
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(), it->second);
}

static const Target *findBuiltin(StringRef name) {
  std::string key = normalizeName(name);
  auto targets = builtinTargets();
  for (size_t i = 0; i < targets.size(); ++i) {
    if (normalizeName(targets[i].name) == key)
      return &targets[i];
    if (i >= std::size(kEntries)) // calibrated variants have no aliases
      continue;
    llvm::SmallVector<StringRef> aliases;
    StringRef(kEntries[i].aliases).split(aliases, ',', -1, false);
    for (StringRef alias : aliases)
      if (normalizeName(alias) == key)
        return &targets[i];
  }
  return nullptr;
}

static std::string knownTargets() {
  std::string list;
  for (const Target &t : builtinTargets())
    list += (list.empty() ? "" : ", ") + t.name;
  return list;
}

llvm::Expected<Target> pipe::lookupTarget(StringRef nameOrFile) {
  if (const Target *t = findBuiltin(nameOrFile)) {
    if (llvm::Error error = brokenCalibrationError(*t))
      return std::move(error);
    return *t;
  }
  if (llvm::sys::fs::is_regular_file(nameOrFile)) {
    auto buffer = llvm::MemoryBuffer::getFile(nameOrFile);
    if (!buffer)
      return llvm::createStringError(buffer.getError(), "cannot read target file '%s'",
                                     nameOrFile.str().c_str());
    auto target = parseTargetJson((*buffer)->getBuffer());
    if (!target)
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "target file '" +
                                         nameOrFile + "': " +
                                         llvm::toString(target.takeError()));
    return target;
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "unknown target '" + nameOrFile +
                                     "' (known targets: " + knownTargets() +
                                     "; or a JSON target file)");
}

//===----------------------------------------------------------------------===//
// JSON format
//===----------------------------------------------------------------------===//

namespace {
/// Reads optional numeric fields, recording the first type error.
struct Reader {
  std::string error;
  void number(const llvm::json::Object *obj, StringRef key, double &out,
              double scale, StringRef where) {
    if (!obj || !error.empty())
      return;
    const llvm::json::Value *v = obj->get(key);
    if (!v)
      return;
    std::optional<double> d = v->getAsNumber();
    if (!d || *d < 0) {
      error = ("'" + where + key + "' must be a non-negative number").str();
      return;
    }
    out = *d * scale;
  }
  void string(const llvm::json::Object *obj, StringRef key, std::string &out) {
    if (!obj || !error.empty())
      return;
    if (const llvm::json::Value *v = obj->get(key)) {
      if (auto s = v->getAsString())
        out = s->str();
      else
        error = ("'" + key + "' must be a string").str();
    }
  }
  void link(const llvm::json::Object *obj, StringRef key, Link &link) {
    const llvm::json::Object *l = obj->getObject(key);
    if (!l) {
      if (obj->get(key) && error.empty())
        error = ("'" + key + "' must be an object").str();
      return;
    }
    string(l, "kind", link.kind);
    std::string where = (key + ".").str();
    number(l, "bandwidth_gbps", link.bandwidthBytesPerSecond, 1e9, where);
    number(l, "latency_us", link.latencySeconds, 1e-6, where);
  }
};
} // namespace

static llvm::Error calibrationError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "calibration: " + message);
}

/// One pass of a family (Target.h, KernelModel): {"overhead_us", "log_efficiency"
/// (8 numbers), "shape_min", "shape_max" ([r, a, b, stride])} for the compute
/// families, {"overhead_us", "memory_efficiency", "flop_efficiency",
/// "memory_slope"} for the others, "samples" in both.
static llvm::Error parseKernelModel(const llvm::json::Object &obj, KernelFamily family,
                                    StringRef where, KernelModel &model) {
  static constexpr StringRef computeKeys[] = {"overhead_us", "log_efficiency", "shape_min",
                                              "shape_max", "samples"};
  static constexpr StringRef memoryKeys[] = {"overhead_us", "memory_efficiency",
                                             "flop_efficiency", "memory_slope", "samples"};
  bool compute = isComputeFamily(family);
  for (const auto &kv : obj)
    if (!llvm::is_contained(compute ? llvm::ArrayRef<StringRef>(computeKeys)
                                    : llvm::ArrayRef<StringRef>(memoryKeys),
                            StringRef(kv.first)))
      return calibrationError("unknown field '" + where + "." + StringRef(kv.first) + "'");
  Reader r;
  double overheadUs = 0, samples = 0;
  r.number(&obj, "overhead_us", overheadUs, 1, (where + ".").str());
  r.number(&obj, "samples", samples, 1, (where + ".").str());
  if (!r.error.empty())
    return calibrationError(r.error);
  model.overheadSeconds = overheadUs * 1e-6;
  model.samples = static_cast<unsigned>(samples);
  if (compute) {
    const llvm::json::Array *coefficients = obj.getArray("log_efficiency");
    if (!coefficients || coefficients->size() != 8)
      return calibrationError("'" + where + ".log_efficiency' must be an array of 8 numbers");
    for (unsigned i = 0; i < 8; ++i) {
      std::optional<double> c = (*coefficients)[i].getAsNumber();
      if (!c || !std::isfinite(*c))
        return calibrationError("'" + where + ".log_efficiency' must be an array of 8 numbers");
      model.logEfficiency[i] = *c;
    }
    for (auto [key, out] : {std::pair<StringRef, std::array<double, 4> *>{"shape_min",
                                                                          &model.shapeMin},
                            {"shape_max", &model.shapeMax}}) {
      const llvm::json::Value *value = obj.get(key);
      if (!value)
        continue;
      const llvm::json::Array *range = value->getAsArray();
      if (!range || range->size() != 4)
        return calibrationError("'" + where + "." + key + "' must be [r, a, b, stride]");
      for (unsigned i = 0; i < 4; ++i) {
        std::optional<double> v = (*range)[i].getAsNumber();
        if (!v || !(*v >= 1))
          return calibrationError("'" + where + "." + key +
                                  "' must be [r, a, b, stride], each >= 1");
        (*out)[i] = *v;
      }
    }
    for (unsigned i = 0; i < 4; ++i)
      if (model.shapeMin[i] > model.shapeMax[i])
        return calibrationError("'" + where + ".shape_min' exceeds 'shape_max'");
  } else {
    std::optional<double> e = obj.getNumber("memory_efficiency");
    if (!e || !(*e > 0) || *e > 10)
      return calibrationError("'" + where + ".memory_efficiency' must be a number in (0, 10]");
    model.memoryEfficiency = *e;
    if (const llvm::json::Value *f = obj.get("flop_efficiency")) {
      std::optional<double> v = f->getAsNumber();
      if (!v || *v < 0 || *v > 10)
        return calibrationError("'" + where + ".flop_efficiency' must be a number in [0, 10]");
      model.flopEfficiency = *v;
    }
    if (const llvm::json::Value *f = obj.get("memory_slope")) {
      std::optional<double> v = f->getAsNumber();
      if (!v || *v < -2 || *v > 2)
        return calibrationError("'" + where + ".memory_slope' must be a number in [-2, 2]");
      model.memorySlope = *v;
    }
  }
  model.fitted = true;
  return llvm::Error::success();
}

static llvm::Expected<Calibration> parseCalibration(const llvm::json::Object &root) {
  static constexpr StringRef knownKeys[] = {"source", "dtype", "fuse_elementwise", "families"};
  for (const auto &kv : root)
    if (!llvm::is_contained(knownKeys, StringRef(kv.first)))
      return calibrationError("unknown field '" + StringRef(kv.first) + "'");
  Calibration calibration;
  if (auto source = root.getString("source"))
    calibration.source = source->str();
  if (const llvm::json::Value *dtype = root.get("dtype")) {
    std::optional<ComputeDtype> parsed;
    if (auto text = dtype->getAsString())
      parsed = parseComputeDtype(*text);
    if (!parsed)
      return calibrationError("'dtype' must be one of fp32, tf32, fp16, bf16, fp8");
    calibration.dtype = *parsed;
  }
  if (const llvm::json::Value *fuse = root.get("fuse_elementwise")) {
    std::optional<bool> b = fuse->getAsBoolean();
    if (!b)
      return calibrationError("'fuse_elementwise' must be true or false");
    calibration.fusesElementwise = *b;
  }
  const llvm::json::Object *families = root.getObject("families");
  if (!families)
    return calibrationError("'families' (an object keyed by kernel family) is required");
  for (const auto &kv : *families) {
    std::optional<KernelFamily> family = parseKernelFamily(kv.first);
    if (!family)
      return calibrationError("unknown kernel family '" + StringRef(kv.first) +
                              "' (known: gemm, conv_1x1, conv_3x3s1, conv_other, "
                              "elementwise, normalization, reduction, pooling, data_movement)");
    const llvm::json::Object *directions = kv.second.getAsObject();
    if (!directions)
      return calibrationError("'" + StringRef(kv.first) + "' must be an object keyed by pass");
    for (const auto &direction : *directions) {
      StringRef key = direction.first;
      const llvm::json::Object *obj = direction.second.getAsObject();
      const StringRef *pass = llvm::find(kPassNames, key);
      bool split = pass - kPassNames >= 2;
      if (pass == std::end(kPassNames) || !obj || (split && !isComputeFamily(*family)))
        return calibrationError(
            "'" + StringRef(kv.first) + "." + key + "': expected an object named forward, " +
            (isComputeFamily(*family) ? "backward, backward_data or backward_weight"
                                      : "or backward"));
      KernelModel &model = calibration.models[static_cast<unsigned>(*family)]
                                             [static_cast<unsigned>(pass - kPassNames)];
      if (llvm::Error error =
              parseKernelModel(*obj, *family, (StringRef(kv.first) + "." + key).str(), model))
        return std::move(error);
    }
  }
  return calibration;
}

llvm::Expected<Calibration> pipe::parseCalibrationJson(StringRef text) {
  auto parsed = llvm::json::parse(text);
  if (!parsed)
    return parsed.takeError();
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return calibrationError("must be a JSON object");
  return parseCalibration(*root);
}

llvm::Expected<Target> pipe::parseTargetJson(StringRef text) {
  auto parsed = llvm::json::parse(text);
  if (!parsed)
    return parsed.takeError();
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "a target file must be a JSON object");
  Target target;
  if (auto base = root->getString("base")) {
    const Target *builtin = findBuiltin(*base);
    if (!builtin)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "unknown base target '" + *base +
                                         "' (known targets: " + knownTargets() + ")");
    if (llvm::Error error = brokenCalibrationError(*builtin))
      return std::move(error);
    target = *builtin;
  }
  static constexpr StringRef knownKeys[] = {
      "name", "base", "description", "source", "peak_tflops", "memory_bandwidth_gbps",
      "memory_gib", "gpus_per_node", "intra_node", "inter_node", "launch_overhead_us",
      "efficiency", "calibration"};
  for (const auto &kv : *root)
    if (!llvm::is_contained(knownKeys, StringRef(kv.first)))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "unknown field '" + StringRef(kv.first) + "'");
  Reader r;
  r.string(root, "name", target.name);
  r.string(root, "description", target.description);
  r.string(root, "source", target.source);
  if (const llvm::json::Object *peaks = root->getObject("peak_tflops")) {
    for (unsigned i = 0; i < 5; ++i)
      r.number(peaks, kDtypeNames[i], target.gemmPeakFlops[i], 1e12, "peak_tflops.");
    r.number(peaks, "vector_fp32", target.vectorPeakFlops, 1e12, "peak_tflops.");
  }
  r.number(root, "memory_bandwidth_gbps", target.memoryBandwidthBytesPerSecond, 1e9, "");
  r.number(root, "memory_gib", target.memoryBytes, GiB, "");
  double gpus = target.gpusPerNode;
  r.number(root, "gpus_per_node", gpus, 1, "");
  target.gpusPerNode = static_cast<int>(gpus);
  r.number(root, "launch_overhead_us", target.launchOverheadSeconds, 1e-6, "");
  r.link(root, "intra_node", target.intraNode);
  r.link(root, "inter_node", target.interNode);
  if (const llvm::json::Object *eff = root->getObject("efficiency")) {
    for (const auto &kv : *eff) {
      auto kind = parseKernelClass(kv.first);
      const llvm::json::Object *pair = kv.second.getAsObject();
      if (!kind || !pair)
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "efficiency: unknown kernel class '" +
                                           StringRef(kv.first) + "'");
      Efficiency &e = target.efficiency[static_cast<unsigned>(*kind)];
      std::string where = ("efficiency." + StringRef(kv.first) + ".").str();
      r.number(pair, "compute", e.compute, 1, where);
      r.number(pair, "memory", e.memory, 1, where);
    }
  }
  if (const llvm::json::Value *calibration = root->get("calibration")) {
    if (calibration->kind() == llvm::json::Value::Null) {
      target.calibration.reset(); // a base's calibration is dropped with null
    } else {
      const llvm::json::Object *obj = calibration->getAsObject();
      if (!obj)
        return calibrationError("must be a JSON object or null");
      auto parsed = parseCalibration(*obj);
      if (!parsed)
        return parsed.takeError();
      target.calibration = std::move(*parsed);
    }
  }
  if (r.error.empty()) {
    if (target.name.empty())
      r.error = "'name' is required";
    else if (target.memoryBandwidthBytesPerSecond <= 0)
      r.error = "'memory_bandwidth_gbps' must be positive";
    else if (target.vectorPeakFlops <= 0 && target.gemmPeakFlops[0] <= 0)
      r.error = "'peak_tflops' needs at least fp32";
    else if (target.gpusPerNode < 1)
      r.error = "'gpus_per_node' must be at least 1";
  }
  if (target.vectorPeakFlops <= 0)
    target.vectorPeakFlops = target.gemmPeakFlops[0];
  for (const Efficiency &e : target.efficiency)
    if (r.error.empty() && (e.compute <= 0 || e.compute > 1 || e.memory <= 0 || e.memory > 1))
      r.error = "efficiency factors must lie in (0, 1]";
  if (!r.error.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), r.error);
  return target;
}

void pipe::writeTargetJson(const Target &t, llvm::raw_ostream &os) {
  llvm::json::Object peaks;
  for (unsigned i = 0; i < 5; ++i)
    peaks[kDtypeNames[i]] = t.gemmPeakFlops[i] / 1e12;
  peaks["vector_fp32"] = t.vectorPeakFlops / 1e12;
  auto link = [](const Link &l) {
    return llvm::json::Object{{"kind", l.kind},
                              {"bandwidth_gbps", l.bandwidthBytesPerSecond / 1e9},
                              {"latency_us", l.latencySeconds / 1e-6}};
  };
  llvm::json::Object eff;
  for (unsigned i = 0; i < kNumKernelClasses; ++i)
    eff[kClassNames[i]] = llvm::json::Object{{"compute", t.efficiency[i].compute},
                                             {"memory", t.efficiency[i].memory}};
  llvm::json::Object root{{"name", t.name},
                          {"description", t.description},
                          {"source", t.source},
                          {"peak_tflops", std::move(peaks)},
                          {"memory_bandwidth_gbps", t.memoryBandwidthBytesPerSecond / 1e9},
                          {"memory_gib", t.memoryBytes / GiB},
                          {"gpus_per_node", t.gpusPerNode},
                          {"intra_node", link(t.intraNode)},
                          {"inter_node", link(t.interNode)},
                          {"launch_overhead_us", t.launchOverheadSeconds / 1e-6},
                          {"efficiency", std::move(eff)}};
  if (t.calibration) {
    llvm::json::Object families;
    for (unsigned f = 1; f < kNumKernelFamilies; ++f) {
      llvm::json::Object directions;
      for (unsigned d = 0; d < kNumKernelPasses; ++d) {
        const KernelModel &m = t.calibration->models[f][d];
        if (!m.fitted)
          continue;
        llvm::json::Object model{{"overhead_us", m.overheadSeconds / 1e-6},
                                 {"samples", static_cast<int64_t>(m.samples)}};
        if (isComputeFamily(static_cast<KernelFamily>(f))) {
          model["log_efficiency"] = llvm::json::Array(m.logEfficiency);
          model["shape_min"] = llvm::json::Array(m.shapeMin);
          model["shape_max"] = llvm::json::Array(m.shapeMax);
        } else {
          model["memory_efficiency"] = m.memoryEfficiency;
          model["flop_efficiency"] = m.flopEfficiency;
          model["memory_slope"] = m.memorySlope;
        }
        directions[kPassNames[d]] = std::move(model);
      }
      if (!directions.empty())
        families[kFamilyNames[f]] = std::move(directions);
    }
    root["calibration"] =
        llvm::json::Object{{"source", t.calibration->source},
                           {"dtype", toString(t.calibration->dtype)},
                           {"fuse_elementwise", t.calibration->fusesElementwise},
                           {"families", std::move(families)}};
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
}
