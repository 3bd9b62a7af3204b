// pipe-plan: plan pipelined model-parallel training from a problem JSON or a
// PipeDream/DAPPLE graph.txt profile. Prints the table; writes plan/trace/SVG files.
#include "partitioner/Algorithm.h"
#include "partitioner/KPeriodic.h"
#include "partitioner/Error.h"
#include "partitioner/Problem.h"
#include "partitioner/Output.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Schedule.h"
#include "partitioner/Error.h"
#include "partitioner/Output.h"
#include "partitioner/Planner.h"
#include "partitioner/Problem.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iomanip>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <fstream>
#include <iostream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

using namespace partitioner;

namespace {

const char *kUsage =
    "usage: pipe-plan PROFILE [options]\n"
    "  PROFILE                 problem JSON (*.json) or PipeDream/DAPPLE graph.txt\n"
    "  --stages N              GPUs in the pipeline (alias --gpus)\n"
    "  --gpus G --stages S     G/S data-parallel replicas of an S-stage pipeline (S = auto:\n"
    "                          the split of G with the shortest iteration); each replica\n"
    "                          runs M / replicas micro-batches, each stage's replicas\n"
    "                          all-reduce its gradients once per iteration\n"
    "  --layout L              with replicas, the one layout tried: pipeline-major or\n"
    "                          stage-major (default: both)\n"
    "  --microbatches M        micro-batches per iteration\n"
    "  --memory SIZE           memory per GPU, e.g. 16GB, 80GiB, inf\n"
    "  --algo NAMES            best (default), all (best + ilp), or a comma list; see\n"
    "                          --list-algorithms (ilp-general: general allocations)\n"
    "  --schedule KIND         gpipe | 1f1b (default) | interleaved | 1f1b-stash | zb-h1 | periodic\n"
    "  --require-schedule      only plans of the problem's schedule (--schedule) compete\n"
    "                          for the best (pipe-opt --schedule=KIND); others are reported\n"
    "  --weights POLICY        default | single | double | stash (weight versions)\n"
    "  --recompute POLICY      none (default) | auto | all: stages that recompute their\n"
    "                          forward in the backward (auto: only where a stage would\n"
    "                          not fit otherwise)\n"
    "  --state-multiplier X    bytes per parameter byte for weights+grads+optimizer (4)\n"
    "  --bandwidth BW          intra-node link bandwidth, e.g. 25GB/s, 100Gb/s, inf\n"
    "  --inter-bandwidth BW    inter-node link bandwidth\n"
    "  --latency-ms X          link latency (both link classes)\n"
    "  --gpus-per-node N       GPUs per node (8)\n"
    "  --speed a,b,...         relative speed of each GPU (heterogeneous GPUs)\n"
    "  --chunks V              virtual stages per GPU for the interleaved algorithm (2)\n"
    "  --no-comm-buffers       do not count communication buffers in memory\n"
    "  --reference-model       infinite bandwidth, no latency, no buffers (the model of\n"
    "                          the public reference figures)\n"
    "  --max-downsets N        DAG-aware cuts when the graph has at most N downsets (20000)\n"
    "  --no-dag                plan on one topological order only\n"
    "  --no-boundary-moves     keep the chosen plan as its algorithm made it (by\n"
    "                          default one-layer boundary moves improve it)\n"
    "  --no-block-moves        best does not move blocks of layers of its chosen plan\n"
    "                          to other GPUs (by default it tries, as block-moves)\n"
    "  --no-k-periodic-orders  best does not search k-periodic orders of its chosen\n"
    "                          plan when memory keeps a stage below 1F1B's counts\n"
    "  --general-bound S       after choosing, prove within S seconds (CBC) a lower bound\n"
    "                          over every general allocation, up to the chosen period\n"
    "                          (reported as the bound 'every general allocation')\n"
    "  --time-limit S          time limit of the ilp and ilp-general MIP solvers and of\n"
    "                          madpipe-span's search over the period (10)\n"
    "  --threads N             algorithms of best / all run at once (0, the default: one\n"
    "                          per core; 1: one after the other)\n"
    "  --objective KIND        period (default) | iteration: what best minimises first\n"
    "  --json FILE             write the plan JSON (the same bytes for the same input)\n"
    "  --replay PLAN.json      simulate the plan PLAN.json describes on PROFILE and check\n"
    "                          its period, iteration time and per-stage memory and time\n"
    "  --trace FILE            write a Chrome/Perfetto trace of the chosen plan\n"
    "  --svg FILE              write an SVG Gantt chart of the chosen plan\n"
    "  --write-problem FILE    write the problem JSON (e.g. converted from graph.txt)\n"
    "  --list-algorithms       list algorithms and exit\n"
    "  --k-periodic K          for the chosen plan (one stage per GPU, 1F1B), the best\n"
    "                          orders whose steady state repeats k micro-batches, for\n"
    "                          each k = 1..K (at most 4), under the memory limit\n"
    "  --timings               add each algorithm's planning time to the table and JSON\n"
    "  --quiet                 do not print the table\n"
    "Exit status: 0 with a plan, 1 when the input has no valid plan or cannot be read,\n"
    "2 on a usage error (unknown option, bad option value).\n";

/// A mistake in the command line (exit status 2), as opposed to bad input (1).
class UsageError : public Error {
public:
  using Error::Error;
};

std::vector<std::string> splitComma(const std::string &text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ','))
    if (!item.empty())
      parts.push_back(item);
  return parts;
}

long long parseInteger(const std::string &option, const std::string &value, long long min,
                       long long max) {
  size_t used = 0;
  long long result = 0;
  try {
    result = std::stoll(value, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  if (used != value.size() || value.empty())
    throw UsageError(option + " expects an integer, got '" + value + "'");
  if (result < min || result > max)
    throw UsageError(option + " must be in " + std::to_string(min) + ".." + std::to_string(max) +
                     ", got " + value);
  return result;
}

int parseInt(const std::string &option, const std::string &value, int min, int max) {
  return static_cast<int>(parseInteger(option, value, min, max));
}

/// A finite number in [min, max].
double parseDouble(const std::string &option, const std::string &value, double min,
                   double max) {
  size_t used = 0;
  double result = 0;
  try {
    result = std::stod(value, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  if (used != value.size() || value.empty() || !std::isfinite(result))
    throw UsageError(option + " expects a finite number, got '" + value + "'");
  if (result < min || result > max) {
    std::ostringstream range;
    range << option << " must be in " << min << ".." << max << ", got " << value;
    throw UsageError(range.str());
  }
  return result;
}

/// A size or bandwidth option value; its errors are usage errors.
double parseScaledOption(const std::string &option, const std::string &value, bool bandwidth) {
  try {
    return orThrow(bandwidth ? parseBandwidth(value) : parseBytes(value));
  } catch (const Error &error) {
    throw UsageError(option + ": " + error.what());
  }
}

/// Writes a file atomically: a temporary file next to it, renamed over it only
/// once every byte is written, so a failed run leaves no partial file behind
/// (and the previous file, if any, untouched).
void writeFile(const std::string &path, const std::string &what,
               const std::function<void(std::ostream &)> &write) {
  std::ostringstream text;
  write(text);
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out)
      throw Error("cannot write " + what + " to '" + path + "': " + std::strerror(errno));
    out << text.str();
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      throw Error("error while writing " + what + " to '" + path + "' (disk full?)");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw Error("cannot write " + what + " to '" + path + "': " + reason);
  }
}

/// The best k-periodic orders of the chosen plan for k = 1..maxK, one row each.
void writeKPeriodicTable(const Problem &problem, const PlanResult &plan, int maxK,
                         std::ostream &out) {
  out << "\nk-periodic orders of the chosen plan (period: marginal time of a micro-batch, "
         "m = 12 and 24)\n";
  if (!plan.allocation.oneStagePerGpu() || (plan.scheduleKind != ScheduleKind::OneFOneB &&
                                            plan.scheduleKind != ScheduleKind::OneFOneBStash)) {
    out << "not searched: the plan is not 1F1B with one stage per GPU\n";
    return;
  }
  double onePeriodic = kInfinity;
  for (int k = 1; k <= maxK; ++k) {
    const auto start = std::chrono::steady_clock::now();
    const WordScheduleResult result = bestWordSchedule(problem, plan.allocation, k);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (k == 1)
      onePeriodic = result.periodMs;
    std::ostringstream line;
    line << "k = " << k << ": ";
    if (result.orders.empty()) {
      line << "no order fits";
    } else {
      line << std::fixed << std::setprecision(3) << result.periodMs << " ms";
      if (k > 1 && onePeriodic < kInfinity)
        line << " (" << std::setprecision(1) << 100 * (result.periodMs / onePeriodic - 1)
             << " % vs k = 1)";
      line << ", orders";
      for (const StageOrder &order : result.orders)
        line << " " << order.warmup << ":" << order.word;
    }
    line << "; " << result.evaluated << " evaluated in " << std::setprecision(2) << seconds << " s";
    out << line.str() << "\n";
  }
}

/// Standard output must take every byte (a full disk or a closed pipe is an error).
void checkStandardOutput() {
  std::cout.flush();
  if (!std::cout)
    throw Error("cannot write to standard output");
}

int run(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  std::string profile, jsonPath, tracePath, svgPath, problemPath, replayPath;
  PlanOptions options;
  bool quiet = false, timings = false;
  int kPeriodic = 0;
  std::vector<ReplicaLayout> layouts = {ReplicaLayout::PipelineMajor, ReplicaLayout::StageMajor};
  bool layoutGiven = false;
  std::vector<std::pair<std::string, std::string>> overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size())
        throw UsageError(arg + " needs a value");
      return args[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--list-algorithms") {
      std::string outside;
      for (const auto &algorithm : algorithmRegistry()) {
        std::cout << algorithm->name() << ": " << algorithm->summary() << "\n";
        if (!algorithm->partOfBest())
          outside += (outside.empty() ? "" : ", ") + algorithm->name();
      }
      std::cout << "best: run every algorithm above" << (outside.empty() ? "" : " but " + outside)
                << " (ilp and ilp-general only on small models), keep the best valid plan\n";
      return 0;
    } else if (arg == "--algo" || arg == "--algorithm") {
      options.algorithms = splitComma(value());
      if (options.algorithms.empty())
        throw UsageError("--algo expects a comma list of algorithms");
      for (const std::string &name : options.algorithms)
        if (name != "best" && name != "all" && !findAlgorithm(name))
          throw UsageError("unknown algorithm '" + name + "' (see --list-algorithms)");
    } else if (arg == "--replay") {
      replayPath = value();
    } else if (arg == "--json") {
      jsonPath = value();
    } else if (arg == "--trace") {
      tracePath = value();
    } else if (arg == "--svg") {
      svgPath = value();
    } else if (arg == "--write-problem") {
      problemPath = value();
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (arg == "--layout") {
      const std::string text = value();
      try {
        layouts = {orThrow(parseReplicaLayout(text))};
      } catch (const Error &error) {
        throw UsageError(std::string("--layout: ") + error.what());
      }
      layoutGiven = true;
    } else if (arg == "--k-periodic") {
      kPeriodic = parseInt(arg, value(), 1, 4);
    } else if (arg == "--timings") {
      timings = true;
    } else if (arg == "--require-schedule") {
      options.requireSchedule = true;
    } else if (arg == "--no-dag") {
      options.dagAware = false;
    } else if (arg == "--no-boundary-moves") {
      options.improveByBoundaryMoves = false;
    } else if (arg == "--no-block-moves") {
      options.improveByBlockMoves = false;
    } else if (arg == "--no-k-periodic-orders") {
      options.improveByKPeriodicOrders = false;
    } else if (arg == "--objective") {
      const std::string objective = value();
      try {
        options.objective = orThrow(parseObjective(objective));
      } catch (const Error &error) {
        throw UsageError(std::string("--objective: ") + error.what());
      }
    } else if (arg == "--threads") {
      options.threads = static_cast<int>(parseInteger(arg, value(), 0, 1024));
    } else if (arg == "--general-bound") {
      options.generalBoundSeconds = parseDouble(arg, value(), 0.001, 86400);
    } else if (arg == "--time-limit") {
      options.ilpTimeLimitSeconds = parseDouble(arg, value(), 0.001, 86400);
    } else if (arg == "--max-downsets") {
      options.maxDownsets = static_cast<size_t>(parseInteger(arg, value(), 0, 1000000000));
    } else if (arg == "--no-comm-buffers" || arg == "--reference-model") {
      overrides.emplace_back(arg, "");
    } else if (arg == "--stages" || arg == "--gpus" || arg == "--microbatches" ||
               arg == "--memory" || arg == "--schedule" || arg == "--weights" ||
               arg == "--recompute" ||
               arg == "--state-multiplier" || arg == "--bandwidth" ||
               arg == "--inter-bandwidth" || arg == "--latency-ms" ||
               arg == "--gpus-per-node" || arg == "--speed" || arg == "--chunks") {
      overrides.emplace_back(arg, value());
    } else if (!arg.empty() && arg[0] == '-') {
      throw UsageError("unknown option '" + arg + "' (see --help)");
    } else if (profile.empty()) {
      profile = arg;
    } else {
      throw UsageError("unexpected argument '" + arg + "': only one PROFILE is accepted");
    }
  }
  if (profile.empty())
    throw UsageError("no PROFILE given (see --help)");
  // --gpus G with --stages S (or auto) different from G asks for replicas.
  std::string stagesText, gpusText;
  for (const auto &[option, text] : overrides) {
    if (option == "--stages")
      stagesText = text;
    else if (option == "--gpus")
      gpusText = text;
  }
  bool replicas = false;
  std::vector<int> stageCounts;
  if (stagesText == "auto" || (!stagesText.empty() && !gpusText.empty() && stagesText != gpusText)) {
    if (gpusText.empty())
      throw UsageError("--stages auto needs --gpus G (the GPUs to split into replicas x stages)");
    const int gpus = parseInt("--gpus", gpusText, 1, kMaxGpus);
    if (stagesText != "auto") {
      const int stages = parseInt("--stages", stagesText, 1, kMaxGpus);
      if (gpus % stages != 0)
        throw UsageError("--stages " + stagesText + " does not divide --gpus " + gpusText +
                         " into replicas");
      stageCounts.push_back(stages);
    }
    replicas = true;
    overrides.erase(std::remove_if(overrides.begin(), overrides.end(),
                                   [](const auto &o) { return o.first == "--stages"; }),
                    overrides.end());
  }
  if (layoutGiven && !replicas)
    throw UsageError("--layout is for replicas: give --gpus G with --stages S or auto");
  // Every option value is checked before the profile is read: usage errors first.
  std::vector<std::function<void(Problem &)>> apply;
  for (const auto &[option, text] : overrides) {
    if (option == "--stages" || option == "--gpus") {
      int gpus = parseInt(option, text, 1, kMaxGpus);
      apply.push_back([=](Problem &p) { p.platform.gpus = gpus; });
    } else if (option == "--microbatches") {
      int microbatches = parseInt(option, text, 1, kMaxMicrobatches);
      apply.push_back([=](Problem &p) { p.training.microbatches = microbatches; });
    } else if (option == "--memory") {
      double bytes = parseScaledOption(option, text, false);
      apply.push_back([=](Problem &p) { p.platform.memoryBytesPerGpu = bytes; });
    } else if (option == "--schedule") {
      ScheduleKind kind;
      try {
        kind = orThrow(parseScheduleKind(text));
      } catch (const Error &error) {
        throw UsageError(error.what());
      }
      apply.push_back([=](Problem &p) { p.training.schedule = kind; });
    } else if (option == "--weights") {
      WeightPolicy policy;
      try {
        policy = orThrow(parseWeightPolicy(text));
      } catch (const Error &error) {
        throw UsageError(error.what());
      }
      apply.push_back([=](Problem &p) { p.training.weights = policy; });
    } else if (option == "--recompute") {
      RecomputePolicy policy;
      try {
        policy = orThrow(parseRecomputePolicy(text));
      } catch (const Error &error) {
        throw UsageError(error.what());
      }
      apply.push_back([=](Problem &p) { p.training.recompute = policy; });
    } else if (option == "--state-multiplier") {
      double multiplier = parseDouble(option, text, 1, 1e6);
      apply.push_back([=](Problem &p) { p.training.stateMultiplier = multiplier; });
    } else if (option == "--bandwidth") {
      double bandwidth = parseScaledOption(option, text, true);
      apply.push_back([=](Problem &p) { p.platform.intraNode.bandwidthBytesPerSecond = bandwidth; });
    } else if (option == "--inter-bandwidth") {
      double bandwidth = parseScaledOption(option, text, true);
      apply.push_back([=](Problem &p) { p.platform.interNode.bandwidthBytesPerSecond = bandwidth; });
    } else if (option == "--latency-ms") {
      double latency = parseDouble(option, text, 0, 1e6);
      apply.push_back([=](Problem &p) {
        p.platform.intraNode.latencyMs = p.platform.interNode.latencyMs = latency;
      });
    } else if (option == "--gpus-per-node") {
      int perNode = parseInt(option, text, 1, kMaxGpus);
      apply.push_back([=](Problem &p) { p.platform.gpusPerNode = perNode; });
    } else if (option == "--chunks") {
      int chunks = parseInt(option, text, 1, kMaxInterleaveChunks);
      apply.push_back([=](Problem &p) { p.training.interleaveChunks = chunks; });
    } else if (option == "--speed") {
      std::vector<double> speed;
      for (const std::string &item : splitComma(text))
        speed.push_back(parseDouble(option, item, 1e-6, 1e6));
      if (speed.empty())
        throw UsageError("--speed expects a comma list of numbers, got '" + text + "'");
      apply.push_back([=](Problem &p) { p.platform.speed = speed; });
    } else if (option == "--no-comm-buffers") {
      apply.push_back([](Problem &p) { p.training.communicationBuffers = false; });
    } else if (option == "--reference-model") {
      apply.push_back([](Problem &p) {
        p.training.communicationBuffers = false;
        p.platform.intraNode = LinkSpec{kInfinity, 0};
        p.platform.interNode = LinkSpec{kInfinity, 0};
      });
    }
  }
  Problem problem = orThrow(readProblemFile(profile));
  for (const auto &change : apply)
    change(problem);
  orThrow(problem.finalize());
  if (!problemPath.empty())
    writeFile(problemPath, "the problem", [&](std::ostream &out) { writeProblemJson(problem, out); });
  if (!replayPath.empty()) {
    std::ifstream in(replayPath);
    if (!in)
      throw Error("cannot open '" + replayPath + "'");
    std::stringstream text;
    text << in.rdbuf();
    ReplayCheck check = orThrow(replayPlan(problem, text.str()));
    std::cout << "replayed " << replayPath << ": period " << check.replayed.periodMs
              << " ms, iteration " << check.replayed.iterationMs << " ms, "
              << check.replayed.stages.size() << " stages\n";
    for (const std::string &line : check.mismatches)
      std::cout << "mismatch: " << line << "\n";
    std::cout << (check.ok() ? "replay matches the plan\n" : "replay differs from the plan\n");
    checkStandardOutput();
    return check.ok() ? 0 : 1;
  }
  if (replicas) {
    ReplicaReport report = orThrow(planReplicas(problem, stageCounts, options, layouts));
    if (!quiet) {
      writeReplicaTable(report, std::cout, timings);
      checkStandardOutput();
    }
    if (!jsonPath.empty())
      writeFile(jsonPath, "the plan",
                [&](std::ostream &out) { writeReplicaPlanJson(report, out, timings); });
    const ReplicaPlan *best = report.best();
    if (!best) {
      std::cerr << "pipe-plan: no split of the " << report.gpus
                << " GPUs into replicas has a valid plan\n";
      return 1;
    }
    const PlanResult &pipeline = *best->pipeline.best();
    if (!tracePath.empty())
      writeFile(tracePath, "the trace",
                [&](std::ostream &out) { writeTraceJson(best->pipelineProblem, pipeline, out); });
    if (!svgPath.empty())
      writeFile(svgPath, "the SVG",
                [&](std::ostream &out) { writeSvg(best->pipelineProblem, pipeline, out); });
    return 0;
  }
  PlanningReport report = planOrThrow(problem, options);
  if (!quiet) {
    writeTable(problem, report, std::cout, timings);
    checkStandardOutput();
  }
  if (!jsonPath.empty())
    writeFile(jsonPath, "the plan",
              [&](std::ostream &out) { writePlanJson(problem, report, out, timings); });
  const PlanResult *best = report.best();
  if (best && kPeriodic > 0) {
    writeKPeriodicTable(problem, *best, kPeriodic, std::cout);
    checkStandardOutput();
  }
  if (best) {
    if (!tracePath.empty())
      writeFile(tracePath, "the trace", [&](std::ostream &out) { writeTraceJson(problem, *best, out); });
    if (!svgPath.empty())
      writeFile(svgPath, "the SVG", [&](std::ostream &out) { writeSvg(problem, *best, out); });
    return 0;
  }
  std::cerr << "pipe-plan: " << noPlanReason(report) << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  partitioner::reuseFreedMemory();
  try {
    return run(argc, argv);
  } catch (const UsageError &error) {
    std::cerr << "pipe-plan: error: " << error.what() << "\n";
    return 2;
  } catch (const Error &error) {
    std::cerr << "pipe-plan: error: " << error.what() << "\n";
    return 1;
  } catch (const std::bad_alloc &) {
    std::cerr << "pipe-plan: error: out of memory while planning\n";
    return 1;
  } catch (const std::exception &error) {
    std::cerr << "pipe-plan: internal error: " << error.what() << "\n";
    return 3;
  }
}
