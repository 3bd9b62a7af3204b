// `ilp`: exact mixed-integer program solved with CBC (COIN-OR) under a time limit.
// Allocations are contiguous in the DAG sense: any assignment of layers to stages that
// is monotone along every tensor (stage differences of nested downsets), so it is exact
// over DAG-aware cuts even where the downsets are too many to enumerate. Memory uses
// the schedule's position rule (1F1B: min(stages after + 1, m); GPipe: m), links the
// same boundary model as the DPs. Reports CBC's proven bound and the remaining gap.
//
// Variables (stages j counted from the end, j = 0 is the last; K = min(P, layers), or P
// where GPUs differ and the position j is the GPU P-1-j):
//   a[l][j] in {0,1}, j = 1..K-1: layer l sits in a stage >= j; x[l][j] = a[l][j] - a[l][j+1]
//   z[t][j] in [0,1]: tensor t crosses boundary j;  u[j]: boundary j is used;  T >= 0
// min T  s.t.  a monotone in j and along tensors; z[t][j] >= a[p][j] - a[c][j];
//   T >= compute(j), T >= link time(j), memory(j) <= M for every stage j (with the
//   position rule's copies, or, on the spans, the copies y[j][n] picks; below).
// Under 1F1B on links that take time, asked for by name: d[j] >= d[j-1] + compute(j)
//   + 2 link time(j) (the least span of stage j), d[j] <= (j + 1) T where j + 1 < m,
//   used positions packed towards the end (o[j] >= x[l][j], o[j] <= sum_l x[l][j-1]),
//   under a memory limit the copies of each position, y[j][n] = 1 for one n in
//   1..min(j + 1, m), with d[j] <= n T where n < m and memory(j) with n copies <= M,
//   and a loop that simulates each optimum, cuts off one slower than its T and solves
//   again below the best simulated period. On a chain the loop's bound is a bound on
//   every split its memory rows admit; on a DAG the span rows bound no simulated
//   period and the loop claims none.
#include "Contiguous.h"
#include "partitioner/Error.h"

#include "CbcUtil.h"
#include "partitioner/PlannerImpl.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <sstream>

namespace partitioner {
namespace {

using detail::MipRow;

/// `best` runs the MIP only on small models; larger ones need --algo ilp / all.
constexpr int kBestBinaryLimit = 500;
/// The loop on links that take time: at most this many solves (and the time limit).
constexpr int kIlpRounds = 1000;

class IlpAlgorithm : public Algorithm {
public:
  std::string name() const override { return "ilp"; }
  std::string summary() const override {
    return "exact MIP (CBC) over DAG-convex contiguous allocations, time-limited, proven bound";
  }
  AlgorithmOutput run(const Problem &problem, const AlgorithmContext &context) const override {
    return runIlp(problem, context, /*minMaxBound=*/true);
  }
};

/// `problem` with every GPU pair joined by the fastest link of its platform.
Problem withFastestLinks(const Problem &problem) {
  Problem fast = problem;
  LinkSpec &intra = fast.platform.intraNode;
  const LinkSpec &inter = problem.platform.interNode;
  intra.bandwidthBytesPerSecond = std::max(intra.bandwidthBytesPerSecond, inter.bandwidthBytesPerSecond);
  intra.latencyMs = std::min(intra.latencyMs, inter.latencyMs);
  fast.platform.interNode = intra;
  return fast;
}

/// `problem` without its memory limit.
Problem withoutMemoryLimit(const Problem &problem) {
  Problem unlimited = problem;
  unlimited.platform.memoryBytesPerGpu = kInfinity;
  return unlimited;
}

/// The warm start: the memory-aware min-max DP (DAG-aware when the downsets are
/// few), whose bottleneck is the MIP's objective.
AlgorithmOutput minMaxStart(const Problem &problem, const AlgorithmContext &context) {
  Problem startProblem = problem;
  if (startProblem.training.schedule != ScheduleKind::GPipe)
    startProblem.training.schedule = ScheduleKind::OneFOneB;
  return detail::madPipe(startProblem, context, /*spans=*/std::nullopt);
}

} // namespace

// Why the DP's optimum with the fastest links bounds the MIP: take any MIP
// solution and drop its empty stages. Every stage keeps its layers (the same
// compute), is no further from the end (no more copies: min(j + 1, m) only
// grows with j) and crosses the same tensors (a tensor crossing an empty stage
// is charged at both of its boundaries); with every link the fastest, no
// boundary costs more. What is left is a split the DP prices the same way, so
// the DP's optimum is no larger. With GPUs of one speed only: a stage moved to
// another position runs on another GPU.
double ilpMinMaxBoundMs(const Problem &problem, const AlgorithmContext &context) {
  const std::vector<double> &speed = problem.platform.speed;
  if (std::adjacent_find(speed.begin(), speed.end(), std::not_equal_to<double>()) != speed.end() ||
      problem.training.recompute != RecomputePolicy::None ||
      problem.training.schedule == ScheduleKind::Interleaved)
    return 0;
  const AlgorithmOutput fast = minMaxStart(withFastestLinks(problem), context);
  return fast.allocation && fast.everySplit ? fast.predictedPeriodMs : 0;
}

AlgorithmOutput runIlp(const Problem &problem, const AlgorithmContext &context, bool minMaxBound,
                       IlpLinks links) {
  const detail::Deadline deadline(context.options.ilpTimeLimitSeconds);
  AlgorithmOutput output;
  const ScheduleKind kind = problem.training.schedule;
  if (kind == ScheduleKind::Interleaved) {
    output.reason = "ilp: plans one stage per GPU; not for the interleaved schedule";
    return output;
  }
  const std::vector<int> order = topologicalOrder(problem);
  const int layers = static_cast<int>(order.size());
  const int gpus = problem.platform.gpus;
  const bool oneLinkClass = problem.platform.gpus <= problem.platform.gpusPerNode ||
                            (problem.platform.intraNode.bandwidthBytesPerSecond ==
                                 problem.platform.interNode.bandwidthBytesPerSecond &&
                             problem.platform.intraNode.latencyMs == problem.platform.interNode.latencyMs);
  // Where GPUs differ (speeds, or the links between pairs), the stage at position j
  // from the end runs on GPU P-1-j, where the MIP prices it, and all P positions are
  // open: a split of few layers may leave out any GPUs (on 2 of 3 GPUs with 2 per
  // node, the first two share the faster link). Otherwise the stages go to the
  // first GPUs, and min(P, L) positions hold every split.
  const bool placed = !problem.platform.speed.empty() || !oneLinkClass;
  const int K = std::max(1, placed ? gpus : std::min(gpus, layers));
  const bool askedFor = std::find(context.options.algorithms.begin(), context.options.algorithms.end(),
                                  "ilp") != context.options.algorithms.end() ||
                        std::find(context.options.algorithms.begin(), context.options.algorithms.end(),
                                  "all") != context.options.algorithms.end();
  if (!askedFor && layers * (K - 1) > kBestBinaryLimit) {
    output.reason = "ilp: not run by best on " + std::to_string(layers * (K - 1)) +
                    " binaries (more than " + std::to_string(kBestBinaryLimit) +
                    "); ask for it with --algo ilp or all";
    return output;
  }
  // On links that take time, 1F1B's spans hold the transfers. Asked for, the MIP
  // gets span rows and a simulation loop (below). Inside best (where a few solves
  // of up to 500 binaries took 4-27 s on AmoebaNet-36 and XLNet-24) it keeps the
  // min-max model's single solve, and its plan is planned as madpipe's are, by the
  // span model along its stages.
  const bool onSpans = links == IlpLinks::Spans &&
                       (kind == ScheduleKind::OneFOneB || kind == ScheduleKind::OneFOneBStash) &&
                       !linksAreFree(problem.platform);
  const bool spans = onSpans && askedFor;
  // On the spans under a memory limit, a stage keeps the copies its span needs, n
  // with span <= n T, as madpipe's plans do (the generated order holds a plan to
  // them, its caps), not always 1F1B's min(j + 1, m): y[j][n] picks n, and stage j
  // fits with n copies. Where the weight versions grow with the copies (stashing)
  // the memory rows keep 1F1B's counts.
  const bool capped =
      spans && problem.platform.memoryBytesPerGpu < kInfinity &&
      weightVersions(problem.training, 1) == weightVersions(problem.training, problem.training.microbatches);
  auto plannedOnSpans = [&](AlgorithmOutput &planned) {
    if (!onSpans || !planned.allocation)
      return;
    const double own = detail::spanPeriodOf(problem, *planned.allocation, planned.predictedPeriodMs);
    if (own == kInfinity)
      return;
    char text[160];
    std::snprintf(text, sizeof text,
                  "; planned by the 1F1B span model (%.3f ms is the min-max model's period; "
                  "--algo ilp plans on the spans)",
                  planned.predictedPeriodMs);
    planned.notes += text;
    planned.predictedPeriodMs = own;
  };
  const AlgorithmOutput warm = minMaxStart(problem, context);
  // On the spans, the loop's first incumbent is whichever simulates faster of the
  // min-max plan and madpipe's own (its choice among its span and min-max plans,
  // with its caps where the MIP has them too); CBC's MIP start stays the min-max
  // plan, its own model's.
  std::optional<Allocation> spanStart;
  double spanStartT = 0;
  if (spans) {
    AlgorithmOutput madpipe = makeMadPipeAlgorithm()->run(problem, context);
    if (madpipe.allocation) {
      spanStart = *madpipe.allocation;
      if (!capped)
        spanStart->inFlightLimit.clear(); // the MIP's copies are 1F1B's own
      spanStartT = madpipe.predictedPeriodMs;
    }
  }
  // With caps a stage may keep fewer copies than the min-max DP's position rule
  // charges: its bound is then taken without the memory limit.
  const double bound =
      !minMaxBound ? 0 : capped ? ilpMinMaxBoundMs(withoutMemoryLimit(problem), context)
                                : ilpMinMaxBoundMs(problem, context);
  // The start reaches the bound: it is optimal, and CBC has nothing to prove. Its
  // value in the DP is its value in the MIP where the DP planned the problem itself
  // (1F1B or GPipe: not another schedule's weight versions) and the MIP places its
  // stages on the same GPUs (all K of them used, or one link class between every pair).
  const bool startIsExact = kind == ScheduleKind::OneFOneB || kind == ScheduleKind::GPipe;
  if (!spans && startIsExact && warm.allocation && bound > 0 && warm.predictedPeriodMs <= bound * (1 + 1e-9) &&
      (warm.allocation->numStages() == K || oneLinkClass)) {
    output.allocation = *warm.allocation;
    output.predictedPeriodMs = warm.predictedPeriodMs;
    output.provenLowerBoundMs = bound;
    output.notes = "optimal without CBC: its warm start (the min-max DP) reaches the DP's "
                   "optimum over every split with the fastest links";
    plannedOnSpans(output);
    return output;
  }
  const int m = problem.training.microbatches;
  const double limit = problem.platform.memoryBytesPerGpu;
  const Platform &platform = problem.platform;
  const TrainingSettings &training = problem.training;
  const bool needCuts = training.communicationBuffers ||
                        platform.intraNode.bandwidthBytesPerSecond < kInfinity ||
                        platform.interNode.bandwidthBytesPerSecond < kInfinity ||
                        platform.intraNode.latencyMs > 0 || platform.interNode.latencyMs > 0;
  // Every layer lies whole in one stage, on a GPU no faster than the fastest:
  // T is at least its work there, and at least the min-max DP's bound. The LP
  // relaxation spreads layers over stages and misses both. With the largest
  // layer's bound, and without CBC's primal heuristics (the warm start below is
  // the incumbent), the proofs take less time: GNMT-16 at S = 4 1.84 -> 0.54 s,
  // AlexNet at S = 16 0.59 -> 0.05 s, the same optima on every profile `best`
  // runs the MIP on.
  double fastest = 0, largestLayer = 0;
  for (int g = 0; g < gpus; ++g)
    fastest = std::max(fastest, platform.speedOf(g));
  for (const Layer &layer : problem.layers)
    largestLayer = std::max(largestLayer, layer.workMs() / fastest);
  const double floorT = std::max(largestLayer, bound * (1 - 1e-9));
  // An upper bound on every span: all the work on the slowest GPU and every
  // boundary's tensors both ways on the slowest link.
  double spanCap = 0;
  {
    double slowest = kInfinity, slowestLink = kInfinity, latency = 0, bytes = 0;
    for (int g = 0; g < gpus; ++g)
      slowest = std::min(slowest, platform.speedOf(g));
    for (const Layer &layer : problem.layers)
      spanCap += layer.workMs() / slowest;
    for (const LinkSpec *link : {&platform.intraNode, &platform.interNode}) {
      slowestLink = std::min(slowestLink, link->bandwidthBytesPerSecond);
      latency = std::max(latency, link->latencyMs);
    }
    for (const Tensor &tensor : problem.tensors)
      bytes += tensor.bytes;
    const double boundary = latency + (slowestLink < kInfinity ? bytes / slowestLink * 1e3 : 0);
    spanCap = (spanCap + 2 * (K - 1) * boundary) * (1 + 1e-6) + 1e-6;
  }

  double largestWorkspace = 0; // a bound on each stage's workspace column
  for (const Layer &layer : problem.layers)
    largestWorkspace = std::max(largestWorkspace, layer.workspaceBytes / limit);

  // One solve's MIP, built afresh for each round of the loop below: `cutOff` holds
  // splits (each layer's stage from the end) some position of which must change,
  // and T stays at most `belowMs`.
  struct Mip {
    std::unique_ptr<Cbc_Model, void (*)(Cbc_Model *)> owner{Cbc_newModel(), Cbc_deleteModel};
    int T = -1;
    std::vector<std::vector<int>> a; // a[l][j], j = 1..K-1
    std::vector<std::vector<int>> y; // y[j][n - 1]: stage j keeps n copies (capped)
  };
  // A split (each layer's stage from the end) and, capped, each position's copies.
  struct Split {
    std::vector<int> fromEnd;
    std::vector<int> copies;
  };
  auto build = [&](const std::vector<Split> &cutOff, double belowMs) {
    Mip mip;
    detail::MipBuilder model;
    auto addColumn = [&](const std::string &name, double upper, bool integer, double objective) {
      return model.addColumn(name, 0.0, upper, integer, objective);
    };
    const int T = mip.T = addColumn("T", belowMs, false, 1.0);
    mip.y.assign(static_cast<size_t>(K), {});
    std::vector<std::vector<int>> &a = mip.a;
    a.assign(problem.layers.size(), std::vector<int>(static_cast<size_t>(K) + 1, -1));
    for (int l = 0; l < layers; ++l)
      for (int j = 1; j < K; ++j)
        a[static_cast<size_t>(l)][static_cast<size_t>(j)] =
            addColumn("a_" + std::to_string(l) + "_" + std::to_string(j), 1.0, true, 0.0);
    // Expression of a[l][j] as (column or constant).
    auto addA = [&](MipRow &row, int l, int j, double coefficient) {
      if (j <= 0)
        row.constant += coefficient;
      else if (j < K)
        row.add(a[static_cast<size_t>(l)][static_cast<size_t>(j)], coefficient);
    };
    auto addX = [&](MipRow &row, int l, int j, double coefficient) {
      addA(row, l, j, coefficient);
      addA(row, l, j + 1, -coefficient);
    };
    std::vector<std::vector<int>> z(problem.tensors.size(), std::vector<int>(static_cast<size_t>(K), -1));
    std::vector<int> used(static_cast<size_t>(K), -1);
    if (needCuts)
      for (int j = 1; j < K; ++j) {
        used[static_cast<size_t>(j)] = addColumn("u_" + std::to_string(j), 1.0, false, 0.0);
        for (size_t t = 0; t < problem.tensors.size(); ++t)
          z[t][static_cast<size_t>(j)] =
              addColumn("z_" + std::to_string(t) + "_" + std::to_string(j), 1.0, false, 0.0);
      }

    // Monotone in j, and along every tensor (producer's stage >= consumer's, from the end).
    for (int l = 0; l < layers; ++l)
      for (int j = 1; j + 1 < K; ++j) {
        MipRow row;
        addA(row, l, j, 1);
        addA(row, l, j + 1, -1);
        row.addTo(model, 'G', 0);
      }
    for (size_t t = 0; t < problem.tensors.size(); ++t) {
      const Tensor &tensor = problem.tensors[t];
      for (int consumer : tensor.consumers)
        for (int j = 1; j < K; ++j) {
          MipRow row;
          addA(row, tensor.producer, j, 1);
          addA(row, consumer, j, -1);
          row.addTo(model, 'G', 0);
          if (needCuts) {
            MipRow cut;
            cut.add(z[t][static_cast<size_t>(j)], 1);
            addA(cut, tensor.producer, j, -1);
            addA(cut, consumer, j, 1);
            cut.addTo(model, 'G', 0);
          }
        }
      if (needCuts)
        for (int j = 1; j < K; ++j) {
          MipRow row;
          row.add(used[static_cast<size_t>(j)], 1);
          row.add(z[t][static_cast<size_t>(j)], -1);
          row.addTo(model, 'G', 0);
        }
    }
    // Boundary j lies between stage j (GPU P-1-j) and stage j-1 (GPU P-j).
    auto addBoundaryTime = [&](MipRow &row, int j, double times) {
      if (!needCuts || j < 1 || j >= K)
        return;
      const LinkSpec &link = platform.linkBetween(gpus - 1 - j, gpus - j);
      row.add(used[static_cast<size_t>(j)], times * link.latencyMs);
      if (link.bandwidthBytesPerSecond < kInfinity)
        for (size_t t = 0; t < problem.tensors.size(); ++t)
          row.add(z[t][static_cast<size_t>(j)],
                  times * problem.tensors[t].bytes / link.bandwidthBytesPerSecond * 1e3);
    };
    auto addCompute = [&](MipRow &row, int j) {
      for (int l = 0; l < layers; ++l)
        addX(row, l, j, problem.layers[static_cast<size_t>(l)].workMs() / platform.speedOf(gpus - 1 - j));
    };
    std::vector<int> downstream(static_cast<size_t>(K), -1);
    for (int j = 0; j < K; ++j) {
      MipRow compute;
      addCompute(compute, j);
      compute.add(T, -1);
      compute.addTo(model, 'L', 0);
      if (needCuts) {
        MipRow links;
        addBoundaryTime(links, j + 1, 1);
        addBoundaryTime(links, j, 1);
        links.add(T, -1);
        links.addTo(model, 'L', 0);
      }
      // The span of stage j (from the forward of a micro-batch to its backward):
      // at least its own work and every later stage's, and each boundary's transfer
      // both ways, down[j] >= down[j-1] + compute(j) + 2 transfer(j); held in its
      // min(j + 1, m) copies, at most (j + 1) T.
      if (spans) {
        downstream[static_cast<size_t>(j)] = addColumn("d_" + std::to_string(j), spanCap, false, 0.0);
        MipRow sum; // compute(j) + 2 transfer(j) + down[j-1] - down[j] <= 0
        addCompute(sum, j);
        if (j >= 1) {
          addBoundaryTime(sum, j, 2);
          sum.add(downstream[static_cast<size_t>(j - 1)], 1);
        }
        sum.add(downstream[static_cast<size_t>(j)], -1);
        sum.addTo(model, 'L', 0);
        if (j >= 1 && j + 1 < m) {
          MipRow span;
          span.add(downstream[static_cast<size_t>(j)], 1);
          span.add(T, -(j + 1));
          span.addTo(model, 'L', 0);
        }
      }
      if (limit < kInfinity) {
        const int copies = positionalInFlight(kind == ScheduleKind::GPipe ? ScheduleKind::GPipe
                                                                         : ScheduleKind::OneFOneB,
                                              j + 1, m);
        const int versions = weightVersions(training, copies);
        // Scaled to fractions of the limit: byte-sized coefficients upset CBC's
        // tolerances (it then "proves" non-optimal incumbents). `memory` is what
        // does not grow with the copies, `perCopy` what each copy holds.
        MipRow memory, perCopy;
        for (int l = 0; l < layers; ++l) {
          const Layer &layer = problem.layers[static_cast<size_t>(l)];
          addX(memory, l, j, (training.stateMultiplier + versions - 1) * layer.parameterBytes / limit);
          addX(perCopy, l, j, layer.savedBytes / limit);
        }
        if (training.communicationBuffers)
          for (int boundary : {j, j + 1})
            if (boundary >= 1 && boundary < K)
              for (size_t t = 0; t < problem.tensors.size(); ++t)
                memory.add(z[t][static_cast<size_t>(boundary)],
                           kBuffersPerCutTensor * problem.tensors[t].bytes / limit);
        // The stage's workspace w >= workspace(l) x[l][j]: the largest of its layers'.
        int workspace = -1;
        for (int l = 0; l < layers; ++l) {
          const double bytes = problem.layers[static_cast<size_t>(l)].workspaceBytes / limit;
          if (bytes <= 0)
            continue;
          if (workspace < 0)
            workspace = addColumn("w_" + std::to_string(j), largestWorkspace, false, 0.0);
          MipRow atLeast;
          atLeast.add(workspace, 1);
          addX(atLeast, l, j, -bytes);
          atLeast.addTo(model, 'G', 0);
        }
        if (workspace >= 0)
          memory.add(workspace, 1);
        // held in [0, 1], >= x[l][j] for each of `layers`: stage j holds one of them.
        auto heldIn = [&](const std::vector<int> &sharers) {
          const int held = addColumn("", 1.0, false, 0.0);
          for (int l : sharers) {
            MipRow atLeast;
            atLeast.add(held, 1);
            addX(atLeast, l, j, -1);
            atLeast.addTo(model, 'G', 0);
          }
          return held;
        };
        // A shared saved value: one copy per micro-batch if any keeper is in stage j.
        for (const SharedSaved &value : problem.sharedSaved)
          if (value.bytes > 0)
            perCopy.add(heldIn(value.layers), value.bytes / limit);
        // A shared parameter: weight and gradient in each stage holding a reader,
        // the optimizer state too in the first (the largest j holding one: no
        // reader sits in a stage >= j + 1).
        for (const SharedParameter &value : problem.sharedParameters) {
          if (value.bytes <= 0)
            continue;
          const int owner = addColumn("", 1.0, false, 0.0);
          for (int l : value.layers) {
            MipRow first; // owner >= x[l][j] - sum over readers r of a[r][j+1]
            first.add(owner, 1);
            addX(first, l, j, -1);
            for (int other : value.layers)
              addA(first, other, j + 1, 1);
            first.addTo(model, 'G', 0);
          }
          const double reader = readerStateMultiplier(training);
          memory.add(heldIn(value.layers), (reader + versions - 1) * value.bytes / limit);
          memory.add(owner, (training.stateMultiplier - reader) * value.bytes / limit);
        }
        if (!capped) {
          memory.add(perCopy, copies);
          memory.addTo(model, 'L', 1.0);
        } else {
          // fixed >= memory and each >= perCopy; with y[j][n] = 1, fixed + n each
          // <= 1 and d[j] <= n T (rows that bind only where y[j][n] = 1).
          const int fixed = addColumn("", std::max(0.0, memory.largest(model)), false, 0.0);
          const int each = addColumn("", std::max(0.0, perCopy.largest(model)), false, 0.0);
          memory.add(fixed, -1);
          memory.addTo(model, 'L', 0);
          perCopy.add(each, -1);
          perCopy.addTo(model, 'L', 0);
          MipRow one;
          for (int n = 1; n <= copies; ++n) {
            const int y = addColumn("y_" + std::to_string(j) + "_" + std::to_string(n), 1.0, true, 0.0);
            mip.y[static_cast<size_t>(j)].push_back(y);
            one.add(y, 1);
            const double over = model.upper(fixed) + n * model.upper(each) - 1;
            if (over > 0) {
              MipRow fits;
              fits.add(fixed, 1);
              fits.add(each, n);
              fits.add(y, over);
              fits.addTo(model, 'L', 1 + over);
            }
            if (n < m) {
              MipRow span;
              span.add(downstream[static_cast<size_t>(j)], 1);
              span.add(T, -n);
              span.add(y, spanCap);
              span.addTo(model, 'L', spanCap);
            }
          }
          one.addTo(model, 'E', 1);
        }
      }
    }
    // Where GPUs are alike, a split has one encoding without empty positions
    // between its stages (the others run the same plan, with weaker span rows):
    // on the spans, where the loop cuts splits off one encoding at a time, only it.
    // o[j] >= x[l][j] marks position j used; a used position j needs j - 1 used.
    if (spans && !placed)
      for (int j = 1; j < K; ++j) {
        const int occupied = addColumn("", 1.0, false, 0.0);
        MipRow previous;
        for (int l = 0; l < layers; ++l) {
          MipRow atLeast;
          atLeast.add(occupied, 1);
          addX(atLeast, l, j, -1);
          atLeast.addTo(model, 'G', 0);
          addX(previous, l, j - 1, 1);
        }
        previous.add(occupied, -1);
        previous.addTo(model, 'G', 0);
      }
    // A split cut off: some a[l][j] differs from its value there, or (capped) some
    // used position keeps other copies.
    for (const Split &split : cutOff) {
      MipRow row;
      int ones = 0;
      for (int l = 0; l < layers; ++l)
        for (int j = 1; j < K; ++j) {
          const bool one = split.fromEnd[static_cast<size_t>(l)] >= j;
          addA(row, l, j, one ? 1 : -1);
          ones += one;
        }
      for (size_t j = 0; j < split.copies.size(); ++j)
        if (split.copies[j] > 0) {
          row.add(mip.y[j][static_cast<size_t>(split.copies[j] - 1)], 1);
          ++ones;
        }
      row.addTo(model, 'L', ones - 1);
    }
    Cbc_Model *cbc = mip.owner.get();
    Cbc_setLogLevel(cbc, 0);
    model.load(cbc);
    Cbc_setObjSense(cbc, 1.0);
    Cbc_setColLower(cbc, T, std::min(floorT, belowMs));
    Cbc_setParameter(cbc, "heuristicsOnOff", "off");

    // The MIP start once: later rounds have cut it off or lie below it.
    if (cutOff.empty() && warm.allocation && warm.allocation->numStages() <= K) {
      const Allocation &start = *warm.allocation;
      const int stages = start.numStages();
      std::vector<std::string> names;
      std::vector<double> values;
      names.push_back("T");
      values.push_back(warm.predictedPeriodMs);
      for (int l = 0; l < layers; ++l)
        for (int j = 1; j < K; ++j) {
          names.push_back("a_" + std::to_string(l) + "_" + std::to_string(j));
          values.push_back(stages - 1 - start.stageOfLayer[static_cast<size_t>(l)] >= j ? 1.0 : 0.0);
        }
      detail::setMipStart(cbc, names, values);
    }
    return mip;
  };
  // Stage from the end = number of a[l][j] set; capped, the copies of each used
  // position (0 at the others); renumber used stages from the front.
  auto splitOf = [&](const Mip &mip, const double *solution) {
    Split split;
    std::vector<int> &fromEnd = split.fromEnd;
    fromEnd.assign(problem.layers.size(), 0);
    for (int l = 0; l < layers; ++l)
      for (int j = 1; j < K; ++j)
        if (solution[mip.a[static_cast<size_t>(l)][static_cast<size_t>(j)]] > 0.5)
          fromEnd[static_cast<size_t>(l)] = j;
    if (capped) {
      split.copies.assign(static_cast<size_t>(K), 0);
      for (int j : fromEnd)
        for (size_t n = 0; n < mip.y[static_cast<size_t>(j)].size(); ++n)
          if (solution[mip.y[static_cast<size_t>(j)][n]] > 0.5)
            split.copies[static_cast<size_t>(j)] = static_cast<int>(n) + 1;
    }
    return split;
  };
  auto allocationOf = [&](const Split &split) {
    const std::vector<int> &fromEnd = split.fromEnd;
    std::vector<int> usedStages(fromEnd.begin(), fromEnd.end());
    std::sort(usedStages.begin(), usedStages.end(), std::greater<int>());
    usedStages.erase(std::unique(usedStages.begin(), usedStages.end()), usedStages.end());
    Allocation allocation;
    allocation.stageOfLayer.assign(problem.layers.size(), 0);
    for (size_t l = 0; l < problem.layers.size(); ++l)
      allocation.stageOfLayer[l] = static_cast<int>(
          std::find(usedStages.begin(), usedStages.end(), fromEnd[l]) - usedStages.begin());
    // m copies have no span row: the stage keeps what the generated order keeps
    // (S - s, which may exceed m; a cap of m would slow its pattern).
    const int stages = static_cast<int>(usedStages.size());
    for (int s = 0; s < stages; ++s) {
      allocation.gpuOfStage.push_back(placed ? gpus - 1 - usedStages[static_cast<size_t>(s)] : s);
      if (!split.copies.empty()) {
        const int copies = split.copies[static_cast<size_t>(usedStages[static_cast<size_t>(s)])];
        allocation.inFlightLimit.push_back(copies >= m ? stages - s : copies);
      }
    }
    return allocation;
  };
  auto infeasible = [&] {
    return "ilp: proven infeasible" + detail::withoutRecomputation(problem) +
           ": no DAG-convex split into at most " + std::to_string(K) + " stages fits " +
           formatBytes(limit, problem.platform.byteUnits) + " per GPU";
  };

  if (!spans) {
    // One solve: the MIP's model is the min-max DPs' own.
    Mip mip = build({}, 1e30);
    Cbc_Model *model = mip.owner.get();
    detail::solve(model, deadline);
    if (Cbc_isProvenInfeasible(model)) {
      output.reason = infeasible();
      return output;
    }
    const double *solution = detail::solutionOf(model);
    if (!solution) {
      output.reason = "ilp: no solution within the " +
                      std::to_string(context.options.ilpTimeLimitSeconds) + " s time limit";
      return output;
    }
    output.allocation = allocationOf(splitOf(mip, solution));
    output.predictedPeriodMs = Cbc_getObjValue(model);
    std::ostringstream notes;
    notes << detail::cbcOutcome(model, output.predictedPeriodMs, Cbc_getBestPossibleObjValue(model),
                                output.provenLowerBoundMs)
          << " (" << Cbc_getNumCols(model) << " columns)";
    if (problem.training.recompute != RecomputePolicy::None) {
      notes << detail::withoutRecomputation(problem);
      output.provenLowerBoundMs = 0; // a bound without recomputation, not with it
    }
    output.notes = notes.str();
    plannedOnSpans(output);
    return output;
  }

  // 1F1B on links that take time: the span rows above are what the spans need at
  // least (their work and transfers, no waiting), so on a chain the MIP's T is a
  // lower bound on a split's simulated period (tested; on a DAG a stage need not
  // wait for every later stage, and a tensor is sent once, not once per boundary).
  // The loop simulates each optimum; one slower than its T is cut off and the MIP
  // solved again below the best simulated period, until nothing is left below it
  // (on a chain the incumbent is then the fastest split in simulation of those the
  // memory rows admit), the time limit, or kIlpRounds rounds.
  auto simulated = [&](const Allocation &allocation) {
    try {
      const PlanResult result = evaluateUnderPolicyOrThrow(problem, allocation, kind, context.bounds);
      if (result.valid)
        return result.periodMs;
    } catch (const Error &) {
      // a split the schedule cannot run: cut off like one that does not fit
    }
    return kInfinity;
  };
  // The incumbent, its simulated period, and the period its own model gave it (the
  // start to search its span period from).
  std::optional<Allocation> incumbent;
  double incumbentMs = kInfinity, incumbentT = 0;
  auto offer = [&](const Allocation &allocation, double period, double modelT) {
    if (period < incumbentMs) {
      incumbent = allocation;
      incumbentMs = period;
      incumbentT = modelT;
    }
  };
  if (warm.allocation && warm.allocation->numStages() <= K)
    offer(*warm.allocation, simulated(*warm.allocation), warm.predictedPeriodMs);
  if (spanStart && spanStart->numStages() <= K)
    offer(*spanStart, simulated(*spanStart), spanStartT);
  std::vector<Split> cutOff;
  double firstBound = floorT; // over every split the memory rows admit (the MIP's T)
  bool optimal = false;  // nothing left below the incumbent
  std::string outcome;
  int rounds = 0;
  for (;;) {
    const double below = incumbent ? incumbentMs * (1 - 1e-9) : 1e30;
    if (below <= floorT) {
      optimal = true;
      outcome = "nothing below the bound";
      break;
    }
    Mip mip = build(cutOff, below);
    Cbc_Model *model = mip.owner.get();
    ++rounds;
    detail::solve(model, deadline);
    if (Cbc_isProvenInfeasible(model)) {
      if (incumbent) {
        optimal = true;
        outcome = "no split left below the simulated period";
        break;
      }
      output.reason = cutOff.empty()
                          ? infeasible()
                          : "ilp: none of the " + std::to_string(cutOff.size()) +
                                " splits the MIP admits runs in simulation";
      return output;
    }
    const double *solution = detail::solutionOf(model);
    const bool proven = Cbc_isProvenOptimal(model);
    if (rounds == 1) // nothing cut off yet: a bound over every split
      firstBound = std::max(floorT, std::min(below, proven && solution
                                                   ? solution[mip.T]
                                                   : Cbc_getBestPossibleObjValue(model)));
    if (!solution) {
      outcome = "CBC stopped by its limit";
      break;
    }
    Split split = splitOf(mip, solution);
    const Allocation allocation = allocationOf(split);
    const double modelT = solution[mip.T];
    offer(allocation, simulated(allocation), modelT);
    if (!proven) {
      outcome = "CBC stopped by its limit";
      break;
    }
    if (incumbent && incumbentMs <= modelT * (1 + 1e-9)) {
      optimal = true;
      outcome = "no split left below the simulated period";
      break;
    }
    cutOff.push_back(std::move(split));
    // CBC keeps a tenth of the limit for its clean-up (setTimeLimit).
    if (rounds >= kIlpRounds ||
        deadline.remainingSeconds() <= 0.1 * deadline.limitSeconds()) {
      outcome = "stopped after " + std::to_string(rounds) + " rounds";
      break;
    }
  }
  if (!incumbent) {
    output.reason = "ilp: no split that runs within the " +
                    std::to_string(context.options.ilpTimeLimitSeconds) + " s time limit (" +
                    outcome + ")";
    return output;
  }
  output.allocation = *incumbent;
  // Planned as madpipe plans: the span model with port slots along its stages.
  const double own = detail::spanPeriodOf(problem, *incumbent, incumbentT);
  output.predictedPeriodMs = own < kInfinity ? own : incumbentT;
  // On a chain, T bounds the simulated period: where the loop ended with nothing
  // below its incumbent, that is the bound. On a DAG no bound is claimed.
  const bool chain = problem.isChain();
  output.provenLowerBoundMs =
      !chain ? 0 : optimal ? incumbentMs : std::min(firstBound, incumbentMs);
  char text[240];
  std::snprintf(text, sizeof text, "%s after %d MIP solve%s: simulated %.3f ms, ", outcome.c_str(),
                rounds, rounds == 1 ? "" : "s", incumbentMs);
  std::ostringstream notes;
  notes << text;
  if (chain) {
    std::snprintf(text, sizeof text, "bound %.3f ms over every split its memory rows admit (%s; the first solve's %.3f ms)",
                  output.provenLowerBoundMs,
                  capped ? "with the copies of its spans, each held to them"
                         : "1F1B's position rule",
                  std::min(firstBound, incumbentMs));
    notes << text;
  } else {
    notes << "the fastest the loop found (on a DAG the span rows bound no simulated period)";
  }
  if (problem.training.recompute != RecomputePolicy::None) {
    notes << detail::withoutRecomputation(problem);
    output.provenLowerBoundMs = 0; // a bound without recomputation, not with it
  }
  output.notes = notes.str();
  return output;
}

std::unique_ptr<Algorithm> makeIlpAlgorithm() { return std::make_unique<IlpAlgorithm>(); }

bool haveMipSolver() { return true; }

} // namespace partitioner
