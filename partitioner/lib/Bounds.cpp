// Lower bounds on the period: work, largest layer, memory (Little's law).
#include "partitioner/Bounds.h"
#include "partitioner/LatticeDp.h"
#include "partitioner/Linearize.h"

#include <algorithm>
#include <cmath>

namespace partitioner {

LowerBounds computeLowerBounds(const Problem &problem) {
  LowerBounds bounds;
  const Platform &platform = problem.platform;
  double totalSpeed = 0, fastest = 0;
  for (int g = 0; g < platform.gpus; ++g) {
    totalSpeed += platform.speedOf(g);
    fastest = std::max(fastest, platform.speedOf(g));
  }
  double work = 0;
  for (const Layer &layer : problem.layers) {
    work += layer.workMs();
    bounds.largestLayerMs = std::max(bounds.largestLayerMs, layer.workMs() / fastest);
  }
  bounds.workMs = work / totalSpeed;

  const double limit = platform.memoryBytesPerGpu;
  const int m = problem.training.microbatches;
  if (limit < kInfinity) {
    std::vector<double> down = downstreamWork(problem);
    double stateTotal = 0, spanWeighted = 0;
    // The shared parameters: the owner holds their state, every reader at least the
    // weight and its gradient.
    std::vector<double> read(problem.layers.size(), 0.0);
    for (const SharedParameter &value : problem.sharedParameters) {
      stateTotal += problem.training.stateMultiplier * value.bytes;
      for (int layer : value.layers)
        read[static_cast<size_t>(layer)] += value.bytes;
    }
    for (size_t l = 0; l < problem.layers.size(); ++l) {
      const Layer &layer = problem.layers[l];
      // Whichever GPU holds the layer holds its state and, while it runs, its workspace.
      const double state = problem.training.stateMultiplier * layer.parameterBytes +
                           readerStateMultiplier(problem.training) * read[l] +
                           layer.workspaceBytes;
      stateTotal += problem.training.stateMultiplier * layer.parameterBytes;
      const double span = down[l] / fastest;
      spanWeighted += layer.savedBytes * span;
      if (layer.savedBytes <= 0) {
        if (state > limit) {
          bounds.memoryInfeasible = true;
          bounds.memoryReason = "layer " + layer.name + " needs " +
                                formatBytes(state, platform.byteUnits) +
                                " for its parameters, optimizer state and workspace, limit " +
                                formatBytes(limit, platform.byteUnits);
        }
        continue;
      }
      // ceil(span / T) copies, at most m: k copies fit => T >= span / k.
      const double room = limit - state;
      const double copies = std::floor(room / layer.savedBytes);
      if (copies < 1) {
        bounds.memoryInfeasible = true;
        bounds.memoryReason = "layer " + layer.name + " needs " +
                              formatBytes(state + layer.savedBytes, platform.byteUnits) +
                              " with a single micro-batch in flight, limit " +
                              formatBytes(limit, platform.byteUnits);
        continue;
      }
      if (copies < m)
        bounds.memoryMs = std::max(bounds.memoryMs, span / copies);
    }
    // Averaged over time, every GPU holds at most `limit`.
    const double room = platform.gpus * limit - stateTotal;
    if (room <= 0) {
      bounds.memoryInfeasible = true;
      bounds.memoryReason = "parameters and optimizer state need " +
                            formatBytes(stateTotal, platform.byteUnits) + ", the " +
                            std::to_string(platform.gpus) + " GPUs hold " +
                            formatBytes(platform.gpus * limit, platform.byteUnits);
    } else if (spanWeighted > 0) {
      bounds.memoryMs = std::max(bounds.memoryMs, spanWeighted / room);
    }
  }
  // Recomputation keeps fewer copies than Little's law counts (it trades time for
  // them), so the memory bound holds only without it; one copy is still needed.
  if (problem.training.recompute != RecomputePolicy::None)
    bounds.memoryMs = 0;
  bounds.bestMs = std::max({bounds.workMs, bounds.largestLayerMs, bounds.memoryMs});
  return bounds;
}

} // namespace partitioner
