//===- main.cpp - pipe-run: train a pipe-opt output directory --------------===//
//
//   pipe-run OUT [--steps N] [--seed S] [--transport threads|mpi] [--data FILE.npz]
//                [--timeout SECONDS] [--save-weights FILE.npz] [--save-grads FILE.npz]
//                [--trace FILE] [--model FILE] [--summary FILE] [--write-profile FILE]
//                [--no-pin] [--backend cpu|cuda|emulated] [--emulated-memory MIB]
//                [--random-params] [--replicas R]
//
// Compiles and loads OUT/rankK.cpp, runs the steps (threads in this process, or
// one rank per MPI process), prints the loss per step, then memory and period
// beside the plan's predictions, and writes the measured trace, measured.json
// and, when asked, the per-node profile (docs/runtime.md). --replicas R runs R
// data-parallel copies of the pipeline on R times its ranks (docs/runtime.md,
// "Replicas"). Any error: one line
// "pipe-run: error: ..." and exit 1.
//
//===----------------------------------------------------------------------===//
#include "DataSource.h"
#include "Mpi.h"
#include "Npz.h"
#include "ProgramInfo.h"
#include "RankLoader.h"
#include "Report.h"
#include "Run.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <unistd.h>

using namespace piperun;

namespace {

struct Options {
  std::string out;
  int64_t steps = 10;
  uint64_t seed = 0;
  std::string transport; ///< "" = mpi under an MPI launcher, else threads
  std::string data, saveWeights, saveGrads, trace, model;
  std::string summary; ///< "" = OUT/measured.json
  std::string profile; ///< --write-profile; "" = none
  double timeout = 60;
  bool pin = true; ///< --no-pin: rank threads wherever the system puts them
  bool randomParams = false; ///< --random-params: parameters from the seed, not the model
  Backend backend = Backend::Cpu;
  int64_t emulatedMiB = 4096; ///< --emulated-memory: each emulated device's memory
  int replicas = 0; ///< --replicas: data-parallel copies of the pipeline (0: program.json's)
};

const char *const kUsage =
    "usage: pipe-run OUT [--steps N] [--seed S] [--transport threads|mpi] [--data FILE.npz]\n"
    "                [--timeout SECONDS] [--save-weights FILE.npz] [--save-grads FILE.npz]\n"
    "                [--trace FILE] [--model FILE] [--summary FILE] [--write-profile FILE]\n"
    "                [--no-pin] [--backend cpu|cuda|emulated] [--emulated-memory MIB]\n"
    "                [--random-params] [--replicas R]\n";

/// How long MPI replicas wait for replica 0's processes to compile the programs.
constexpr int kBuildSeconds = 3600;

/// Under mpirun every process would print the same start-up error: only the
/// first does.
bool firstProcess() {
  for (const char *name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (const char *value = std::getenv(name))
      return std::atoi(value) == 0;
  return true;
}

[[noreturn]] void die(const std::string &message) {
  if (firstProcess())
    std::fprintf(stderr, "pipe-run: error: %s\n", message.c_str());
  std::fflush(stdout);
  std::exit(1);
}

/// Set for the second run: the kernels OpenBLAS chose itself.
constexpr const char *kBlasReplaced = "PIPE_RUN_BLAS_REPLACED";

/// ", OpenBLAS's K kernels" and, where pipe-run asked for them, why.
std::string blasLine() {
  std::string line = ", OpenBLAS's " + blasKernels() + " kernels";
  if (const char *replaced = std::getenv(kBlasReplaced))
    line += std::string(" (OPENBLAS_CORETYPE set by pipe-run: the library took this CPU for a ") +
            replaced + ")";
  return line;
}

/// ", backend B" for a device backend (the CPU backend says nothing).
/// ", parameters drawn from the seed" under --random-params.
std::string parametersLine(const RunSettings &settings) {
  return settings.randomParameters
             ? ", parameters drawn from the seed (--random-params: the model's values unread)"
             : "";
}

std::string backendLine(Backend backend) {
  if (backend == Backend::Cpu)
    return "";
  return std::string(", backend ") + backendName(backend) +
         " (kernels without a device implementation run on the host, staged)";
}

/// Runs pipe-run again with OPENBLAS_CORETYPE set where OpenBLAS took this CPU
/// for an SSE-only one (betterBlasKernels): its kernels are read when the
/// library loads, before main. On failure this run goes on with them.
void askForBetterBlasKernels(char **argv) {
  const std::string kernels = betterBlasKernels();
  if (kernels.empty())
    return;
  // The run's first line says so (blasLine).
  setenv(kBlasReplaced, blasKernels().c_str(), 1);
  setenv("OPENBLAS_CORETYPE", kernels.c_str(), 1);
  execv("/proc/self/exe", argv);
  const int error = errno;
  unsetenv(kBlasReplaced);
  unsetenv("OPENBLAS_CORETYPE");
  if (firstProcess())
    std::fprintf(stderr, "pipe-run: warning: could not run again with OpenBLAS's %s kernels (%s); "
                 "GEMMs use its %s kernels\n",
                 kernels.c_str(), std::strerror(error), blasKernels().c_str());
}

/// An option error: exit status 2, as pipe-opt and pipe-plan use for usage.
[[noreturn]] void usageError(const std::string &message) {
  if (firstProcess())
    std::fprintf(stderr, "pipe-run: error: %s\n", message.c_str());
  std::exit(2);
}

Options parseOptions(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg == "-h" || arg == "--help") {
      std::printf("%s", kUsage);
      std::exit(0);
    }
    if (arg.rfind("--", 0) != 0) {
      if (!options.out.empty())
        usageError("unexpected argument '" + arg + "' (one output directory only)");
      options.out = arg;
      continue;
    }
    if (arg == "--no-pin") {
      options.pin = false;
      continue;
    }
    if (arg == "--random-params") {
      options.randomParams = true;
      continue;
    }
    size_t equals = arg.find('=');
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
      arg = arg.substr(0, equals);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      usageError("option " + arg + " needs a value");
    }
    auto count = [&]() -> uint64_t {
      char *end = nullptr;
      errno = 0;
      unsigned long long parsed = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || value[0] == '-' || *end || errno == ERANGE)
        usageError("option " + arg + ": '" + value + "' is not a whole number >= 0");
      return parsed;
    };
    if (arg == "--steps")
      options.steps = static_cast<int64_t>(std::min<uint64_t>(count(), INT64_MAX));
    else if (arg == "--seed")
      options.seed = count();
    else if (arg == "--timeout") {
      char *end = nullptr;
      options.timeout = std::strtod(value.c_str(), &end);
      if (value.empty() || *end || !(options.timeout > 0))
        usageError("option --timeout: '" + value + "' is not a number of seconds > 0");
    } else if (arg == "--transport") {
      if (value != "threads" && value != "mpi")
        usageError("--transport must be threads or mpi, not '" + value + "'");
      options.transport = value;
    } else if (arg == "--backend") {
      if (!parseBackend(value, options.backend))
        usageError("--backend must be cpu, cuda or emulated, not '" + value + "'");
    } else if (arg == "--emulated-memory") {
      options.emulatedMiB = static_cast<int64_t>(std::min<uint64_t>(count(), 1u << 24));
      if (options.emulatedMiB == 0)
        usageError("option --emulated-memory: the emulated device needs at least 1 MiB");
    } else if (arg == "--data")
      options.data = value;
    else if (arg == "--save-weights")
      options.saveWeights = value;
    else if (arg == "--save-grads")
      options.saveGrads = value;
    else if (arg == "--trace")
      options.trace = value;
    else if (arg == "--model")
      options.model = value;
    else if (arg == "--summary")
      options.summary = value;
    else if (arg == "--write-profile")
      options.profile = value;
    else if (arg == "--replicas") {
      options.replicas = static_cast<int>(std::min<uint64_t>(count(), 1u << 16));
      if (options.replicas == 0)
        usageError("option --replicas: a run needs at least one replica of the pipeline");
    }
    else
      usageError("unknown option '" + arg + "' (see pipe-run --help)");
  }
  if (options.out.empty())
    usageError("no output directory given (usage: pipe-run OUT [options]; see pipe-run --help)");
  if (options.trace.empty())
    options.trace = options.out + "/measured.trace.json";
  if (options.summary.empty())
    options.summary = options.out + "/measured.json";
  return options;
}

/// Fails before training when an output file could not be created: its folder
/// is missing or it names a folder.
void checkOutputPath(const std::string &option, const std::string &path) {
  if (path.empty())
    return;
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::is_directory(path, error))
    throw std::runtime_error(option + " " + path + ": is a directory, not a file");
  fs::path folder = fs::path(path).parent_path();
  if (!folder.empty() && !fs::is_directory(folder, error))
    throw std::runtime_error(option + " " + path + ": no such directory " + folder.string());
}

void checkOutputPaths(const Options &options) {
  checkOutputPath("--trace", options.trace);
  checkOutputPath("--summary", options.summary);
  checkOutputPath("--write-profile", options.profile);
  checkOutputPath("--save-weights", options.saveWeights);
  checkOutputPath("--save-grads", options.saveGrads);
}

/// Checks --data's arrays against what program.json says the ranks will ask.
std::shared_ptr<const DataSource> loadData(const Options &options, const ProgramInfo &program) {
  if (options.data.empty())
    return nullptr;
  auto data = std::make_shared<NpzData>(options.data, program.microbatches * options.replicas);
  auto check = [&](DataRole role, const std::vector<DataArrayInfo> &arrays) {
    for (const DataArrayInfo &array : arrays) {
      std::string problem = data->check(role, array.index, array.dtype, array.shape, options.steps);
      if (!problem.empty())
        throw std::runtime_error(problem);
    }
  };
  check(DataRole::Input, program.inputs);
  check(DataRole::Label, program.labels);
  check(DataRole::OutputGrad, program.outputGrads);
  return data;
}

/// What one rank hands back at the end of the run.
struct Collected {
  RankReport report;
  std::vector<NpyArray> weights, grads;
};

std::vector<char> pack(const Collected &c) {
  std::vector<char> out;
  for (const std::vector<char> &part :
       {encodeReport(c.report), serializeNpz(c.weights), serializeNpz(c.grads)}) {
    uint64_t size = part.size();
    out.insert(out.end(), reinterpret_cast<const char *>(&size),
               reinterpret_cast<const char *>(&size) + 8);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

Collected unpack(const std::vector<char> &bytes) {
  std::vector<std::vector<char>> parts;
  size_t at = 0;
  while (at + 8 <= bytes.size()) {
    uint64_t size;
    std::memcpy(&size, bytes.data() + at, 8);
    parts.emplace_back(bytes.begin() + static_cast<long>(at + 8),
                       bytes.begin() + static_cast<long>(at + 8 + size));
    at += 8 + size;
  }
  if (parts.size() != 3)
    throw std::runtime_error("a rank's results arrived incomplete");
  return Collected{decodeReport(parts[0]), parseNpz(parts[1], "weights"),
                   parseNpz(parts[2], "gradients")};
}

/// "device kernels: N calls native (C convolutions by its library), M staged
/// (pipe_k_conv 40, ...)": what a device backend still runs on the host, the
/// most frequent first.
void printDeviceKernels(const std::vector<RankReport> &reports) {
  int64_t native = 0, staged = 0, library = 0;
  std::map<std::string, int64_t> byKernel;
  for (const RankReport &report : reports) {
    native += report.nativeKernelCalls;
    library += report.libraryConvCalls;
    for (const auto &[kernel, calls] : report.stagedKernelCalls) {
      byKernel[kernel] += calls;
      staged += calls;
    }
  }
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto &[kernel, calls] : byKernel)
    order.push_back({-calls, kernel});
  std::sort(order.begin(), order.end());
  std::string list;
  for (const auto &[negated, kernel] : order)
    list += (list.empty() ? "" : ", ") + kernel + " " + std::to_string(-negated);
  const std::string byLibrary =
      library > 0 ? " (" + std::to_string(library) + " convolutions by the device's library)" : "";
  std::printf("device kernels: %lld calls native%s, %lld staged on the host%s%s%s\n",
              static_cast<long long>(native), byLibrary.c_str(), static_cast<long long>(staged),
              list.empty() ? "" : " (", list.c_str(), list.empty() ? "" : ")");
}

/// "step 3/10: loss 1.969702 (0.1 ms)".
void printStep(int64_t step, int64_t steps, const StepRecord &record, double loss) {
  std::printf("step %lld/%lld: loss %.6f (%.1f ms)\n", static_cast<long long>(step + 1),
              static_cast<long long>(steps), loss, record.endMs - record.startMs);
}

/// Rank 0's (or the only process's) end of the run: report, trace, files.
/// `stepLines`: print each step's loss first (MPI replicas, whose losses meet
/// only here).
void finish(const Options &options, const ProgramInfo &program, const RunFacts &facts,
            const std::vector<Collected> &collected, bool stepLines = false) {
  // Replicas update with the same gradients: replica 0's weights, gradients,
  // trace and profile stand for all.
  std::vector<RankReport> reports, firstReplica;
  std::vector<NpyArray> weights, grads;
  for (const Collected &c : collected) {
    reports.push_back(c.report);
    if (c.report.replica != 0)
      continue;
    firstReplica.push_back(c.report);
    weights.insert(weights.end(), c.weights.begin(), c.weights.end());
    grads.insert(grads.end(), c.grads.begin(), c.grads.end());
  }
  const RunSummary summary = summarize(program, reports, facts);
  if (stepLines)
    for (const RankReport &report : firstReplica)
      for (const StepRecord &step : report.steps)
        if (step.hasLoss && step.step >= 0 && step.step < facts.steps &&
            summary.losses[static_cast<size_t>(step.step)])
          printStep(step.step, facts.steps, step, *summary.losses[static_cast<size_t>(step.step)]);
  printReport(summary);
  if (facts.backend != "cpu")
    printDeviceKernels(reports);
  writeTrace(options.trace, firstReplica);
  std::printf("trace: %s\n", options.trace.c_str());
  writeJson(options.summary, summaryJson(summary), "summary");
  std::printf("summary: %s\n", options.summary.c_str());
  if (!options.profile.empty()) {
    std::map<std::string, NodeProfile> profile =
        measureProfile(firstReplica, program.microbatches, facts.steps);
    writeJson(options.profile, profileJson(profile, program, facts), "profile");
    std::printf("profile: %s (%zu nodes)\n", options.profile.c_str(), profile.size());
  }
  if (!options.saveWeights.empty()) {
    writeNpz(options.saveWeights, weights);
    std::printf("weights: %s (%zu parameters)\n", options.saveWeights.c_str(), weights.size());
  }
  if (!options.saveGrads.empty()) {
    writeNpz(options.saveGrads, grads);
    std::printf("gradients: %s (%zu parameters)\n", options.saveGrads.c_str(), grads.size());
  }
}

} // namespace

int main(int argc, char **argv) {
  askForBetterBlasKernels(argv);
  Options options = parseOptions(argc, argv);
  if (options.backend == Backend::Cuda) {
    // At once, before compiling the ranks: a CUDA run needs a GPU.
    std::string why;
    if (cudaDeviceCount(why) == 0)
      die("--backend cuda: " + why);
  }
  ProgramInfo program;
  RunSettings settings;
  settings.backend = options.backend;
  settings.emulatedDeviceBytes = options.emulatedMiB << 20;
  try {
    program = readProgramInfo(options.out);
    if (options.replicas == 0)
      options.replicas = program.replicas;
    if (static_cast<int64_t>(program.ranks) * options.replicas > kMaxRanks)
      throw std::runtime_error("--replicas " + std::to_string(options.replicas) + " of " +
                               std::to_string(program.ranks) + " ranks would make more than " +
                               std::to_string(kMaxRanks) + " ranks");
    settings.ranks = program.ranks;
    settings.microbatches = program.microbatches;
    settings.replicas = options.replicas;
    if (program.allReduceBucketBytes > 0)
      settings.allReduceBucketBytes = program.allReduceBucketBytes;
    settings.layout = program.replicaLayout == "stage-major" ? ReplicaLayout::StageMajor
                                                              : ReplicaLayout::PipelineMajor;
    settings.seed = options.seed;
    settings.timeoutSeconds = options.timeout;
    settings.modelPath = options.model.empty() ? program.model : options.model;
    settings.randomParameters = options.randomParams;
    settings.data = loadData(options, program);
    checkOutputPaths(options);
  } catch (const std::exception &e) {
    die(e.what());
  }
  const bool useMpi = options.transport.empty() ? MpiWorld::launched() : options.transport == "mpi";
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  RunFacts facts;
  facts.transport = useMpi ? "mpi" : "threads";
  facts.blasKernels = blasKernels();
  facts.backend = backendName(options.backend);
  facts.steps = options.steps;
  facts.replicas = options.replicas;
  const int worldRanks = program.ranks * options.replicas;
  auto placeOf = [&](int k) {
    return rankPlace(settings.layout, options.replicas, program.ranks, k);
  };
  const std::string replicaLine =
      options.replicas > 1 ? ": " + std::to_string(options.replicas) + " replicas of the " +
                                 std::to_string(program.ranks) + "-rank pipeline, ranks placed " +
                                 layoutName(settings.layout)
                           : "";

  std::mutex printing;
  std::vector<Collected> collected(static_cast<size_t>(worldRanks));
  /// Per step, each replica's loss as it comes in (added in replica order once all are).
  std::map<int64_t, std::vector<std::optional<double>>> stepLosses;
  RunHooks hooks;
  hooks.notPinned = [&](int rank, const std::string &reason) {
    std::lock_guard<std::mutex> lock(printing);
    std::fprintf(stderr,
                 "pipe-run: warning: rank %d runs where the system puts it (its CPUs could not "
                 "be set: %s); its times may vary more\n",
                 rank, reason.c_str());
  };
  hooks.stepEnded = [&](int rank, const StepRecord &step) {
    // The rank that computed the loss reports the step, once every replica's
    // has (their mean); without a loss, rank 0.
    if (!step.hasLoss && !(program.loss.empty() && rank == 0))
      return;
    if (step.hasLoss && useMpi && options.replicas > 1)
      return; // rank 0 prints them at the end, where they meet
    std::lock_guard<std::mutex> lock(printing);
    double loss = step.loss;
    if (step.hasLoss && options.replicas > 1) {
      std::vector<std::optional<double>> &in = stepLosses[step.step];
      in.resize(static_cast<size_t>(options.replicas));
      in[static_cast<size_t>(placeOf(rank).replica)] = step.loss;
      if (std::any_of(in.begin(), in.end(), [](const auto &l) { return !l; }))
        return;
      double sum = 0;
      for (const std::optional<double> &l : in)
        sum += *l;
      loss = sum / options.replicas;
      stepLosses.erase(step.step);
    }
    if (step.hasLoss)
      printStep(step.step, options.steps, step, loss);
    else
      std::printf("step %lld/%lld: (%.1f ms)\n", static_cast<long long>(step.step + 1),
                  static_cast<long long>(options.steps), step.endMs - step.startMs);
    std::fflush(stdout);
  };
  hooks.finished = [&](pipe_rank *r) {
    RankReport report = reportOf(r);
    Collected &mine = collected[static_cast<size_t>(transportRankOf(
        settings.layout, options.replicas, program.ranks, {report.replica, report.rank}))];
    mine.report = report;
    if (report.replica != 0)
      return; // replica 0's weights and gradients stand for all
    if (!options.saveWeights.empty())
      mine.weights = ownedParameters(r);
    if (!options.saveGrads.empty())
      mine.grads = ownedGradients(r);
  };

  if (!useMpi) {
    std::vector<RankProgram> programs;
    try {
      std::vector<int> ranks;
      for (int k = 0; k < program.ranks; ++k)
        ranks.push_back(k);
      buildRanks(options.out, ranks, 2);
      for (int k = 0; k < worldRanks; ++k)
        programs.push_back(loadRank(options.out, placeOf(k).rank));
    } catch (const std::exception &e) {
      die(e.what());
    }
    settings.kernelThreads = std::max(1, static_cast<int>(cores) / worldRanks);
    settings.pinThreads = options.pin;
    facts.threadsPerRank = settings.kernelThreads;
    const bool pinned = options.pin && !rankCpus(worldRanks, settings.kernelThreads).empty();
    std::printf(
        "pipe-run: %d rank(s) as threads%s, %lld step(s), %d kernel thread(s) per rank%s%s%s%s\n",
        worldRanks, replicaLine.c_str(), static_cast<long long>(options.steps),
        settings.kernelThreads, pinned ? ", each rank on its own CPUs" : "", blasLine().c_str(),
        backendLine(options.backend).c_str(), parametersLine(settings).c_str());
    std::fflush(stdout);
    std::string failure = runInThreads(settings, programs, options.steps, hooks);
    if (!failure.empty()) {
      std::fflush(stdout);
      std::fprintf(stderr, "pipe-run: error: %s\n", failure.c_str());
      std::fflush(stderr);
      std::_Exit(1); // a rank left inside a kernel must not run static destructors
    }
    try {
      finish(options, program, facts, collected);
    } catch (const std::exception &e) {
      die(e.what());
    }
    return 0;
  }

  std::unique_ptr<MpiWorld> world;
  try {
    world = std::make_unique<MpiWorld>(&argc, &argv);
  } catch (const std::exception &e) {
    die(e.what());
  }
  if (world->size() != worldRanks) {
    if (world->rank() == 0)
      std::fprintf(stderr,
                   "pipe-run: error: the MPI world has %d process(es), the program %d "
                   "rank(s)%s (mpirun -np %d)\n",
                   world->size(), program.ranks,
                   options.replicas > 1
                       ? (" times " + std::to_string(options.replicas) + " replicas").c_str()
                       : "",
                   worldRanks);
    return 1;
  }
  const int rank = world->rank();
  auto abortWith = [&](const std::string &message) {
    std::fflush(stdout);
    std::fprintf(stderr, "pipe-run: error: %s\n", message.c_str());
    std::fflush(stderr);
    world->abort(1);
  };
  RankProgram mine;
  try {
    // Replica 0's process of each pipeline rank compiles its program; the other
    // replicas load it once every one is built.
    if (placeOf(rank).replica == 0)
      buildRanks(options.out, {placeOf(rank).rank}, 1);
    if (options.replicas > 1 && !world->barrier(kBuildSeconds))
      throw std::runtime_error("rank " + std::to_string(rank) + ": the rank programs were not " +
                               "built within " + std::to_string(kBuildSeconds) + " s");
    mine = loadRank(options.out, placeOf(rank).rank);
  } catch (const std::exception &e) {
    abortWith(e.what());
  }
  settings.kernelThreads = std::max(1, static_cast<int>(cores) / world->localSize());
  facts.threadsPerRank = settings.kernelThreads;
  if (rank == 0) {
    std::printf("pipe-run: %d rank(s) over MPI%s, %lld step(s), %d kernel thread(s) per "
                "rank%s%s%s\n",
                worldRanks, replicaLine.c_str(), static_cast<long long>(options.steps),
                settings.kernelThreads,
                blasLine().c_str(), backendLine(options.backend).c_str(),
                parametersLine(settings).c_str());
    std::fflush(stdout);
  }
  std::unique_ptr<Transport> transport = world->transport();
  std::string failure = runRank(settings, *transport, mine, options.steps, hooks);
  if (!failure.empty())
    abortWith(failure);
  transport.reset();
  try {
    std::vector<std::vector<char>> all =
        world->gatherToRoot(pack(collected[static_cast<size_t>(rank)]));
    if (rank == 0) {
      std::vector<Collected> results;
      for (const std::vector<char> &bytes : all)
        results.push_back(unpack(bytes));
      finish(options, program, facts, results, options.replicas > 1);
    }
  } catch (const std::exception &e) {
    abortWith("rank " + std::to_string(rank) + ": " + e.what());
  }
  std::fflush(stdout);
  return 0;
}
