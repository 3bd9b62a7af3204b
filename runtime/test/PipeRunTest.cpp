//===- PipeRunTest.cpp - pipe-run end to end, and every way it fails -------===//
//
// Runs the pipe-run executable on copies of programs/relay (a hand-written
// two-rank program without kernels): losses and trained weights equal a hand
// computation with threads and with MPI, the report, trace, measured.json and
// --write-profile's profile are written and agree with the printed report, and
// each fault (a rank that throws or fails, a peer that never sends, bad
// --data, missing files, a program that does not compile, an output file in a
// missing directory) ends in one line "pipe-run: error: ..." and exit 1 within
// seconds.
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "Npz.h"
#include "pipe_runtime.h"

#include <nlohmann/json.hpp>

#include "Report.h"
#include "Run.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

using namespace piperun;
using namespace piperun::test;
namespace fs = std::filesystem;

namespace {

const double kLimit = 60; // no test may come near it: a hang fails here

std::string copyProgram(const std::string &name) {
  std::string dir = scratchDir() + "/" + name;
  fs::copy(fs::path(PIPE_RUNTIME_TEST_DATA) / "programs" / name, dir, fs::copy_options::recursive);
  return dir;
}

CommandResult pipeRun(std::vector<std::string> args, const std::vector<std::string> &env = {}) {
  args.insert(args.begin(), PIPE_RUN);
  return runCommand(args, kLimit, env);
}

CommandResult mpiRun(int processes, std::vector<std::string> args,
                     const std::vector<std::string> &env = {}) {
  std::vector<std::string> argv = {PIPE_MPIEXEC,      "-q",  "--allow-run-as-root",
                                   "--oversubscribe", "-np", std::to_string(processes)};
  for (const std::string &entry : env)
    argv.insert(argv.end(), {"-x", entry.substr(0, entry.find('='))});
  argv.push_back(PIPE_RUN);
  argv.insert(argv.end(), args.begin(), args.end());
  // Each mpirun gets a session directory of its own: two that start and end
  // at once (ctest -j) race on Open MPI's shared one, and one of them fails
  // with "ORTE_ERROR_LOG: Error in file .../session_dir.c".
  std::string session = (fs::temp_directory_path() / "pipe-mpirun-XXXXXX").string();
  std::vector<std::string> environment = env;
  if (mkdtemp(session.data()))
    environment.push_back("OMPI_MCA_orte_tmpdir_base=" + session);
  CommandResult result = runCommand(argv, kLimit, environment);
  std::error_code ignored;
  fs::remove_all(session, ignored);
  return result;
}

std::vector<double> lossesOf(const std::string &out) {
  std::vector<double> losses;
  std::regex line(R"(step (\d+)/(\d+): loss (-?[0-9.]+) \([0-9.]+ ms\))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it)
    losses.push_back(std::stod((*it)[3]));
  return losses;
}

std::vector<std::string> linesOf(const std::string &text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty())
      lines.push_back(line);
  return lines;
}

/// The one error line of a failed run (checked to be the only line on stderr
/// for in-process runs; mpirun may add its own lines).
/// One "pipe-run: error: PREFIX..." line and exit status 1 (`status` 2 for
/// usage errors: the command line itself is wrong).
void expectOneError(const CommandResult &result, const std::string &prefix, bool only = true,
                    int status = 1) {
  EXPECT_EQ(result.exitCode, status) << result.out << result.err;
  std::vector<std::string> errors;
  for (const std::string &line : linesOf(result.err))
    if (line.rfind("pipe-run: error: ", 0) == 0)
      errors.push_back(line);
  ASSERT_EQ(errors.size(), 1u) << result.err;
  EXPECT_EQ(errors[0].rfind("pipe-run: error: " + prefix, 0), 0u) << errors[0];
  if (only)
    EXPECT_EQ(linesOf(result.err).size(), 1u) << result.err;
}

// --- The relay's data and its hand computation. -----------------------------

struct RelayData {
  std::vector<float> x, t; // [2 m, 3] each: m micro-batches of [2, 3] (4 for one replica)
};

RelayData writeRelayData(const std::string &path, int microbatches = 4) {
  RelayData data;
  for (int i = 0; i < 6 * microbatches; ++i) {
    data.x.push_back(0.1f * float(i % 7) - 0.3f);
    data.t.push_back(0.05f * float((i * 5) % 11) - 0.2f);
  }
  auto array = [&](const std::string &name, const std::vector<float> &v) {
    NpyArray a;
    a.name = name;
    a.shape = {2 * microbatches, 3};
    a.bytes.assign(reinterpret_cast<const char *>(v.data()),
                   reinterpret_cast<const char *>(v.data() + v.size()));
    return a;
  };
  writeNpz(path, {array("input_0", data.x), array("label_0", data.t)});
  return data;
}

/// The relay's loss per step and final w, computed as its rank programs do;
/// with replicas, each on 4 micro-batches of the step, as the runtime averages
/// their gradients (replica 0 adds the others' in order, then scales).
std::pair<std::vector<double>, std::vector<float>> relayReference(const RelayData &d, int steps,
                                                                  int replicas = 1) {
  std::vector<float> w = {0.5f, -1.0f, 1.5f, 2.0f, -0.25f, 0.75f}; // model.bin
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    double loss = 0;
    std::vector<float> grad(6, 0.0f);
    for (int replica = 0; replica < replicas; ++replica) {
      std::vector<float> mine(6, 0.0f);
      for (int m = 0; m < 4; ++m) {
        const int mb = replica * 4 + m;
        float sum = 0;
        for (int i = 0; i < 6; ++i)
          sum += d.x[mb * 6 + i] * w[i] * d.t[mb * 6 + i];
        loss += sum / 4 / replicas;
      }
      for (int m = 0; m < 4; ++m) { // rank 0's backwards, in micro-batch order
        const int mb = replica * 4 + m;
        for (int i = 0; i < 6; ++i)
          mine[i] += d.x[mb * 6 + i] * (d.t[mb * 6 + i] / 4);
      }
      for (int i = 0; i < 6; ++i)
        grad[i] += mine[i];
    }
    if (replicas > 1)
      for (int i = 0; i < 6; ++i)
        grad[i] *= 1.0f / static_cast<float>(replicas);
    for (int i = 0; i < 6; ++i)
      w[i] = w[i] + -0.1f * grad[i];
    losses.push_back(loss);
  }
  return {losses, w};
}

std::vector<float> savedWeights(const std::string &path) {
  std::vector<NpyArray> arrays = readNpz(path);
  EXPECT_EQ(arrays.size(), 1u);
  EXPECT_EQ(arrays.at(0).name, "w");
  std::vector<float> w(6);
  std::memcpy(w.data(), arrays.at(0).bytes.data(), 24);
  return w;
}

void expectRelayTrained(const CommandResult &result, const RelayData &data,
                        const std::string &weights, int replicas = 1) {
  ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
  auto [losses, w] = relayReference(data, 3, replicas);
  std::vector<double> printed = lossesOf(result.out);
  ASSERT_EQ(printed.size(), 3u) << result.out;
  for (int s = 0; s < 3; ++s)
    EXPECT_NEAR(printed[s], losses[s], 1e-5 * std::fabs(losses[s]) + 1e-6) << "step " << s + 1;
  std::vector<float> trained = savedWeights(weights);
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR(trained[i], w[i], 1e-6 * std::fabs(w[i])) << "w[" << i << "]";
}

TEST(PipeRun, RelayTrainsAsComputedByHandWithThreads) {
  std::string dir = copyProgram("relay");
  RelayData data = writeRelayData(dir + "/data.npz");
  CommandResult result =
      pipeRun({dir, "--steps", "3", "--data", dir + "/data.npz", "--save-weights", dir + "/w.npz",
               "--save-grads", dir + "/g.npz", "--transport", "threads"});
  expectRelayTrained(result, data, dir + "/w.npz");
  EXPECT_EQ(result.err, "");
  // Memory: the exact peaks the relay's programs allocate (see rank0/1.cpp).
  std::regex rank0(R"(rank 0 [^\n]*\n\s+parameters\s+24 B\s+24 B\s+1\.00\n\s+gradients\s+24 B)"
                   R"([^\n]*\n\s+optimizer\s+0 B[^\n]*\n\s+saved\s+48 B\s+48 B\s+1\.00\n)"
                   R"(\s+comm[^\n]*\n\s+workspace\s+48 B)");
  EXPECT_TRUE(std::regex_search(result.out, rank0)) << result.out;
  // Rank 1: the label t (24 B) and the loss (4 B) in the forward; in the
  // backward the restored t is still saved, dh (24 B) the only workspace.
  std::regex rank1(R"(rank 1 [^\n]*\n(\s+\w+[^\n]*\n){3}\s+saved\s+24 B\s+24 B\s+1\.00\n)"
                   R"([^\n]*\n\s+workspace\s+28 B\s+28 B\s+1\.00)");
  EXPECT_TRUE(std::regex_search(result.out, rank1)) << result.out;
  // Steady gaps: the forwards after each stage's first backward, 4 micro-batches:
  // 1 on the first stage (F2 F3), 2 on the second (F1 F2 F3), in each of the 2
  // steps after the first.
  EXPECT_TRUE(std::regex_search(result.out,
                                std::regex(R"(period: measured [0-9.]+ ms \(steady state, 6 )"
                                           R"(forward gaps, steps after the first\), predicted )"
                                           R"(0\.050 ms, ratio [0-9.]+)")))
      << result.out;
  // The gradients of the last step: sum over micro-batches of x * t / 4.
  std::vector<NpyArray> grads = readNpz(dir + "/g.npz");
  ASSERT_EQ(grads.size(), 1u);
  float g0 = 0;
  for (int mb = 0; mb < 4; ++mb)
    g0 += data.x[mb * 6] * (data.t[mb * 6] / 4);
  float saved;
  std::memcpy(&saved, grads[0].bytes.data(), 4);
  EXPECT_FLOAT_EQ(saved, g0);

  // The trace: the plan's layout, every action of every step.
  nlohmann::json trace = nlohmann::json::parse(readFile(dir + "/measured.trace.json"));
  int threads = 0, forwards = 0, actions = 0;
  for (const auto &event : trace["traceEvents"]) {
    if (event["ph"] == "M") {
      ++threads;
      EXPECT_EQ(event["args"]["name"], "GPU " + std::to_string(event["tid"].get<int>()));
    } else {
      ++actions;
      forwards += event["cat"] == "forward";
      EXPECT_EQ(event["pid"], 0);
      EXPECT_GE(event["dur"].get<double>(), 0);
    }
  }
  EXPECT_EQ(threads, 2);
  EXPECT_EQ(actions, 3 * (8 + 1 + 8)) << "rank 0: 4 F, 4 B, optimizer; rank 1: 4 F, 4 B";
  EXPECT_EQ(forwards, 3 * 8);
  bool named = false;
  for (const auto &event : trace["traceEvents"])
    named |= event.value("name", "") == "F3@s1";
  EXPECT_TRUE(named);
}

TEST(PipeRun, RelayTrainsTheSameWithMpi) {
  std::string dir = copyProgram("relay");
  RelayData data = writeRelayData(dir + "/data.npz");
  CommandResult result = mpiRun(
      2, {dir, "--steps", "3", "--data", dir + "/data.npz", "--save-weights", dir + "/w.npz"});
  expectRelayTrained(result, data, dir + "/w.npz");
  EXPECT_NE(result.out.find("2 rank(s) over MPI"), std::string::npos) << result.out;
  EXPECT_TRUE(fs::exists(dir + "/measured.trace.json"));
}

// Two replicas of the relay on 8 micro-batches a step, 4 each: every step's
// loss is the mean of all 8 and the weights follow the averaged gradient; the
// report shows replica 0's two ranks.
/// The relay's 8 micro-batches in DIR/data.npz, trained for 3 steps by 2
/// replicas with threads; weights in DIR/w.npz.
CommandResult relayReplicasWithThreads(const std::string &dir) {
  return pipeRun({dir, "--steps", "3", "--data", dir + "/data.npz", "--save-weights",
                  dir + "/w.npz", "--replicas", "2", "--transport", "threads"});
}

TEST(PipeRun, RelayReplicasTrainOnTheirShareAndAverageTheGradients) {
  std::string dir = copyProgram("relay");
  RelayData data = writeRelayData(dir + "/data.npz", 8);
  CommandResult threads = relayReplicasWithThreads(dir);
  expectRelayTrained(threads, data, dir + "/w.npz", 2);
  EXPECT_NE(threads.out.find("4 rank(s) as threads: 2 replicas of the 2-rank pipeline"),
            std::string::npos)
      << threads.out;
  std::regex memoryRank(R"(\n  rank \d+ )");
  EXPECT_EQ(std::distance(std::sregex_iterator(threads.out.begin(), threads.out.end(), memoryRank),
                          std::sregex_iterator()),
            2)
      << threads.out;
  // Not one pipeline's training on the first 4 micro-batches.
  auto [alone, unused] = relayReference(data, 3, 1);
  ASSERT_EQ(lossesOf(threads.out).size(), 3u);
  EXPECT_GT(std::fabs(lossesOf(threads.out)[0] - alone[0]), 1e-5);

  // One replica's data is too short for two.
  RelayData four = writeRelayData(dir + "/four.npz", 4);
  (void)four;
  CommandResult shortData =
      pipeRun({dir, "--steps", "1", "--data", dir + "/four.npz", "--replicas", "2"});
  EXPECT_EQ(shortData.exitCode, 1) << shortData.out << shortData.err;
}

// The same over MPI (4 processes): the same losses and the same bits.
TEST(PipeRun, RelayReplicasTrainTheSameWithMpi) {
  std::string dir = copyProgram("relay");
  RelayData data = writeRelayData(dir + "/data.npz", 8);
  CommandResult threads = relayReplicasWithThreads(dir);
  ASSERT_EQ(threads.exitCode, 0) << threads.err;
  // 4 processes train as the threads did: the same losses, the same weight bits.
  auto trainsAsThreads = [&](const std::string &weights, const std::string &startLine) {
    CommandResult mpi = mpiRun(4, {dir, "--steps", "3", "--data", dir + "/data.npz",
                                   "--save-weights", dir + "/" + weights, "--replicas", "2"});
    expectRelayTrained(mpi, data, dir + "/" + weights, 2);
    EXPECT_NE(mpi.out.find(startLine), std::string::npos) << mpi.out;
    EXPECT_EQ(lossesOf(mpi.out), lossesOf(threads.out));
    EXPECT_EQ(readNpz(dir + "/w.npz")[0].bytes, readNpz(dir + "/" + weights)[0].bytes);
  };
  trainsAsThreads("wm.npz", "4 rank(s) over MPI: 2 replicas of the 2-rank pipeline, ranks placed "
                            "pipeline-major");
  // Placed stage-major (program.json's replica_layout): process k runs pipeline
  // rank k / 2 of replica k % 2.
  nlohmann::json program = nlohmann::json::parse(readFile(dir + "/program.json"));
  program["replica_layout"] = "stage-major";
  writeFile(dir + "/program.json", program.dump(2));
  trainsAsThreads("ws.npz", "2 replicas of the 2-rank pipeline, ranks placed stage-major");
  program["replica_layout"] = "diagonal";
  writeFile(dir + "/program.json", program.dump(2));
  CommandResult unknown = pipeRun({dir, "--steps", "1", "--replicas", "2"});
  EXPECT_EQ(unknown.exitCode, 1);
  EXPECT_NE(unknown.err.find("replica_layout is 'diagonal', expected pipeline-major or "
                             "stage-major"),
            std::string::npos)
      << unknown.err;
}

TEST(PipeRun, SyntheticDataIsTheSameOnThreadsAndMpi) {
  std::string dir = copyProgram("relay");
  CommandResult threads = pipeRun({dir, "--steps", "2", "--seed", "4", "--transport", "threads"});
  CommandResult mpi = mpiRun(2, {dir, "--steps", "2", "--seed", "4"});
  ASSERT_EQ(threads.exitCode, 0) << threads.err;
  ASSERT_EQ(mpi.exitCode, 0) << mpi.err;
  EXPECT_EQ(lossesOf(threads.out), lossesOf(mpi.out));
  EXPECT_EQ(lossesOf(threads.out).size(), 2u);
  CommandResult other = pipeRun({dir, "--steps", "2", "--seed", "5"});
  EXPECT_NE(lossesOf(other.out), lossesOf(threads.out));
}

// --- measured.json and --write-profile. -------------------------------------

using nlohmann::json;

/// Per rank, the printed memory table: category -> {measured, predicted} as printed.
std::map<int, std::map<std::string, std::pair<std::string, std::string>>>
printedMemory(const std::string &out) {
  std::map<int, std::map<std::string, std::pair<std::string, std::string>>> table;
  std::regex header(R"(^  rank (\d+) +measured +predicted +ratio$)");
  std::regex row(R"(^    (\w+) +(\d+(?:\.\d+)? [KMGT]?i?B) +(\d+(?:\.\d+)? [KMGT]?i?B|-) +\S+$)");
  int rank = -1;
  for (const std::string &line : linesOf(out)) {
    std::smatch m;
    if (std::regex_match(line, m, header))
      rank = std::stoi(m[1]);
    else if (rank >= 0 && std::regex_match(line, m, row))
      table[rank][m[1]] = {m[2], m[3]};
    else
      rank = -1;
  }
  return table;
}

/// Per rank, the printed "slowest nodes": name -> ms per step as printed.
std::map<int, std::map<std::string, std::string>> printedNodes(const std::string &out) {
  std::map<int, std::map<std::string, std::string>> nodes;
  std::regex line(R"(rank (\d+), per step: waiting for peers [0-9.]+ ms; slowest nodes: ([^\n]*))");
  std::regex node(R"((\w+) ([0-9.]+) ms)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it) {
    std::string list = (*it)[2];
    for (auto n = std::sregex_iterator(list.begin(), list.end(), node);
         n != std::sregex_iterator(); ++n)
      nodes[std::stoi((*it)[1])][(*n)[1]] = (*n)[2];
  }
  return nodes;
}

std::string fixed3(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", value);
  return text;
}

std::set<std::string> opsOf(const json &profile) {
  std::set<std::string> names;
  for (const auto &[name, times] : profile.at("ops").items())
    names.insert(name);
  return names;
}

const std::set<std::string> kRelayNodes = {"mul", "dot", "label"}; // bad_reshape never runs

TEST(PipeRun, WritesAProfileOfTheDeclaredNodesPerMicroBatch) {
  std::string dir = copyProgram("relay");
  CommandResult result = pipeRun({dir, "--steps", "3", "--transport", "threads",
                                  "--write-profile", dir + "/profile.json"});
  ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("profile: " + dir + "/profile.json (3 nodes)"), std::string::npos)
      << result.out;
  json profile = json::parse(readFile(dir + "/profile.json"));
  const json &meta = profile.at("meta");
  EXPECT_EQ(meta.at("source"), "pipe-run");
  EXPECT_EQ(meta.at("ranks"), 2);
  EXPECT_EQ(meta.at("microbatches"), 4);
  EXPECT_EQ(meta.at("steps"), 3);
  EXPECT_EQ(meta.at("steps_measured"), 2) << "the first step is left out";
  EXPECT_EQ(meta.at("statistic"), "median");
  EXPECT_EQ(meta.at("transport"), "threads");
  EXPECT_GE(meta.at("threads_per_rank").get<int>(), 1);
  // Where OpenBLAS takes this CPU for an SSE-only one (in this process too),
  // pipe-run runs again with the kernels the CPU's features ask for.
  const std::string better = betterBlasKernels();
  EXPECT_EQ(meta.at("blas_kernels"), better.empty() ? blasKernels() : better);
  EXPECT_EQ(opsOf(profile), kRelayNodes);
  for (const auto &[name, times] : profile.at("ops").items()) {
    EXPECT_GE(times.at("forward_ms").get<double>(), 0) << name;
    EXPECT_GE(times.at("backward_ms").get<double>(), 0) << name;
  }
  EXPECT_GT(profile["ops"]["label"]["forward_ms"].get<double>(), 0);
  EXPECT_EQ(profile["ops"]["label"]["backward_ms"].get<double>(), 0) << "a forward-only node";
  EXPECT_GT(profile["ops"]["dot"]["backward_ms"].get<double>(), 0);
}

TEST(PipeRun, ProfileOfOneStepAddsUpToThePrintedNodeTimes) {
  std::string dir = copyProgram("relay");
  CommandResult result = pipeRun({dir, "--steps", "1", "--write-profile", dir + "/profile.json"});
  ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
  json profile = json::parse(readFile(dir + "/profile.json"));
  EXPECT_EQ(profile["meta"]["steps_measured"], 1) << "one step: that step";
  // One step, 4 micro-batches: (forward + backward) x 4 is the node's time in
  // the step, which the report prints per step to 3 decimals.
  std::map<int, std::map<std::string, std::string>> printed = printedNodes(result.out);
  std::map<std::string, std::string> all;
  for (const auto &[rank, nodes] : printed)
    all.insert(nodes.begin(), nodes.end());
  ASSERT_EQ(all.size(), 3u) << result.out;
  for (const auto &[name, text] : all) {
    const json &times = profile.at("ops").at(name);
    double perStep = (times.at("forward_ms").get<double>() + times.at("backward_ms").get<double>()) * 4;
    EXPECT_NEAR(perStep, std::stod(text), 0.0005 + 1e-9) << name << " printed " << text;
  }
}

TEST(PipeRun, MeasuredJsonHoldsThePrintedReport) {
  std::string dir = copyProgram("relay");
  CommandResult result = pipeRun({dir, "--steps", "3", "--transport", "threads"});
  ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("summary: " + dir + "/measured.json"), std::string::npos);
  json summary = json::parse(readFile(dir + "/measured.json"));
  EXPECT_EQ(summary.at("schema_version"), 1);
  EXPECT_EQ(summary.at("transport"), "threads");
  EXPECT_EQ(summary.at("steps"), 3);

  // Memory: every printed cell, exactly as printed.
  auto table = printedMemory(result.out);
  ASSERT_EQ(table.size(), 2u) << result.out;
  ASSERT_EQ(summary.at("ranks").size(), 2u);
  for (const json &rank : summary.at("ranks")) {
    const auto &printed = table.at(rank.at("rank").get<int>());
    EXPECT_EQ(printed.size(), 8u) << "7 categories and the total";
    EXPECT_EQ(rank.at("memory").size(), printed.size());
    for (const auto &[category, cells] : printed) {
      const json &row = rank.at("memory").at(category);
      EXPECT_EQ(formatBytes(row.at("measured_bytes").get<double>()), cells.first) << category;
      EXPECT_EQ(row.at("predicted_bytes").is_null() ? "-"
                                                    : formatBytes(row["predicted_bytes"].get<double>()),
                cells.second)
          << category;
    }
    std::regex wait("rank " + std::to_string(rank.at("rank").get<int>()) +
                    R"(, per step: waiting for peers ([0-9.]+) ms)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(result.out, m, wait)) << result.out;
    EXPECT_EQ(fixed3(rank.at("wait_ms_per_step").get<double>()), m[1]);
  }
  EXPECT_EQ(summary["ranks"][0]["memory"]["saved"]["measured_bytes"], 48);
  EXPECT_EQ(summary["ranks"][0]["memory"]["constants"]["predicted_bytes"], nullptr);

  // Period and iteration: the printed figures.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(result.out, m,
                                std::regex(R"(period: measured ([0-9.]+) ms [^\n]*, predicted )"
                                           R"(([0-9.]+) ms)")))
      << result.out;
  EXPECT_EQ(fixed3(summary["period_ms"]["measured"].get<double>()), m[1]);
  EXPECT_EQ(fixed3(summary["period_ms"]["predicted"].get<double>()), m[2]);
  EXPECT_EQ(summary["period_ms"]["predicted"], 0.05);
  ASSERT_TRUE(std::regex_search(result.out, m,
                                std::regex(R"(iteration: measured ([0-9.]+) ms [^\n]*, predicted )"
                                           R"(([0-9.]+) ms)")))
      << result.out;
  EXPECT_EQ(fixed3(summary["iteration_ms"]["measured"].get<double>()), m[1]);
  EXPECT_EQ(fixed3(summary["iteration_ms"]["predicted"].get<double>()), m[2]);

  // Losses: the printed ones, step by step.
  std::vector<double> printed = lossesOf(result.out);
  ASSERT_EQ(summary.at("loss").size(), printed.size());
  for (size_t s = 0; s < printed.size(); ++s)
    EXPECT_NEAR(summary["loss"][s].get<double>(), printed[s], 6e-7) << "step " << s + 1;
}

TEST(PipeRun, SummaryGoesWhereAsked) {
  std::string dir = copyProgram("relay");
  CommandResult result = pipeRun({dir, "--steps", "1", "--summary", dir + "/run.json"});
  ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
  EXPECT_FALSE(fs::exists(dir + "/measured.json"));
  EXPECT_EQ(json::parse(readFile(dir + "/run.json")).at("steps"), 1);
}

TEST(PipeRun, MpiProfileHasEveryRanksNodes) {
  std::string dir = copyProgram("relay");
  CommandResult result =
      mpiRun(2, {dir, "--steps", "2", "--write-profile", dir + "/profile.json"});
  ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
  json profile = json::parse(readFile(dir + "/profile.json"));
  EXPECT_EQ(opsOf(profile), kRelayNodes);
  EXPECT_EQ(profile["meta"]["transport"], "mpi");
  EXPECT_EQ(profile["ops"]["label"]["backward_ms"].get<double>(), 0);
  json summary = json::parse(readFile(dir + "/measured.json"));
  EXPECT_EQ(summary.at("transport"), "mpi");
  EXPECT_EQ(summary.at("ranks").size(), 2u);
}

// --- Faults. ----------------------------------------------------------------

TEST(PipeRunFault, ARankThatThrows) {
  std::string dir = copyProgram("relay");
  CommandResult result = pipeRun({dir, "--steps", "3"}, {"RELAY_FAULT=throw"});
  expectOneError(result, "rank 1: deliberate failure in rank 1's third forward");
  EXPECT_LT(result.seconds, 20);
}

TEST(PipeRunFault, ARankThatFailsNamesTheNodeAndAction) {
  std::string dir = copyProgram("relay");
  CommandResult result = pipeRun({dir, "--steps", "3"}, {"RELAY_FAULT=fail"});
  expectOneError(result, "rank 1, node bad_reshape (F0@s1): pipe_view: f32 [2, 3] has 6 "
                         "elements, the view [4, 4] wants 16");
}

TEST(PipeRunFault, APeerThatNeverSends) {
  std::string dir = copyProgram("relay");
  // Rank 0 ends its only step and waits for the others at the end of the run
  // (twice the timeout), so rank 1's receive is the one that gives up.
  CommandResult result = pipeRun({dir, "--steps", "1", "--timeout", "1"}, {"RELAY_FAULT=silent"});
  expectOneError(result, "rank 1, node dot (B3@s1): no activation from rank 0 (tag 7, "
                         "micro-batch 3) within 1 s");
  EXPECT_LT(result.seconds, 20) << "a 1 s timeout (plus compiling)";
}

TEST(PipeRunFault, ATensorLeftAllocated) {
  std::string dir = copyProgram("relay");
  CommandResult result = pipeRun({dir, "--steps", "1"}, {"RELAY_FAULT=leak"});
  expectOneError(result, "rank 1: step 0 ended with 16 bytes of workspace and 0 bytes of "
                         "received tensors still allocated (a missing pipe_free, e.g. f32 [] "
                         "made in node dot)");
}

TEST(PipeRunFault, MpiRankThatThrowsStopsTheWorld) {
  std::string dir = copyProgram("relay");
  CommandResult result = mpiRun(2, {dir, "--steps", "3"}, {"RELAY_FAULT=throw"});
  expectOneError(result, "rank 1: deliberate failure in rank 1's third forward", false);
  EXPECT_LT(result.seconds, 20);
}

TEST(PipeRunFault, MpiPeerThatNeverSends) {
  std::string dir = copyProgram("relay");
  CommandResult result = mpiRun(2, {dir, "--steps", "1", "--timeout", "1"}, {"RELAY_FAULT=silent"});
  expectOneError(result,
                 "rank 1, node dot (B3@s1): no activation from rank 0 (tag 7, "
                 "micro-batch 3) within 1 s",
                 false);
  EXPECT_LT(result.seconds, 20);
}

TEST(PipeRunFault, MpiWorldOfTheWrongSize) {
  std::string dir = copyProgram("relay");
  CommandResult result = mpiRun(3, {dir, "--steps", "1"});
  expectOneError(result, "the MPI world has 3 process(es), the program 2 rank(s)", false);
  CommandResult replicas = mpiRun(2, {dir, "--steps", "1", "--replicas", "2"});
  expectOneError(replicas,
                 "the MPI world has 2 process(es), the program 2 rank(s) times 2 replicas "
                 "(mpirun -np 4)",
                 false);
}

TEST(PipeRunFault, MoreReplicasThanRanksAllowed) {
  std::string dir = copyProgram("relay");
  expectOneError(pipeRun({dir, "--steps", "1", "--replicas", "3000"}),
                 "--replicas 3000 of 2 ranks would make more than 4096 ranks");
}

TEST(PipeRunFault, DataOfTheWrongShape) {
  std::string dir = copyProgram("relay");
  NpyArray x;
  x.name = "input_0";
  x.shape = {8, 4};
  x.bytes.resize(8 * 4 * 4);
  writeNpz(dir + "/bad.npz", {x});
  CommandResult result = pipeRun({dir, "--data", dir + "/bad.npz"});
  expectOneError(result, dir + "/bad.npz: array input_0 has shape [8, 4], expected [8, 3] or "
                               "[steps, 8, 3] (4 micro-batches of [2, 3])");
}

TEST(PipeRunFault, DataOfTheWrongDtypeOrMissing) {
  std::string dir = copyProgram("relay");
  NpyArray x;
  x.name = "input_0";
  x.dtype = PIPE_F64;
  x.shape = {8, 3};
  x.bytes.resize(8 * 3 * 8);
  writeNpz(dir + "/f64.npz", {x});
  expectOneError(pipeRun({dir, "--data", dir + "/f64.npz"}),
                 dir + "/f64.npz: array input_0 is f64, the program expects f32 [8, 3]");
  expectOneError(pipeRun({dir, "--data", dir + "/none.npz"}), dir + "/none.npz: cannot open");
}

TEST(PipeRunFault, AMissingRankSource) {
  std::string dir = copyProgram("relay");
  fs::remove(dir + "/rank1.cpp");
  expectOneError(pipeRun({dir}), "rank 1: " + dir + "/rank1.cpp: no such file");
}

TEST(PipeRunFault, AMissingProgramJsonOrModel) {
  std::string dir = copyProgram("relay");
  expectOneError(pipeRun({dir + "/nowhere"}), dir + "/nowhere/program.json: no such file");
  fs::remove(dir + "/model.bin");
  expectOneError(pipeRun({dir, "--steps", "1"}),
                 "rank 0: parameter w: cannot open " + dir + "/model.bin");
}

TEST(PipeRun, RandomParametersNeedNoModelFile) {
  std::string dir = copyProgram("relay");
  fs::remove(dir + "/model.bin");
  CommandResult threads = pipeRun({dir, "--steps", "2", "--random-params", "--save-weights",
                                   dir + "/w.npz"});
  EXPECT_EQ(threads.exitCode, 0) << threads.out << threads.err;
  EXPECT_NE(threads.out.find("parameters drawn from the seed (--random-params"), std::string::npos)
      << threads.out;
  EXPECT_EQ(threads.err, "") << "no warning of a textual model";
  // The seed decides the values: the same seed, the same weights; another, others.
  CommandResult again = pipeRun({dir, "--steps", "2", "--random-params", "--save-weights",
                                 dir + "/again.npz"});
  CommandResult other = pipeRun({dir, "--steps", "2", "--random-params", "--seed", "5",
                                 "--save-weights", dir + "/other.npz"});
  ASSERT_EQ(again.exitCode, 0) << again.err;
  ASSERT_EQ(other.exitCode, 0) << other.err;
  EXPECT_EQ(readNpz(dir + "/w.npz")[0].bytes, readNpz(dir + "/again.npz")[0].bytes);
  EXPECT_NE(readNpz(dir + "/w.npz")[0].bytes, readNpz(dir + "/other.npz")[0].bytes);
}

TEST(PipeRunFault, ARankThatDoesNotCompile) {
  std::string dir = copyProgram("relay");
  writeFile(dir + "/rank1.cpp", readFile(dir + "/rank1.cpp") + "\nthis is not C++;\n");
  CommandResult result = pipeRun({dir});
  expectOneError(result, "rank 1: compiling " + dir + "/rank1.cpp failed: ");
  EXPECT_NE(result.err.find("error"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir + "/rank1.build.log"));
  EXPECT_FALSE(fs::exists(dir + "/rank1.so"));
}

TEST(PipeRunFault, AProgramForAnotherAbiOrRank) {
  std::string dir = copyProgram("relay");
  std::string source = readFile(dir + "/rank1.cpp");
  writeFile(dir + "/rank1.cpp",
            std::regex_replace(source, std::regex("return PIPE_ABI_VERSION;"), "return 99;"));
  expectOneError(pipeRun({dir}), "rank 1: " + dir +
                                     "/rank1.so was built for runtime ABI version "
                                     "99, this runtime is version " + std::to_string(PIPE_ABI_VERSION));
  writeFile(dir + "/rank1.cpp",
            std::regex_replace(source, std::regex("return 1; \\}"), "return 0; }"));
  expectOneError(pipeRun({dir}), "rank 1: " + dir + "/rank1.so was generated for rank 0");
}

TEST(PipeRunFault, AnOutputFileInAMissingDirectory) {
  std::string dir = copyProgram("relay");
  std::string path = dir + "/nowhere/profile.json";
  CommandResult result = pipeRun({dir, "--write-profile", path});
  expectOneError(result, "--write-profile " + path + ": no such directory " + dir + "/nowhere");
  EXPECT_EQ(result.out, "") << "refused before compiling or training";
  expectOneError(pipeRun({dir, "--summary", dir}), "--summary " + dir + ": is a directory");
}

TEST(PipeRunFault, BadOptions) {
  auto expectUsageError = [](const CommandResult &result, const std::string &prefix) {
    expectOneError(result, prefix, true, 2);
  };
  expectUsageError(pipeRun({"out", "--steps", "many"}),
                   "option --steps: 'many' is not a whole number >= 0");
  expectUsageError(pipeRun({"out", "--steps", "-3"}), "option --steps: '-3' is not a whole number");
  expectUsageError(pipeRun({"out", "--timeout", "0"}), "option --timeout: '0' is not a number of");
  expectUsageError(pipeRun({"out", "--transport", "carrier-pigeon"}),
                   "--transport must be threads or mpi");
  expectUsageError(pipeRun({"out", "--frobnicate", "1"}), "unknown option '--frobnicate'");
  expectUsageError(pipeRun({"out", "--replicas", "0"}),
                   "option --replicas: a run needs at least one replica");
  expectUsageError(pipeRun({}), "no output directory given");
}

TEST(PipeRun, RebuildsOnlyWhenTheSourceChanges) {
  std::string dir = copyProgram("relay");
  CommandResult first = pipeRun({dir, "--steps", "1"});
  ASSERT_EQ(first.exitCode, 0) << first.err;
  EXPECT_NE(first.out.find("rank 1: compiling"), std::string::npos);
  CommandResult second = pipeRun({dir, "--steps", "1"});
  EXPECT_NE(second.out.find("rank 1: " + dir + "/rank1.so is up to date"), std::string::npos)
      << second.out;
  fs::last_write_time(dir + "/rank1.cpp",
                      fs::file_time_type::clock::now() + std::chrono::seconds(5));
  CommandResult third = pipeRun({dir, "--steps", "1"});
  EXPECT_NE(third.out.find("rank 1: compiling"), std::string::npos);
  EXPECT_NE(third.out.find("rank 0: " + dir + "/rank0.so is up to date"), std::string::npos);
}

} // namespace
