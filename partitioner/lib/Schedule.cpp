// Schedule generators (per-GPU action orders). Timing is the simulator's job.
#include "partitioner/Schedule.h"
#include "partitioner/Error.h"

#include <algorithm>

namespace partitioner {

std::string toString(const Action &action) {
  const char *kind = "F";
  switch (action.kind) {
  case ActionKind::Forward:
    kind = "F";
    break;
  case ActionKind::Backward:
    kind = "B";
    break;
  case ActionKind::BackwardInput:
    kind = "Bi";
    break;
  case ActionKind::BackwardWeight:
    kind = "W";
    break;
  }
  return std::string(kind) + std::to_string(action.microbatch) + "@s" +
         std::to_string(action.stage);
}

namespace {

/// Stages of each GPU, in stage order.
std::vector<std::vector<int>> stagesPerGpu(const Problem &problem, const Allocation &allocation) {
  std::vector<std::vector<int>> result(static_cast<size_t>(problem.platform.gpus));
  for (int s = 0; s < allocation.numStages(); ++s)
    result[static_cast<size_t>(allocation.gpuOfStage[static_cast<size_t>(s)])].push_back(s);
  return result;
}

void requireOneStagePerGpu(ScheduleKind kind, const Allocation &allocation) {
  if (!allocation.oneStagePerGpu())
    throw Error("schedule " + toString(kind) +
                " needs one stage per GPU; this allocation puts " +
                std::to_string(allocation.numStages()) + " stages on " +
                std::to_string(allocation.numGpusUsed()) + " GPUs");
}

/// Stage position in pipeline order (stages are numbered in order already).
void oneFOneB(Schedule &schedule, int stage, int stages, int warmup, int microbatches,
              std::vector<Action> &out, bool split) {
  warmup = std::max(0, std::min(warmup, microbatches));
  (void)stages;
  auto backward = [&](int mb) {
    if (split) {
      out.push_back({ActionKind::BackwardInput, stage, mb});
      out.push_back({ActionKind::BackwardWeight, stage, mb});
    } else {
      out.push_back({ActionKind::Backward, stage, mb});
    }
  };
  for (int i = 0; i < warmup; ++i)
    out.push_back({ActionKind::Forward, stage, i});
  for (int i = 0; i + warmup < microbatches; ++i) {
    out.push_back({ActionKind::Forward, stage, i + warmup});
    backward(i);
  }
  for (int i = std::max(0, microbatches - warmup); i < microbatches; ++i)
    backward(i);
  schedule.splitBackward = split;
}

} // namespace

Schedule makeSchedule(ScheduleKind kind, const Problem &problem, const Allocation &allocation,
                      int microbatches) {
  Schedule schedule;
  schedule.kind = kind;
  schedule.microbatches = microbatches;
  const int gpus = problem.platform.gpus;
  schedule.actions.assign(static_cast<size_t>(gpus), {});
  const int stages = allocation.numStages();
  auto perGpu = stagesPerGpu(problem, allocation);

  switch (kind) {
  case ScheduleKind::GPipe: {
    // All forwards (micro-batch major), then all backwards in reverse stage order.
    for (int g = 0; g < gpus; ++g) {
      auto &out = schedule.actions[static_cast<size_t>(g)];
      const auto &mine = perGpu[static_cast<size_t>(g)];
      for (int s : mine)
        for (int i = 0; i < microbatches; ++i)
          out.push_back({ActionKind::Forward, s, i});
      for (auto it = mine.rbegin(); it != mine.rend(); ++it)
        for (int i = 0; i < microbatches; ++i)
          out.push_back({ActionKind::Backward, *it, i});
    }
    return schedule;
  }
  case ScheduleKind::OneFOneB:
  case ScheduleKind::OneFOneBStash:
  case ScheduleKind::ZeroBubble:
  case ScheduleKind::Periodic: {
    requireOneStagePerGpu(kind, allocation);
    for (int s = 0; s < stages; ++s) {
      // 1F1B: stage s keeps S - s micro-batches (warm-up S - s - 1). The periodic
      // schedule keeps only what its downstream latency needs (LatticeDp.h).
      int inFlight = stages - s;
      if (kind == ScheduleKind::Periodic && !allocation.inFlightLimit.empty())
        inFlight = std::max(1, allocation.inFlightLimit[static_cast<size_t>(s)]);
      const int g = allocation.gpuOfStage[static_cast<size_t>(s)];
      oneFOneB(schedule, s, stages, inFlight - 1, microbatches,
               schedule.actions[static_cast<size_t>(g)], kind == ScheduleKind::ZeroBubble);
    }
    return schedule;
  }
  case ScheduleKind::Interleaved: {
    // Megatron's interleaved 1F1B: GPU g holds chunks g, g+G, ...; forwards visit
    // chunks in groups of G micro-batches.
    int used = allocation.numGpusUsed();
    if (stages % used != 0)
      throw Error("interleaved schedule: " + std::to_string(stages) +
                  " stages do not divide evenly over " + std::to_string(used) + " GPUs");
    for (int s = 0; s < stages; ++s)
      if (allocation.gpuOfStage[static_cast<size_t>(s)] != s % used)
        throw Error("interleaved schedule: stage " + std::to_string(s) + " must be on GPU " +
                    std::to_string(s % used));
    if (microbatches % used != 0)
      throw Error("interleaved schedule: micro-batches (" + std::to_string(microbatches) +
                  ") must be a multiple of the pipeline depth (" + std::to_string(used) + ")");
    const int chunks = stages / used;
    const int total = microbatches * chunks;
    for (int g = 0; g < used; ++g) {
      auto &out = schedule.actions[static_cast<size_t>(g)];
      auto forwardAt = [&](int k) {
        int chunk = (k / used) % chunks;
        int mb = (k / (used * chunks)) * used + k % used;
        return Action{ActionKind::Forward, chunk * used + g, mb};
      };
      auto backwardAt = [&](int k) {
        int chunk = chunks - 1 - (k / used) % chunks;
        int mb = (k / (used * chunks)) * used + k % used;
        return Action{ActionKind::Backward, chunk * used + g, mb};
      };
      int warmup = std::min((used - g - 1) * 2 + (chunks - 1) * used, total);
      if (chunks == 1)
        warmup = std::min(used - g - 1, total);
      int f = 0, b = 0;
      for (; f < warmup; ++f)
        out.push_back(forwardAt(f));
      while (f < total) {
        out.push_back(forwardAt(f++));
        out.push_back(backwardAt(b++));
      }
      while (b < total)
        out.push_back(backwardAt(b++));
    }
    return schedule;
  }
  }
  throw Error("unknown schedule kind");
}

} // namespace partitioner
