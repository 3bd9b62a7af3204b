// Lower bounds on the period: work, largest layer, memory (Little's law).
#include "partitioner/Bounds.h"
#include "partitioner/LatticeDp.h"
#include "partitioner/Linearize.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace partitioner {

namespace {

/// The smallest T with sum over layers of saved * min(m, span / T) <= room (0 when
/// T -> 0 fits already). The sum only falls as T grows: bisection, to a relative
/// 1e-12, from below (a bound slightly below the threshold stays a bound).
double averagedMemoryBoundMs(const std::vector<std::pair<double, double>> &kept, int m,
                             double room) {
  auto held = [&](double T) {
    double total = 0;
    for (const auto &[span, saved] : kept)
      total += saved * std::min<double>(m, span / T);
    return total;
  };
  double spanWeighted = 0, copies = 0;
  for (const auto &[span, saved] : kept) {
    spanWeighted += saved * span;
    copies += saved * m;
  }
  if (copies <= room || spanWeighted <= 0)
    return 0;
  double low = 0, high = spanWeighted / room; // held(high) <= room
  for (int step = 0; step < 200 && high - low > 1e-12 * high; ++step) {
    const double middle = 0.5 * (low + high);
    (held(middle) > room ? low : high) = middle;
  }
  return low;
}

} // namespace

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
    double stateTotal = 0;
    std::vector<std::pair<double, double>> kept; // (span, saved bytes) of each layer
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
      if (layer.savedBytes > 0)
        kept.emplace_back(span, layer.savedBytes);
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
    // Averaged over time, every GPU holds at most `limit`: on average a layer keeps
    // min(m, span / T) copies (an iteration of m micro-batches never has more in
    // flight; with m = 1 the marginal period overlaps two micro-batches, the memory
    // holds one), so the smallest T at which they fit.
    const double room = platform.gpus * limit - stateTotal;
    if (room <= 0) {
      bounds.memoryInfeasible = true;
      bounds.memoryReason = "parameters and optimizer state need " +
                            formatBytes(stateTotal, platform.byteUnits) + ", the " +
                            std::to_string(platform.gpus) + " GPUs hold " +
                            formatBytes(platform.gpus * limit, platform.byteUnits);
    } else {
      bounds.memoryMs = std::max(bounds.memoryMs, averagedMemoryBoundMs(kept, m, room));
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
