//===- Rank.cpp - making, failing and tearing down a rank ------------------===//
//
// A rank's life outside the step: creation (standalone or for a run), the one
// error path every call takes (fail), the run-wide settings kernels read, its
// report, and teardown.
//
//===----------------------------------------------------------------------===//
#include "Rank.h"

#include "HostAccess.h"
#include "Internal.h"
#include "Tensor.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <thread>

namespace piperun {

double nowMs(const pipe_rank *r) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r->epoch)
      .count();
}

const char *layoutName(ReplicaLayout layout) {
  return layout == ReplicaLayout::StageMajor ? "stage-major" : "pipeline-major";
}

RankPlace rankPlace(ReplicaLayout layout, int replicas, int pipelineRanks, int k) {
  return layout == ReplicaLayout::StageMajor ? RankPlace{k % replicas, k / replicas}
                                             : RankPlace{k / pipelineRanks, k % pipelineRanks};
}

int transportRankOf(ReplicaLayout layout, int replicas, int pipelineRanks, RankPlace place) {
  return layout == ReplicaLayout::StageMajor ? place.rank * replicas + place.replica
                                             : place.replica * pipelineRanks + place.rank;
}

int32_t transportRank(const pipe_rank *r, int32_t rank, int32_t replica) {
  return transportRankOf(r->settings.layout, r->settings.replicas, r->pipelineRanks,
                         {replica < 0 ? r->replica : replica, rank});
}

int32_t stepMicrobatch(pipe_rank *r, int32_t microbatch) {
  return r->replica * r->settings.microbatches + microbatch;
}

std::string rankName(const pipe_rank *r) {
  std::string name = "rank " + std::to_string(transportRank(r, r->id));
  if (r->settings.replicas > 1)
    name += " (replica " + std::to_string(r->replica) + "'s rank " + std::to_string(r->id) + ")";
  return name;
}

void placeInReplica(pipe_rank *r, int rank, int ranks) {
  const int replicas = r->settings.replicas;
  if (replicas < 1 || ranks % replicas != 0)
    throw Failure("runtime: " + std::to_string(ranks) + " ranks cannot hold " +
                  std::to_string(replicas) + " replicas of one pipeline");
  r->pipelineRanks = ranks / replicas;
  const RankPlace place = rankPlace(r->settings.layout, replicas, r->pipelineRanks, rank);
  r->replica = place.replica;
  r->id = place.rank;
}

std::string nodeName(const pipe_rank *r, int32_t node) {
  auto it = r->nodeNames.find(node);
  return it != r->nodeNames.end() ? it->second : "#" + std::to_string(node);
}

namespace {

/// Adds `ms` to the step's entry of a per-step series.
void addToStep(std::vector<double> &series, int64_t step, double ms) {
  if (series.size() <= static_cast<size_t>(step))
    series.resize(static_cast<size_t>(step) + 1, 0.0);
  series[static_cast<size_t>(step)] += ms;
}

} // namespace

void closeNode(pipe_rank *r) {
  if (r->currentNode >= 0) {
    NodeTime &time = r->nodeTimes[r->currentNode];
    const double ms = nowMs(r) - r->nodeStartMs - r->nodeWaitMs;
    time.ms += ms;
    // Node intervals never span an action boundary: action begin and end close them.
    if (r->inAction && r->action.kind == PIPE_ACTION_FORWARD)
      addToStep(time.forwardMs, r->action.step, ms);
    else if (r->inAction && (r->action.kind == PIPE_ACTION_BACKWARD ||
                             r->action.kind == PIPE_ACTION_BACKWARD_INPUT ||
                             r->action.kind == PIPE_ACTION_BACKWARD_WEIGHT))
      addToStep(time.backwardMs, r->action.step, ms);
  }
  r->nodeWaitMs = 0; // a wait outside any node belongs to none
  r->currentNode = -1;
}

std::string actionName(const ActionRecord &a) {
  switch (a.kind) {
  case PIPE_ACTION_FORWARD:
    return "F" + std::to_string(a.microbatch) + "@s" + std::to_string(a.stage);
  case PIPE_ACTION_BACKWARD:
    return "B" + std::to_string(a.microbatch) + "@s" + std::to_string(a.stage);
  case PIPE_ACTION_BACKWARD_INPUT:
    return "Bi" + std::to_string(a.microbatch) + "@s" + std::to_string(a.stage);
  case PIPE_ACTION_BACKWARD_WEIGHT:
    return "W" + std::to_string(a.microbatch) + "@s" + std::to_string(a.stage);
  case PIPE_ACTION_REDUCE:
    return "reduce";
  case PIPE_ACTION_OPTIMIZER:
    return "optimizer";
  default:
    return "action " + std::to_string(a.kind);
  }
}

void fail(pipe_rank *r, const char *format, ...) {
  char text[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  if (!r)
    throw Failure(std::string("runtime: ") + text);
  std::string message = rankName(r);
  if (r->currentNode >= 0)
    message += ", node " + nodeName(r, r->currentNode);
  if (r->inAction)
    message += " (" + actionName(r->action) + ")";
  throw Failure(message + ": " + text);
}

uint64_t runSeed(pipe_rank *r) { return r->settings.seed; }
int64_t currentStep(pipe_rank *r) { return r->step; }
int kernelThreads(pipe_rank *r) {
  return r->settings.kernelThreads > 0 ? r->settings.kernelThreads : 1;
}

void reapSends(pipe_rank *r) {
  auto &sends = r->sends;
  size_t kept = 0;
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i].handle->done()) {
      r->pendingSendBytes -= sends[i].bytes();
      release(r->memory, sends[i].buffer);
      if (sends[i].payload)
        release(r->memory, sends[i].payload);
    } else {
      sends[kept++] = std::move(sends[i]);
    }
  }
  sends.resize(kept);
}

void drainSends(pipe_rank *r) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    reapSends(r);
    if (r->sends.empty())
      return;
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > r->settings.timeoutSeconds)
      fail(r, "%s was not received within %g s",
           (r->sends.front().label.empty() ? describeOutgoing(r->sends.front().key)
                                           : r->sends.front().label)
               .c_str(),
           r->settings.timeoutSeconds);
    r->transport->checkStopped();
    r->transport->progress();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

pipe_rank *createRank(const RunSettings &settings, int rank) {
  std::unique_ptr<Device> device;
  try {
    device = makeDevice(settings.backend, rank, settings.emulatedDeviceBytes);
  } catch (const DeviceError &error) {
    throw Failure("rank " + std::to_string(rank) + ": " + error.what());
  }
  auto *r = new pipe_rank;
  r->id = rank;
  r->pipelineRanks = std::max(1, settings.ranks);
  r->settings = settings;
  r->device = std::move(device);
  r->memory.deviceCache.setDevice(r->device.get());
  return r;
}

RankReport reportOf(pipe_rank *r) {
  RankReport report;
  report.rank = r->id;
  report.replica = r->replica;
  for (int c = 0; c < PIPE_MEM_CATEGORIES; ++c)
    report.peak.push_back(r->memory.peak(c));
  report.peakTotal = r->memory.peakTotal();
  report.nativeKernelCalls = r->nativeKernelCalls;
  report.libraryConvCalls = r->libraryConvCalls;
  report.stagedKernelCalls = r->stagedKernelCalls;
  report.waitMs = r->waitMs;
  report.steps = r->steps;
  report.actions = r->actions;
  for (const auto &[node, time] : r->nodeTimes) {
    NodeTime entry = time;
    entry.node = node;
    entry.name = nodeName(r, node);
    entry.declared = r->nodeNames.count(node) > 0;
    report.nodes.push_back(entry);
  }
  return report;
}

} // namespace piperun

using namespace piperun;

extern "C" {

pipe_rank *pipe_rank_create_standalone(void) {
  RunSettings settings;
  settings.kernelThreads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return createRank(settings, 0);
}

pipe_rank *pipe_rank_create_on(const char *backend, char *why, size_t why_size) {
  auto refuse = [&](const std::string &reason) -> pipe_rank * {
    if (why && why_size > 0)
      std::snprintf(why, why_size, "%s", reason.c_str());
    return nullptr;
  };
  RunSettings settings;
  settings.kernelThreads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (!backend || !parseBackend(backend, settings.backend))
    return refuse(std::string("unknown backend '") + (backend ? backend : "(null)") +
                  "' (cpu, emulated or cuda)");
  try {
    return createRank(settings, 0);
  } catch (const Failure &failure) {
    return refuse(failure.what());
  }
}

void pipe_copy_from_host(pipe_rank *r, pipe_tensor *t, const void *host) {
  boxOf(r, t, "pipe_copy_from_host");
  uploadTensor(r, t, host);
}

void pipe_copy_to_host(pipe_rank *r, void *host, const pipe_tensor *t) {
  boxOf(r, t, "pipe_copy_to_host");
  downloadTensor(r, host, t);
}

void pipe_rank_destroy(pipe_rank *r) {
  if (!r)
    return;
  for (OutstandingSend &send : r->sends) {
    release(r->memory, send.buffer);
    if (send.payload)
      release(r->memory, send.payload);
  }
  // Parameters, saved values, and whatever a failed step left behind.
  std::vector<const pipe_tensor *> left(r->tensors.begin(), r->tensors.end());
  for (const pipe_tensor *t : left)
    destroyTensor(r, const_cast<pipe_tensor *>(t));
  for (auto &[key, storage] : r->deviceConstants)
    release(r->memory, storage);
  r->deviceConstants.clear();
  delete r;
}

int64_t pipe_memory_live(pipe_rank *r, int32_t category) {
  if (category < 0 || category >= PIPE_MEM_CATEGORIES)
    fail(r, "pipe_memory_live: unknown category %d", category);
  return r->memory.live(category);
}

int64_t pipe_memory_peak(pipe_rank *r, int32_t category) {
  if (category < 0 || category >= PIPE_MEM_CATEGORIES)
    fail(r, "pipe_memory_peak: unknown category %d", category);
  return r->memory.peak(category);
}

} // extern "C"
