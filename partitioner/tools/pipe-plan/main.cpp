// pipe-plan: plan pipelined model-parallel training from a problem JSON or a
// PipeDream/DAPPLE graph.txt profile. Prints the table; writes plan/trace/SVG files.
#include "partitioner/Error.h"
#include "partitioner/GraphText.h"
#include "partitioner/Output.h"
#include "partitioner/Replay.h"
#include "partitioner/Planner.h"
#include "partitioner/ProblemJson.h"

#include <cstdlib>
#include <functional>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace partitioner;

namespace {

const char *kUsage =
    "usage: pipe-plan PROFILE [options]\n"
    "  PROFILE                 problem JSON (*.json) or PipeDream/DAPPLE graph.txt\n"
    "  --stages N              GPUs in the pipeline (alias --gpus)\n"
    "  --microbatches M        micro-batches per iteration\n"
    "  --memory SIZE           memory per GPU, e.g. 16GB, 80GiB, inf\n"
    "  --algo NAMES            best (default), all (best + ilp), or a comma list; see\n"
    "                          --list-algorithms (ilp-general: general allocations)\n"
    "  --schedule KIND         gpipe | 1f1b (default) | interleaved | 1f1b-stash | zb-h1 | periodic\n"
    "  --weights POLICY        default | single | double | stash (weight versions)\n"
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
    "  --time-limit S          time limit of the ilp and ilp-general MIP solvers (10)\n"
    "  --objective KIND        period (default) | iteration: what best minimises first\n"
    "  --json FILE             write the plan JSON\n"
    "  --replay PLAN.json      simulate the plan PLAN.json describes on PROFILE and check\n"
    "                          its period, iteration time and per-stage memory and time\n"
    "  --trace FILE            write a Chrome/Perfetto trace of the chosen plan\n"
    "  --svg FILE              write an SVG Gantt chart of the chosen plan\n"
    "  --write-problem FILE    write the problem JSON (e.g. converted from graph.txt)\n"
    "  --list-algorithms       list algorithms and exit\n"
    "  --quiet                 do not print the table\n";

std::vector<std::string> splitComma(const std::string &text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ','))
    if (!item.empty())
      parts.push_back(item);
  return parts;
}

int parseInt(const std::string &option, const std::string &value) {
  size_t used = 0;
  int result = 0;
  try {
    result = std::stoi(value, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  if (used != value.size() || value.empty())
    throw Error(option + " expects an integer, got '" + value + "'");
  return result;
}

double parseDouble(const std::string &option, const std::string &value) {
  size_t used = 0;
  double result = 0;
  try {
    result = std::stod(value, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  if (used != value.size() || value.empty())
    throw Error(option + " expects a number, got '" + value + "'");
  return result;
}

void writeFile(const std::string &path, const std::string &what,
               const std::function<void(std::ostream &)> &write) {
  std::ofstream out(path);
  if (!out)
    throw Error("cannot write " + what + " to '" + path + "'");
  write(out);
  if (!out)
    throw Error("error while writing " + what + " to '" + path + "'");
}

int run(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  std::string profile, jsonPath, tracePath, svgPath, problemPath, replayPath;
  PlanOptions options;
  bool quiet = false;
  std::vector<std::pair<std::string, std::string>> overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size())
        throw Error(arg + " needs a value");
      return args[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--list-algorithms") {
      for (const auto &algorithm : algorithmRegistry())
        std::cout << algorithm->name() << ": " << algorithm->summary() << "\n";
      std::cout << "best: run every algorithm above (ilp and ilp-general only on small models), "
                   "keep the best valid plan\n";
      return 0;
    } else if (arg == "--algo" || arg == "--algorithm") {
      options.algorithms = splitComma(value());
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
    } else if (arg == "--no-dag") {
      options.dagAware = false;
    } else if (arg == "--objective") {
      options.objective = parseObjective(value());
    } else if (arg == "--time-limit") {
      options.ilpTimeLimitSeconds = parseDouble(arg, value());
    } else if (arg == "--max-downsets") {
      options.maxDownsets = static_cast<size_t>(parseInt(arg, value()));
    } else if (arg == "--no-comm-buffers" || arg == "--reference-model") {
      overrides.emplace_back(arg, "");
    } else if (arg == "--stages" || arg == "--gpus" || arg == "--microbatches" ||
               arg == "--memory" || arg == "--schedule" || arg == "--weights" ||
               arg == "--state-multiplier" || arg == "--bandwidth" ||
               arg == "--inter-bandwidth" || arg == "--latency-ms" ||
               arg == "--gpus-per-node" || arg == "--speed" || arg == "--chunks") {
      overrides.emplace_back(arg, value());
    } else if (!arg.empty() && arg[0] == '-') {
      throw Error("unknown option '" + arg + "' (see --help)");
    } else if (profile.empty()) {
      profile = arg;
    } else {
      throw Error("unexpected argument '" + arg + "': only one PROFILE is accepted");
    }
  }
  if (profile.empty())
    throw Error("no PROFILE given (see --help)");
  Problem problem = readProblemFile(profile);
  for (const auto &[option, text] : overrides) {
    if (option == "--stages" || option == "--gpus")
      problem.platform.gpus = parseInt(option, text);
    else if (option == "--microbatches")
      problem.training.microbatches = parseInt(option, text);
    else if (option == "--memory")
      problem.platform.memoryBytesPerGpu = parseBytes(text);
    else if (option == "--schedule")
      problem.training.schedule = parseScheduleKind(text);
    else if (option == "--weights")
      problem.training.weights = parseWeightPolicy(text);
    else if (option == "--state-multiplier")
      problem.training.stateMultiplier = parseDouble(option, text);
    else if (option == "--bandwidth")
      problem.platform.intraNode.bandwidthBytesPerSecond = parseBandwidth(text);
    else if (option == "--inter-bandwidth")
      problem.platform.interNode.bandwidthBytesPerSecond = parseBandwidth(text);
    else if (option == "--latency-ms")
      problem.platform.intraNode.latencyMs = problem.platform.interNode.latencyMs =
          parseDouble(option, text);
    else if (option == "--gpus-per-node")
      problem.platform.gpusPerNode = parseInt(option, text);
    else if (option == "--chunks")
      problem.training.interleaveChunks = parseInt(option, text);
    else if (option == "--speed") {
      problem.platform.speed.clear();
      for (const std::string &item : splitComma(text))
        problem.platform.speed.push_back(parseDouble(option, item));
    } else if (option == "--no-comm-buffers") {
      problem.training.communicationBuffers = false;
    } else if (option == "--reference-model") {
      problem.training.communicationBuffers = false;
      problem.platform.intraNode = LinkSpec{kInfinity, 0};
      problem.platform.interNode = LinkSpec{kInfinity, 0};
    }
  }
  problem.finalize();
  if (!problemPath.empty())
    writeFile(problemPath, "the problem", [&](std::ostream &out) { writeProblemJson(problem, out); });
  if (!replayPath.empty()) {
    std::ifstream in(replayPath);
    if (!in)
      throw Error("cannot open '" + replayPath + "'");
    std::stringstream text;
    text << in.rdbuf();
    ReplayCheck check = replayPlan(problem, text.str());
    std::cout << "replayed " << replayPath << ": period " << check.replayed.periodMs
              << " ms, iteration " << check.replayed.iterationMs << " ms, "
              << check.replayed.stages.size() << " stages\n";
    for (const std::string &line : check.mismatches)
      std::cout << "mismatch: " << line << "\n";
    std::cout << (check.ok() ? "replay matches the plan\n" : "replay differs from the plan\n");
    return check.ok() ? 0 : 1;
  }
  PlanningReport report = plan(problem, options);
  if (!quiet)
    writeTable(problem, report, std::cout);
  if (!jsonPath.empty())
    writeFile(jsonPath, "the plan", [&](std::ostream &out) { writePlanJson(problem, report, out); });
  const PlanResult *best = report.best();
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
  try {
    return run(argc, argv);
  } catch (const Error &error) {
    std::cerr << "pipe-plan: error: " << error.what() << "\n";
    return 1;
  } catch (const std::exception &error) {
    std::cerr << "pipe-plan: internal error: " << error.what() << "\n";
    return 3;
  }
}
