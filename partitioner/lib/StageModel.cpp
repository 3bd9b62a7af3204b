// Stage costs (docs/partitioner.md, "The model": "Memory of a GPU" and "Platform").
#include "partitioner/StageModel.h"

#include <algorithm>

namespace partitioner {

int positionalInFlight(ScheduleKind kind, int stagesFromEnd, int microbatches) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return microbatches;
  default:
    return std::min(stagesFromEnd, microbatches);
  }
}

StageModel::StageModel(const Problem &problem, const CutLattice &lattice)
    : problem_(problem), lattice_(lattice) {
  const Platform &platform = problem.platform;
  const LinkSpec &intra = platform.intraNode, &inter = platform.interNode;
  oneSpeed_ = std::all_of(platform.speed.begin(), platform.speed.end(),
                          [&](double value) { return value == platform.speed.front(); });
  oneLinkClass_ = intra.bandwidthBytesPerSecond == inter.bandwidthBytesPerSecond &&
                  intra.latencyMs == inter.latencyMs;
  if (!oneLinkClass_) {
    // Every link a stage's transfers may be priced on, from GPU -1 to GPU gpus.
    oneLinkClass_ = true;
    for (int gpu = -1; gpu < platform.gpus; ++gpu)
      oneLinkClass_ &= &platform.linkBetween(gpu, gpu + 1) == &platform.linkBetween(-1, 0);
  }
  for (int gpu = 0; gpu + 1 < platform.gpus; ++gpu)
    pipelineLinksAlike_ &= &platform.linkBetween(gpu, gpu + 1) == &platform.linkBetween(0, 1);
  pipelineLinksAlike_ |= oneLinkClass_;
  if (pipelineLinksAlike_) {
    const LinkSpec &link =
        oneLinkClass_ ? platform.linkBetween(-1, 0) : platform.linkBetween(0, 1);
    cutTransferMs_.reserve(lattice.numCuts());
    for (double bytes : lattice.cutBytes)
      cutTransferMs_.push_back(link.transferMs(bytes));
  }
}

StageTerms StageModel::timeTerms(int from, int to) const {
  const CutLattice &l = lattice_;
  const size_t a = static_cast<size_t>(from), b = static_cast<size_t>(to);
  StageTerms stage;
  stage.forwardMs = l.forward[b] - l.forward[a];
  stage.backwardMs = l.backward[b] - l.backward[a];
  stage.workMs = l.work[b] - l.work[a];
  stage.inBytes = l.cutBytes[a];
  stage.outBytes = l.cutBytes[b];
  stage.first = from == l.emptyCut();
  stage.last = to == l.fullCut();
  stage.fromCut = from;
  stage.toCut = to;
  return stage;
}

StageTerms StageModel::terms(int from, int to) const {
  const CutLattice &l = lattice_;
  const size_t a = static_cast<size_t>(from), b = static_cast<size_t>(to);
  StageTerms stage = timeTerms(from, to);
  stage.parameterBytes = l.params[b] - l.params[a];
  stage.readParameterBytes = l.readParametersBetween(from, to);
  stage.savedBytes = l.savedBetween(from, to);
  stage.inputBytes = l.inputs[b] - l.inputs[a];
  stage.workspaceBytes = l.workspaceBetween(from, to);
  return stage;
}

double StageModel::staticBytes(const StageTerms &stage, int versions) const {
  const TrainingSettings &training = problem_.training;
  const double params = stage.parameterBytes, read = stage.readParameterBytes;
  double bytes = training.stateMultiplier * params + readerStateMultiplier(training) * read +
                 (versions - 1) * (params + read);
  if (training.communicationBuffers)
    bytes += kBuffersPerCutTensor * (stage.inBytes + stage.outBytes);
  return bytes;
}

double StageModel::memoryBytes(const StageTerms &stage, int inFlight, bool recompute) const {
  const double kept = recompute ? stage.inBytes + stage.inputBytes : stage.savedBytes;
  return staticBytes(stage, weightVersions(problem_.training, inFlight)) + inFlight * kept +
         (recompute ? stage.savedBytes : 0.0) + stage.workspaceBytes;
}

bool StageModel::memoryNeverBinds(int inFlight, double maxWork) const {
  const double limit = memoryLimit();
  if (limit == kInfinity)
    return true;
  if (problem_.training.recompute == RecomputePolicy::All)
    return false;
  const CutLattice &l = lattice_;
  double sharedRead = 0, largestCut = 0;
  for (double bytes : l.sharedParameters.bytes)
    sharedRead += bytes;
  for (double bytes : l.cutBytes)
    largestCut = std::max(largestCut, bytes);
  // The most a stage between `from` and `to` can need, or any stage inside it: its
  // parameters, saved values and workspace are at most those of its range (each
  // grows with the range), the shared parameters it reads are among all of them,
  // and each of its two cuts is a cut.
  auto fitsWithin = [&](int from, int to) {
    StageTerms widest;
    widest.parameterBytes =
        l.params[static_cast<size_t>(to)] - l.params[static_cast<size_t>(from)];
    widest.readParameterBytes = sharedRead;
    widest.savedBytes = l.savedBetween(from, to);
    widest.workspaceBytes = l.workspaceBetween(from, to);
    widest.inBytes = widest.outBytes = largestCut;
    return memoryBytes(widest, inFlight, false) <= limit * (1 + 1e-12);
  };
  if (!l.isChain || maxWork == kInfinity)
    return fitsWithin(l.emptyCut(), l.fullCut());
  // Each start's longest stage within maxWork (the ends only move forward).
  int to = l.emptyCut();
  for (int from = l.emptyCut(); from < l.fullCut(); ++from) {
    to = std::max(to, from);
    while (to < l.fullCut() &&
           l.work[static_cast<size_t>(to) + 1] - l.work[static_cast<size_t>(from)] <= maxWork)
      ++to;
    if (to > from && !fitsWithin(from, to))
      return false;
  }
  return true;
}

std::vector<bool> recomputeVariants(RecomputePolicy policy) {
  switch (policy) {
  case RecomputePolicy::None:
    break;
  case RecomputePolicy::Auto:
    return {false, true};
  case RecomputePolicy::All:
    return {true};
  }
  return {false};
}

StageChoice StageModel::choose(const StageTerms &stage, int inFlight, int gpu,
                               bool checkMemory) const {
  // recomputeVariants without building the list: this runs for every stage a DP
  // prices, at every position.
  const RecomputePolicy policy = problem_.training.recompute;
  StageChoice choice;
  for (bool recompute : {false, true}) {
    if ((policy == RecomputePolicy::None && recompute) ||
        (policy == RecomputePolicy::All && !recompute))
      continue;
    if (checkMemory && !fits(stage, inFlight, recompute))
      continue;
    choice.feasible = true;
    choice.recompute = recompute;
    choice.periodMs = periodMs(stage, gpu, recompute);
    break;
  }
  return choice;
}

PricedStage::PricedStage(const StageModel &model, int from, int to)
    : model_(model), from_(from), to_(to), terms_(model.timeTerms(from, to)),
      oneSpeed_(model.oneSpeed()), oneLinkClass_(model.oneLinkClass()), largestFit_{-2, -2} {
  for (auto &variant : period_)
    std::fill(std::begin(variant), std::end(variant), -1.0);
}

double PricedStage::periodMs(bool recompute, int gpu) {
  if (!oneSpeed_)
    return model_.periodMs(terms_, gpu, recompute);
  // At one speed the period depends on the GPU only through the links it uses.
  const Platform &platform = model_.problem().platform;
  const int classes =
      oneLinkClass_ ? 0
               : (&platform.linkBetween(gpu - 1, gpu) == &platform.interNode ? 2 : 0) +
                     (&platform.linkBetween(gpu, gpu + 1) == &platform.interNode ? 1 : 0);
  double &period = period_[recompute ? 1 : 0][classes];
  if (period < 0)
    period = model_.periodMs(terms_, gpu, recompute);
  return period;
}

const StageTerms &PricedStage::terms() {
  if (!memoryTerms_) {
    terms_ = model_.terms(from_, to_);
    memoryTerms_ = true;
  }
  return terms_;
}

bool PricedStage::fits(bool recompute, int inFlight) {
  terms();
  const int most = model_.problem().training.microbatches;
  if (inFlight < 0 || inFlight > most)
    return model_.fits(terms_, inFlight, recompute);
  int &largest = largestFit_[recompute ? 1 : 0];
  if (largest == -2) {
    // The largest n in 0..m that fits: memory grows with n (copies, weight versions).
    int low = -1, high = most + 1; // fits(low) (or low = -1), !fits(high)
    while (high - low > 1) {
      const int mid = low + (high - low) / 2;
      if (model_.fits(terms_, mid, recompute))
        low = mid;
      else
        high = mid;
    }
    largest = low;
  }
  return inFlight <= largest;
}

StageChoice PricedStage::choose(int inFlight, int gpu, bool checkMemory) {
  // StageModel::choose's order of variants.
  const RecomputePolicy policy = model_.problem().training.recompute;
  StageChoice choice;
  for (bool recompute : {false, true}) {
    if ((policy == RecomputePolicy::None && recompute) ||
        (policy == RecomputePolicy::All && !recompute))
      continue;
    if (checkMemory && !fits(recompute, inFlight))
      continue;
    choice.feasible = true;
    choice.recompute = recompute;
    choice.periodMs = periodMs(recompute, gpu);
    break;
  }
  return choice;
}

} // namespace partitioner
