// `ilp-general`: exact MIP (CBC) over general allocations: any map from the positions
// of one topological order to GPUs; a GPU may hold several intervals, each maximal
// interval is a stage. The model (docs/partitioner.md, "The ilp-general model"):
//   period T = max over GPUs of compute (at the GPU's speed) and port occupancy (one
//     transfer per cut boundary and direction, on each side of the cut);
//   memory: each stage keeps min(S - s, m) micro-batches (m for GPipe), where S - s =
//     1 + the cuts after it; weights, buffers and stashed versions as in the simulator.
// The generated 1F1B schedule (list scheduling with exactly these caps) never keeps
// more, so a plan within the limit here fits in the simulator as well; the simulator
// judges the period. The model's T is only a lower bound on it (the caps can keep a
// stage from reaching T), so the optimum is simulated, and a map that misses its T
// is cut off (some position must move) and the MIP solved again with T below the
// best simulated period: without transfer time this ends with the map that
// simulates fastest of all those the memory rows admit.
//
// Variables: x[l][p] in {0,1} (position l on GPU p); c[b] in [0,1] (boundary b cut);
// e[b][p], f[b][p] in [0,1] (GPU p holds the position before / after cut b);
// n[l] in [1, m] copies of position l; q[l] in {0,1} (n[l] capped at m); mu[l][p] >= 0.
// min T + eps * sum c  s.t.  sum_p x[l][p] = 1;  c[b] >= x[b][p] - x[b+1][p];
//   e[b][p] >= x[b][p] + c[b] - 1;  f[b][p] >= x[b+1][p] + c[b] - 1;
//   T >= sum_l work[l] / speed[p] x[l][p];  T >= sum_b occ[b] (e[b][p] + f[b][p]);
//   n[l] >= 1 + sum_{b >= l} c[b] - L q[l];  n[l] >= m q[l];
//   mu[l][p] >= k[l] n[l] - k0[l] - k[l] min(m, L-l) (1 - x[l][p]);  sum_p mu[l][p] >= k[l] n[l] - k0[l];
//   sum_l (static[l] x[l][p] + mu[l][p]) + buffers(e, f) <= M;  T >= largest layer, work / speed.
// Identical GPUs on one link class: GPU p is opened only after GPU p-1 (symmetry).
// Warm start: madpipe's contiguous plan, along an order that keeps its stages together.
#include "General.h"
#include "partitioner/Planner.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Schedule.h"
#include "partitioner/Error.h"

#include "CbcUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

namespace partitioner {
namespace {

/// `best` and `all` run the MIP only on small models (at most this many assignment
/// binaries) and with a node limit (deterministic, unlike a time limit); larger ones
/// need --algo ilp-general.
constexpr int kBestBinaryLimit = 24;
constexpr int kBestNodes = 2000;
/// Rounds of the simulation loop: inside best / all, and when asked for (where
/// the time limit is the usual stop).
constexpr int kBestRounds = 8;
constexpr int kRounds = 1000;

/// A map position -> GPU the loop has simulated, and its simulated period
/// (infinity when it does not run: over memory, or a schedule error).
struct SimulatedMap {
  std::vector<int> gpuOf;
  double periodMs = kInfinity;
};

/// One round's MIP and the columns the loop reads.
struct Mip {
  std::unique_ptr<Cbc_Model, void (*)(Cbc_Model *)> owner{Cbc_newModel(), Cbc_deleteModel};
  int T = 0;
  std::vector<std::vector<int>> x;
  std::vector<int> c;
};

using detail::MipRow;

class IlpGeneralAlgorithm : public Algorithm {
public:
  std::string name() const override { return "ilp-general"; }
  std::string summary() const override {
    return "exact MIP (CBC) over general allocations (a GPU may hold several intervals), "
           "1F1B memory rule min(S-s, m); each optimum simulated, and one that misses its "
           "model period cut off and the MIP solved again; time-limited, proven bound";
  }

  AlgorithmOutput run(const Problem &problem, const AlgorithmContext &context) const override {
    const detail::Deadline deadline(context.options.ilpTimeLimitSeconds);
    AlgorithmOutput output;
    const ScheduleKind kind = detail::generalScheduleKind(problem);
    output.schedule = kind;
    const int L = static_cast<int>(problem.layers.size());
    const int P = problem.platform.gpus;
    const auto &asked = context.options.algorithms;
    const bool askedFor = std::find(asked.begin(), asked.end(), name()) != asked.end();
    if (!askedFor && L * P > kBestBinaryLimit) {
      output.reason = "ilp-general: not run by best / all on " + std::to_string(L * P) +
                      " binaries (more than " + std::to_string(kBestBinaryLimit) +
                      "); ask for it with --algo ilp-general";
      return output;
    }
    // Warm start: the memory-aware contiguous DP (madpipe). The order is the
    // topological order with its stages kept together (it is monotone along tensors),
    // so that the start is one of the maps the MIP considers.
    AlgorithmOutput warm;
    {
      Problem startProblem = problem;
      startProblem.training.schedule = kind == ScheduleKind::GPipe ? kind : ScheduleKind::OneFOneB;
      if (const Algorithm *madpipe = findAlgorithm("madpipe"))
        warm = madpipe->run(startProblem, context);
    }
    std::vector<int> order = topologicalOrder(problem);
    if (warm.allocation)
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return warm.allocation->stageOfLayer[static_cast<size_t>(a)] <
               warm.allocation->stageOfLayer[static_cast<size_t>(b)];
      });
    const detail::GeneralChain chain(problem, order);
    std::vector<int> positionOf(problem.layers.size());
    for (int l = 0; l < L; ++l)
      positionOf[static_cast<size_t>(chain.order[static_cast<size_t>(l)])] = l;
    const Platform &platform = problem.platform;
    const TrainingSettings &training = problem.training;
    const int m = training.microbatches;
    const double limit = platform.memoryBytesPerGpu;

    std::vector<double> occupancy;
    bool comm = false;
    for (size_t b = 0; b + 1 < static_cast<size_t>(L); ++b) {
      occupancy.push_back(detail::boundaryOccupancyMs(problem, chain, b));
      comm |= occupancy.back() > 0;
    }
    const bool buffers = training.communicationBuffers && limit < kInfinity;
    bool identical = platform.gpus <= platform.gpusPerNode ||
                     (platform.intraNode.bandwidthBytesPerSecond == platform.interNode.bandwidthBytesPerSecond &&
                      platform.intraNode.latencyMs == platform.interNode.latencyMs);
    for (int p = 1; p < P; ++p)
      identical &= platform.speedOf(p) == platform.speedOf(0);

    double totalWork = 0, largest = 0;
    for (double w : chain.work) {
      totalWork += w;
      largest = std::max(largest, w);
    }

    // Valid bounds the LP relaxation does not see: the largest layer on the fastest GPU,
    // and the total work over the total speed.
    double fastest = 0, speeds = 0;
    for (int p = 0; p < P; ++p) {
      fastest = std::max(fastest, platform.speedOf(p));
      speeds += platform.speedOf(p);
    }
    const double floorT = std::max(largest / fastest, totalWork / speeds);
    // Ties on T: fewer cuts (fewer stages, transfers and in-flight copies).
    const double eps = 1e-7 * std::max(largest, totalWork / std::max(1, P)) / std::max(1, L);

    // The MIP, built afresh for each round of the simulation loop below: the maps
    // simulated so far cut off, T below the best simulated period.
    auto build = [&](const std::vector<SimulatedMap> &simulated, double below) {
      Mip mip;
      detail::MipBuilder model; // loaded into CBC at once, below
      auto addColumn = [&](double lower, double upper, bool integer, double objective,
                           const std::string &name = "") {
        return model.addColumn(name, lower, upper, integer, objective);
      };
      const int T = mip.T = addColumn(floorT, std::max(floorT, below), false, 1.0, "T");
      std::vector<std::vector<int>> &x = mip.x;
      x.assign(static_cast<size_t>(L), std::vector<int>(static_cast<size_t>(P)));
      for (int l = 0; l < L; ++l)
        for (int p = 0; p < P; ++p) {
          const bool allowed = !identical || p <= l;
          x[static_cast<size_t>(l)][static_cast<size_t>(p)] =
              addColumn(0, allowed ? 1 : 0, true, 0, "x_" + std::to_string(l) + "_" + std::to_string(p));
        }
      std::vector<int> &c = mip.c;
      for (int b = 0; b + 1 < L; ++b)
        c.push_back(addColumn(0, 1, false, eps));
      const bool needSides = comm || buffers;
      std::vector<std::vector<int>> e, f;
      if (needSides)
        for (int b = 0; b + 1 < L; ++b) {
          e.emplace_back();
          f.emplace_back();
          for (int p = 0; p < P; ++p) {
            e.back().push_back(addColumn(0, 1, false, 0));
            f.back().push_back(addColumn(0, 1, false, 0));
          }
        }
      auto X = [&](int l, int p) { return x[static_cast<size_t>(l)][static_cast<size_t>(p)]; };

      for (int l = 0; l < L; ++l) {
        MipRow row;
        for (int p = 0; p < P; ++p)
          row.add(X(l, p), 1);
        row.addTo(model, 'E', 1);
      }
      if (identical) // GPU p may hold position l only if GPU p-1 holds an earlier one
        for (int l = 1; l < L; ++l)
          for (int p = 1; p < std::min(P, l + 1); ++p) {
            MipRow row;
            row.add(X(l, p), 1);
            for (int k = 0; k < l; ++k)
              row.add(X(k, p - 1), -1);
            row.addTo(model, 'L', 0);
          }
      for (int b = 0; b + 1 < L; ++b)
        for (int p = 0; p < P; ++p) {
          MipRow cut;
          cut.add(c[static_cast<size_t>(b)], 1);
          cut.add(X(b, p), -1);
          cut.add(X(b + 1, p), 1);
          cut.addTo(model, 'G', 0);
          if (needSides) {
            MipRow before, after;
            before.add(e[static_cast<size_t>(b)][static_cast<size_t>(p)], 1);
            before.add(X(b, p), -1);
            before.add(c[static_cast<size_t>(b)], -1);
            before.addTo(model, 'G', -1);
            after.add(f[static_cast<size_t>(b)][static_cast<size_t>(p)], 1);
            after.add(X(b + 1, p), -1);
            after.add(c[static_cast<size_t>(b)], -1);
            after.addTo(model, 'G', -1);
          }
        }
      for (int p = 0; p < P; ++p) {
        MipRow compute;
        for (int l = 0; l < L; ++l)
          compute.add(X(l, p), chain.work[static_cast<size_t>(l)] / platform.speedOf(p));
        compute.add(T, -1);
        compute.addTo(model, 'L', 0);
        if (comm) {
          MipRow ports;
          for (int b = 0; b + 1 < L; ++b) {
            ports.add(e[static_cast<size_t>(b)][static_cast<size_t>(p)], occupancy[static_cast<size_t>(b)]);
            ports.add(f[static_cast<size_t>(b)][static_cast<size_t>(p)], occupancy[static_cast<size_t>(b)]);
          }
          ports.add(T, -1);
          ports.addTo(model, 'L', 0);
        }
      }

      if (limit < kInfinity) {
        // Weight versions: stashing keeps one per copy, otherwise a constant.
        const bool stash = weightVersions(training, 2) == 2 && weightVersions(training, 1) == 1;
        const int constantVersions = weightVersions(training, 1);
        const bool gpipe = kind == ScheduleKind::GPipe;
        std::vector<int> n;
        if (!gpipe) {
          for (int l = 0; l < L; ++l) {
            const int copies = addColumn(1, std::min(m, L - l), false, 0);
            n.push_back(copies);
            MipRow lower; // n >= 1 + cuts after l (capped at m through q)
            lower.add(copies, 1);
            for (int b = l; b + 1 < L; ++b)
              lower.add(c[static_cast<size_t>(b)], -1);
            if (L > m) {
              const int q = addColumn(0, 1, true, 0);
              lower.add(q, L);
              MipRow capped;
              capped.add(copies, 1);
              capped.add(q, -m);
              capped.addTo(model, 'G', 0);
            }
            lower.addTo(model, 'G', 1);
          }
        }
        // Aggregate rows (valid, and they tighten the LP relaxation): the GPU holding l
        // pays at least perCopy * n[l], so sum_p mu[l][p] >= perCopy * n[l] - offset.
        std::vector<std::vector<int>> mus(static_cast<size_t>(L));
        for (int p = 0; p < P; ++p) {
          // Fractions of the limit: byte-sized coefficients upset CBC's tolerances.
          MipRow memory;
          for (int l = 0; l < L; ++l) {
            const double saved = chain.saved[static_cast<size_t>(l)] / limit;
            const double params = chain.params[static_cast<size_t>(l)] / limit;
            if (gpipe) {
              const int versions = weightVersions(training, m);
              memory.add(X(l, p), (training.stateMultiplier + versions - 1) * params + m * saved);
              continue;
            }
            memory.add(X(l, p), (training.stateMultiplier + (stash ? 0 : constantVersions - 1)) * params);
            const double perCopy = saved + (stash ? params : 0);
            if (perCopy <= 0)
              continue;
            // At most min(m, L - l) copies: L - l - 1 cuts can follow position l.
            const double most = std::min(m, L - l);
            const int mu = addColumn(0, 1e30, false, 0);
            mus[static_cast<size_t>(l)].push_back(mu);
            MipRow link; // mu >= perCopy * n - (stash ? params : 0) - perCopy * most * (1 - x)
            link.add(mu, 1);
            link.add(n[static_cast<size_t>(l)], -perCopy);
            link.add(X(l, p), -perCopy * most);
            link.addTo(model, 'G', -(stash ? params : 0) - perCopy * most);
            memory.add(mu, 1);
          }
          if (buffers)
            for (int b = 0; b + 1 < L; ++b) {
              const double bytes =
                  kBuffersPerCutTensor * chain.boundaryBytes[static_cast<size_t>(b)] / limit;
              memory.add(e[static_cast<size_t>(b)][static_cast<size_t>(p)], bytes);
              memory.add(f[static_cast<size_t>(b)][static_cast<size_t>(p)], bytes);
            }
          // The GPU's workspace w >= workspace(l) x[l][p]: the largest of its layers'.
          int workspace = -1;
          for (int l = 0; l < L; ++l) {
            const double bytes =
                problem.layers[static_cast<size_t>(chain.order[static_cast<size_t>(l)])]
                    .workspaceBytes / limit;
            if (bytes <= 0)
              continue;
            if (workspace < 0)
              workspace = addColumn(0, 1e30, false, 0);
            MipRow atLeast;
            atLeast.add(workspace, 1);
            atLeast.add(X(l, p), -bytes);
            atLeast.addTo(model, 'G', 0);
          }
          if (workspace >= 0)
            memory.add(workspace, 1);
          // A shared saved value: the copies of the stage of a keeper on this GPU (the
          // most of them when keepers on it sit in different stages, which the MIP then
          // under-counts; the simulator charges each stage's copy).
          for (const SharedSaved &value : problem.sharedSaved) {
            const double bytes = value.bytes / limit;
            if (bytes <= 0)
              continue;
            const int held = addColumn(0, 1e30, false, 0);
            for (int keeper : value.layers) {
              const int l = positionOf[static_cast<size_t>(keeper)];
              MipRow atLeast; // held >= bytes * copies(l) if l is on p
              atLeast.add(held, 1);
              if (gpipe) {
                atLeast.add(X(l, p), -bytes * m);
                atLeast.addTo(model, 'G', 0);
                continue;
              }
              const double most = std::min(m, L - l);
              atLeast.add(n[static_cast<size_t>(l)], -bytes);
              atLeast.add(X(l, p), -bytes * most);
              atLeast.addTo(model, 'G', -bytes * most);
            }
            memory.add(held, 1);
          }
          // A shared parameter: its first reader along the order owns it (chain.params
          // holds it there); any other GPU holding a reader keeps the weight, its
          // gradient and the extra weight versions of its first stage reading it (the
          // one with the most copies: copies fall along the order).
          for (const SharedParameter &value : problem.sharedParameters) {
            const double bytes = value.bytes / limit;
            if (bytes <= 0)
              continue;
            const double reader = readerStateMultiplier(training);
            int first = L;
            for (int sharer : value.layers)
              first = std::min(first, positionOf[static_cast<size_t>(sharer)]);
            const int held = addColumn(0, 1e30, false, 0);
            for (int sharer : value.layers) {
              const int l = positionOf[static_cast<size_t>(sharer)];
              if (l == first)
                continue;
              MipRow atLeast; // held >= what GPU p keeps if l is on it and `first` is not
              atLeast.add(held, 1);
              if (stash && !gpipe) {
                // (reader - 1 + n[l]) * bytes, relaxed by `most` otherwise.
                const double most = (reader - 1 + std::min(m, L - l)) * bytes;
                atLeast.add(n[static_cast<size_t>(l)], -bytes);
                atLeast.add(X(l, p), -most);
                atLeast.add(X(first, p), most);
                atLeast.addTo(model, 'G', (reader - 1) * bytes - most);
                continue;
              }
              const double kept = (reader + weightVersions(training, gpipe ? m : 1) - 1) * bytes;
              atLeast.add(X(l, p), -kept);
              atLeast.add(X(first, p), kept);
              atLeast.addTo(model, 'G', 0);
            }
            memory.add(held, 1);
          }
          memory.addTo(model, 'L', 1.0);
        }
        for (int l = 0; l < L && !gpipe; ++l) {
          if (mus[static_cast<size_t>(l)].empty())
            continue;
          const double params = chain.params[static_cast<size_t>(l)] / limit;
          const double perCopy = chain.saved[static_cast<size_t>(l)] / limit + (stash ? params : 0);
          MipRow aggregate;
          for (int mu : mus[static_cast<size_t>(l)])
            aggregate.add(mu, 1);
          aggregate.add(n[static_cast<size_t>(l)], -perCopy);
          aggregate.addTo(model, 'G', -(stash ? params : 0));
        }
        for (int l = 0; l + 1 < L && !gpipe; ++l) { // n[l] >= n[l+1] (implied, helps the LP)
          MipRow monotone;
          monotone.add(n[static_cast<size_t>(l)], 1);
          monotone.add(n[static_cast<size_t>(l + 1)], -1);
          monotone.addTo(model, 'G', 0);
        }
      }
      // A map simulated before is cut off: some position moves. (Its period, or
      // infinity where it did not run, is not below the best simulated one, and
      // T stays below that.)
      for (const SimulatedMap &map : simulated) {
        MipRow row;
        for (int l = 0; l < L; ++l)
          row.add(X(l, map.gpuOf[static_cast<size_t>(l)]), 1);
        row.addTo(model, 'L', L - 1);
      }
      Cbc_Model *cbc = mip.owner.get();
      Cbc_setLogLevel(cbc, 0);
      model.load(cbc);
      Cbc_setObjSense(cbc, 1.0);
      // Inside best / all: kBestNodes nodes at most (the incumbent and its gap are
      // reported); the time limit stays as a backstop.
      if (!askedFor)
        Cbc_setMaximumNodes(cbc, kBestNodes);
      Cbc_setParameter(cbc, "cuts", "off"); // faster on these models (measured)
      Cbc_setAllowableGap(cbc, 0.5 * eps);
      // The warm start as a map along the order (GPUs relabelled by first use when they
      // are interchangeable). CBC completes the continuous columns, or drops the start
      // when it does not fit this model.
      {
        if (warm.allocation) {
          std::vector<int> label(static_cast<size_t>(P), -1);
          int next = 0;
          std::vector<std::string> names;
          std::vector<double> values;
          bool ok = true;
          for (int l = 0; l < L && ok; ++l) {
            const int layer = chain.order[static_cast<size_t>(l)];
            int gpu = warm.allocation->gpuOfStage[static_cast<size_t>(warm.allocation->stageOfLayer[static_cast<size_t>(layer)])];
            if (identical) {
              if (label[static_cast<size_t>(gpu)] < 0)
                label[static_cast<size_t>(gpu)] = next++;
              gpu = label[static_cast<size_t>(gpu)];
            }
            ok = gpu >= 0 && gpu < P && (!identical || gpu <= l);
            if (!ok)
              break;
            for (int p = 0; p < P; ++p) {
              names.push_back("x_" + std::to_string(l) + "_" + std::to_string(p));
              values.push_back(p == gpu ? 1.0 : 0.0);
            }
          }
          if (ok) {
            detail::setMipStart(cbc, names, values);
          }
        }
      }
      return mip;
    };

    // The simulation loop. The MIP's T is the model's period, and without
    // transfer time (no port rows) it is a lower bound on the simulated period of
    // the generated schedule, whose in-flight counts the MIP's memory rows bound.
    // Each round simulates the MIP's optimum; when the simulation is at T, no map
    // along the order simulates faster; otherwise the map is cut off (above) and the
    // MIP solved again below the best simulated period, until nothing is left
    // below it, the time or node limit, or kRounds rounds.
    std::vector<SimulatedMap> simulated;
    std::optional<SimulatedMap> incumbent;
    std::optional<Allocation> incumbentAllocation;
    double bound = floorT, modelBound = floorT, incumbentModelT = 0;
    std::string outcome;
    int rounds = 0;
    for (;;) {
      const double below = incumbent ? incumbent->periodMs * (1 - 1e-9) : 1e30;
      if (below <= floorT) {
        bound = incumbent->periodMs;
        outcome = "optimal in simulation (at the work bound)";
        break;
      }
      Mip mip = build(simulated, below);
      Cbc_Model *model = mip.owner.get();
      ++rounds;
      detail::solve(model, deadline);
      if (Cbc_isProvenInfeasible(model)) {
        if (incumbent) {
          bound = incumbent->periodMs;
          outcome = "optimal in simulation";
          break;
        }
        output.reason = "ilp-general: proven infeasible" + detail::withoutRecomputation(problem) +
                        ": no general allocation on " + std::to_string(P) + " GPUs fits " +
                        formatBytes(limit, problem.platform.byteUnits) +
                        " per GPU under the 1F1B memory rule" +
                        (simulated.empty() ? "" : " and runs in simulation");
        return output;
      }
      const double *solution = detail::solutionOf(model);
      if (!solution) {
        bound = std::max(bound, Cbc_getBestPossibleObjValue(model));
        outcome = "CBC stopped by its limit";
        break;
      }
      SimulatedMap map;
      map.gpuOf.assign(static_cast<size_t>(L), 0);
      for (int l = 0; l < L; ++l)
        for (int p = 0; p < P; ++p)
          if (solution[mip.x[static_cast<size_t>(l)][static_cast<size_t>(p)]] > 0.5)
            map.gpuOf[static_cast<size_t>(l)] = p;
      const double modelT = solution[mip.T];
      double cuts = 0;
      for (int column : mip.c)
        cuts += solution[column];
      const bool proven = Cbc_isProvenOptimal(model);
      bound = std::max(bound, proven ? modelT
                                     : std::min(modelT, Cbc_getBestPossibleObjValue(model) - eps * cuts));
      if (rounds == 1)
        modelBound = bound; // over every map: nothing is cut off yet
      Allocation allocation = detail::allocationFromGpuMap(problem, chain, map.gpuOf);
      map.periodMs = kInfinity;
      try {
        const PlanResult result = evaluateUnderPolicyOrThrow(problem, allocation, kind, context.bounds);
        if (result.valid)
          map.periodMs = result.periodMs;
      } catch (const Error &) {
        // a map the schedule cannot run: cut off like one that does not fit
      }
      if (map.periodMs < kInfinity && (!incumbent || map.periodMs < incumbent->periodMs)) {
        incumbent = map;
        incumbentAllocation = allocation;
        incumbentModelT = modelT;
      }
      if (!proven) {
        outcome = "CBC stopped by its limit";
        break;
      }
      if (incumbent && incumbent->periodMs <= modelT * (1 + 1e-9)) {
        bound = incumbent->periodMs;
        outcome = "optimal in simulation";
        break;
      }
      simulated.push_back(std::move(map));
      if (rounds >= (askedFor ? kRounds : kBestRounds) || deadline.remainingSeconds() <= 0) {
        outcome = "stopped after " + std::to_string(rounds) + " rounds";
        break;
      }
    }
    if (!incumbent) {
      char text[64];
      std::snprintf(text, sizeof text, "%g s", deadline.limitSeconds());
      output.reason = simulated.empty()
                          ? "ilp-general: no solution within the " + std::string(text) + " time limit" +
                                (askedFor ? "" : " or the node limit of best")
                          : "ilp-general: none of the " + std::to_string(simulated.size()) +
                                " maps found runs in simulation (" + outcome + ")";
      return output;
    }
    output.allocation = *incumbentAllocation;
    output.predictedPeriodMs = incumbentModelT;
    // Where T bounds the simulated period (no transfer time on the ports), the last
    // round's bound holds for every map's simulated period. Otherwise the first
    // round's bounds the model's period of every map.
    bound = std::min(bound, incumbent->periodMs);
    output.provenLowerBoundMs = comm ? std::min(modelBound, incumbentModelT) : bound;
    std::ostringstream notes;
    char text[160];
    std::snprintf(text, sizeof text,
                  "%s after %d MIP solve%s: simulated %.3f ms, model %.3f ms, bound %.3f ms", outcome.c_str(), rounds, rounds == 1 ? "" : "s", incumbent->periodMs, incumbentModelT,
                  output.provenLowerBoundMs);
    notes << text << ", " << output.allocation->numStages() << " stages on "
          << output.allocation->numGpusUsed() << " GPUs";
    if (comm)
      notes << " (transfers take time: T bounds the model's period only)";
    if (problem.training.recompute != RecomputePolicy::None) {
      notes << detail::withoutRecomputation(problem);
      output.provenLowerBoundMs = 0; // a bound without recomputation, not with it
    }
    output.notes = notes.str();
    return output;
  }
};

} // namespace

std::unique_ptr<Algorithm> makeIlpGeneralAlgorithm() { return std::make_unique<IlpGeneralAlgorithm>(); }

} // namespace partitioner
