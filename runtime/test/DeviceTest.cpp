//===- DeviceTest.cpp - device memory, its accounting and staged kernels ---===//
//
// The device backends' host side, on the emulated device (no GPU needed):
// its memory is out of the host's reach, its first-fit placement agrees with
// a brute-force model of the free space, a rank on it accounts its bytes per
// category as a CPU rank does and reuses freed blocks, running out of device
// memory names the rank, stage, category and bytes, a kernel run staged
// (inputs downloaded, outputs uploaded) gives the CPU kernel's bits, and the
// native kernels' host side agrees with the CPU kernels case by case. Whole
// training runs on the emulated device are compared with PyTorch in
// python/tests/test_training_equality.py; the CUDA device itself only on a GPU.
//
//===----------------------------------------------------------------------===//
#include "Device.h"
#include "Rank.h"
#include "TestSupport.h"

#include "pipe_runtime.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

using namespace piperun;
using namespace piperun::test;

namespace {

TEST(EmulatedDevice, CopiesInOutAndWithinTheDevice) {
  auto device = makeEmulatedDevice(1 << 20);
  std::vector<char> in(1000), out(1000, 0);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<char>(i * 7);
  char *a = static_cast<char *>(device->allocate(1000));
  char *b = static_cast<char *>(device->allocate(1000));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 256, 0u);
  device->toDevice(a, in.data(), 1000);
  device->withinDevice(b, a, 1000);
  device->toHost(out.data(), b, 1000);
  EXPECT_EQ(in, out);
  device->zero(b + 10, 20);
  device->toHost(out.data(), b, 1000);
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(out[i], i >= 10 && i < 30 ? 0 : in[i]) << i;
  device->release(a);
  device->release(b);
}

TEST(EmulatedDevice, RefusesAddressesThatAreNotItsMemory) {
  auto device = makeEmulatedDevice(1 << 20);
  std::vector<char> host(64);
  EXPECT_THROW(device->toHost(host.data(), host.data(), 64), DeviceError);
  EXPECT_THROW(device->release(host.data()), DeviceError);
  char *block = static_cast<char *>(device->allocate(512));
  EXPECT_THROW(device->release(block + 256), DeviceError) << "not a block's start";
  EXPECT_THROW(device->toHost(host.data(), block + (1 << 20) - 32, 64), DeviceError)
      << "past the device's end";
  device->release(block);
}

TEST(EmulatedDeviceDeathTest, TheHostCannotReadDeviceMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto device = makeEmulatedDevice(1 << 20);
  auto *block = static_cast<volatile char *>(device->allocate(64));
  EXPECT_DEATH({ std::printf("%d\n", block[0]); }, "");
  device->release(const_cast<char *>(block));
}

/// First-fit placement against a model: a request fits exactly when the model's
/// free space (capacity minus the live blocks, each rounded to 256 bytes) has
/// a gap of its size, blocks never overlap, and freeing everything leaves one
/// gap of the whole capacity.
TEST(EmulatedDevice, PlacementAgreesWithABruteForceModelOfItsFreeSpace) {
  const int64_t capacity = 64 * 1024;
  std::mt19937 random(5);
  for (int trial = 0; trial < 20; ++trial) {
    auto device = makeEmulatedDevice(capacity);
    auto *base = static_cast<char *>(device->allocate(256));
    device->release(base);
    std::map<int64_t, int64_t> live; // offset -> rounded size
    for (int op = 0; op < 300; ++op) {
      if (!live.empty() && random() % 3 == 0) {
        auto it = live.begin();
        std::advance(it, random() % live.size());
        device->release(base + it->first);
        live.erase(it);
        continue;
      }
      const int64_t bytes = 1 + random() % 6000;
      const int64_t rounded = (bytes + 255) / 256 * 256;
      // The model's first gap of `rounded` bytes, in offset order.
      int64_t expected = -1, at = 0;
      for (auto [offset, size] : live) {
        if (offset - at >= rounded) {
          expected = at;
          break;
        }
        at = offset + size;
      }
      if (expected < 0 && capacity - at >= rounded)
        expected = at;
      char *block = static_cast<char *>(device->allocate(static_cast<size_t>(bytes)));
      if (expected < 0) {
        ASSERT_EQ(block, nullptr) << "trial " << trial << " op " << op;
        continue;
      }
      ASSERT_EQ(block - base, expected) << "trial " << trial << " op " << op;
      live[expected] = rounded;
    }
    for (auto [offset, size] : live)
      device->release(base + offset);
    void *whole = device->allocate(static_cast<size_t>(capacity));
    EXPECT_EQ(whole, base) << "freed neighbours merge back into one gap";
    device->release(whole);
  }
}

struct DeviceRank {
  explicit DeviceRank(Backend backend, int64_t deviceBytes = int64_t(64) << 20) {
    RunSettings settings;
    settings.backend = backend;
    settings.emulatedDeviceBytes = deviceBytes;
    r = createRank(settings, 0);
  }
  ~DeviceRank() { pipe_rank_destroy(r); }
  pipe_rank *r = nullptr;
};

/// A tensor of `values` on the rank (uploaded on a device).
pipe_tensor *tensorOf(pipe_rank *r, const std::vector<float> &values, pipe_ints shape) {
  pipe_tensor *t = pipe_alloc(r, PIPE_F32, shape, PIPE_MEM_WORKSPACE);
  if (r->device)
    r->device->toDevice(t->data, values.data(), values.size() * 4);
  else
    std::memcpy(t->data, values.data(), values.size() * 4);
  return t;
}

std::vector<float> valuesOn(pipe_rank *r, const pipe_tensor *t) {
  std::vector<float> values(static_cast<size_t>(t->numel));
  if (r->device)
    r->device->toHost(values.data(), t->data, values.size() * 4);
  else
    std::memcpy(values.data(), t->data, values.size() * 4);
  return values;
}

/// A workspace tensor of `dtype` on the rank holding `values` (host bytes).
template <typename T>
pipe_tensor *tensorOfType(pipe_rank *r, int32_t dtype, const std::vector<T> &values,
                          pipe_ints shape) {
  pipe_tensor *t = pipe_alloc(r, dtype, shape, PIPE_MEM_WORKSPACE);
  pipe_copy_from_host(r, t, values.data());
  return t;
}

TEST(DeviceRank, AccountsPerCategoryAsTheCpuRankAndReusesFreedBlocks) {
  DeviceRank cpu(Backend::Cpu), emulated(Backend::Emulated);
  for (DeviceRank *rank : {&cpu, &emulated}) {
    pipe_rank *r = rank->r;
    pipe_tensor *a = pipe_alloc(r, PIPE_F32, PIPE_INTS(100, 10), PIPE_MEM_WORKSPACE);
    pipe_tensor *b = pipe_alloc(r, PIPE_I64, PIPE_INTS(7), PIPE_MEM_COMM);
    pipe_tensor *c = pipe_splat(r, PIPE_F32, PIPE_INTS(3), 1.5);
    void *first = a->data;
    pipe_free(r, a);
    pipe_tensor *again = pipe_alloc(r, PIPE_F32, PIPE_INTS(1000), PIPE_MEM_SAVED);
    if (BlockCache::enabled()) // sanitized builds free at once
      EXPECT_EQ(again->data, first) << backendName(r->settings.backend) << ": the freed block";
    pipe_free(r, again);
    pipe_free(r, b);
    EXPECT_EQ(valuesOn(r, c), std::vector<float>(3, 1.5f));
    pipe_free(r, c);
  }
  for (int category = 0; category < PIPE_MEM_CATEGORIES; ++category) {
    EXPECT_EQ(pipe_memory_peak(emulated.r, category), pipe_memory_peak(cpu.r, category))
        << "category " << category;
    EXPECT_EQ(pipe_memory_live(emulated.r, category), 0);
  }
  if (BlockCache::enabled())
    EXPECT_GE(emulated.r->memory.deviceCache.cachedBytes(), 4032)
        << "the device's freed blocks stay cached (at least the 4000-byte one)";
  EXPECT_LE(emulated.r->memory.deviceCache.cachedBytes(), emulated.r->memory.peakTotal());
  EXPECT_EQ(emulated.r->memory.cache.cachedBytes(), 0) << "no host block was used";
}

// --- Messages between ranks of one process -----------------------------------
// Rank 0 sends micro-batch mb's activation, [mb + 1] * n, all four, then a
// one-float "go"; rank 1 waits for the go, so the four sends are all held at
// once, then returns each activation doubled as its gradient, which rank 0
// takes last first. On a device the bytes go device to device (Transfers.cpp),
// counted as COMM at both ends as the CPU backend counts them; what rank 1 got
// and what rank 0 got back are recorded from the host.
namespace {

constexpr int kMessageFloats = 1000;
std::mutex messageMutex;
std::map<std::string, std::vector<float>> messageValues; // "backend/rank/mb"

std::string messageBackend(pipe_rank *r) { return backendName(r->settings.backend); }

void recordMessage(pipe_rank *r, int mb, const pipe_tensor *t) {
  std::vector<float> values(static_cast<size_t>(t->numel));
  pipe_copy_to_host(r, values.data(), t);
  std::lock_guard<std::mutex> lock(messageMutex);
  messageValues[messageBackend(r) + "/" + std::to_string(r->id) + "/" + std::to_string(mb)] =
      values;
}

void messageSetup(pipe_rank *r) { pipe_set_optimizer(r, PIPE_SGD, 0.1, 0, 0, 0, 0, 0); }

void messageFirst(pipe_rank *r) {
  pipe_step_begin(r);
  for (int mb = 0; mb < 4; ++mb) {
    pipe_action_begin(r, PIPE_ACTION_FORWARD, 0, mb);
    pipe_tensor *x = pipe_splat(r, PIPE_F32, PIPE_INTS(kMessageFloats), mb + 1);
    pipe_send(r, x, 1, 7, PIPE_TRANSFER_ACTIVATION, mb);
    pipe_free(r, x);
    pipe_action_end(r);
  }
  pipe_tensor *go = pipe_splat(r, PIPE_F32, PIPE_INTS(1), 0);
  pipe_send(r, go, 1, 8, PIPE_TRANSFER_ACTIVATION, 0);
  pipe_free(r, go);
  for (int mb = 3; mb >= 0; --mb) { // in another order than sent
    pipe_action_begin(r, PIPE_ACTION_BACKWARD, 0, mb);
    pipe_tensor *g =
        pipe_recv(r, 1, 7, PIPE_TRANSFER_GRADIENT, mb, PIPE_F32, PIPE_INTS(kMessageFloats));
    recordMessage(r, mb, g);
    pipe_free(r, g);
    pipe_action_end(r);
  }
  pipe_step_end(r);
}

void messageLast(pipe_rank *r) {
  pipe_step_begin(r);
  pipe_free(r, pipe_recv(r, 0, 8, PIPE_TRANSFER_ACTIVATION, 0, PIPE_F32, PIPE_INTS(1)));
  for (int mb = 0; mb < 4; ++mb) {
    pipe_action_begin(r, PIPE_ACTION_FORWARD, 1, mb);
    pipe_tensor *x =
        pipe_recv(r, 0, 7, PIPE_TRANSFER_ACTIVATION, mb, PIPE_F32, PIPE_INTS(kMessageFloats));
    recordMessage(r, mb, x);
    pipe_tensor *g = pipe_alloc(r, PIPE_F32, PIPE_INTS(kMessageFloats), PIPE_MEM_WORKSPACE);
    pipe_k_binary(r, PIPE_ADD, x, x, g);
    pipe_free(r, x);
    pipe_send(r, g, 0, 7, PIPE_TRANSFER_GRADIENT, mb);
    pipe_free(r, g);
    pipe_action_end(r);
  }
  pipe_step_end(r);
}

void messageLastOfTheWrongShape(pipe_rank *r) {
  pipe_step_begin(r);
  pipe_action_begin(r, PIPE_ACTION_FORWARD, 1, 0);
  pipe_free(r, pipe_recv(r, 0, 7, PIPE_TRANSFER_ACTIVATION, 0, PIPE_F32, PIPE_INTS(10, 100)));
  pipe_action_end(r);
  pipe_step_end(r);
}

} // namespace

TEST(DeviceRun, RanksOfOneProcessPassMessagesDeviceToDeviceCountedAsOnTheCpu) {
  std::map<std::string, std::vector<int64_t>> peaks; // "backend/rank" -> per category
  for (Backend backend : {Backend::Cpu, Backend::Emulated}) {
    RunSettings settings;
    settings.ranks = 2;
    settings.microbatches = 4;
    settings.timeoutSeconds = 10;
    settings.backend = backend;
    settings.emulatedDeviceBytes = int64_t(16) << 20;
    RunHooks hooks;
    hooks.finished = [&](pipe_rank *r) {
      std::vector<int64_t> peak(PIPE_MEM_CATEGORIES);
      for (int c = 0; c < PIPE_MEM_CATEGORIES; ++c)
        peak[c] = pipe_memory_peak(r, c);
      std::lock_guard<std::mutex> lock(messageMutex);
      peaks[messageBackend(r) + "/" + std::to_string(r->id)] = peak;
    };
    ASSERT_EQ(runInThreads(settings, {{messageSetup, messageFirst}, {messageSetup, messageLast}},
                           1, hooks),
              "")
        << backendName(backend);
  }
  for (const char *backend : {"cpu", "emulated"})
    for (int mb = 0; mb < 4; ++mb) {
      std::string at = std::string(backend) + "/" + std::to_string(mb);
      EXPECT_EQ(messageValues[std::string(backend) + "/1/" + std::to_string(mb)],
                std::vector<float>(kMessageFloats, mb + 1.0f))
          << at;
      EXPECT_EQ(messageValues[std::string(backend) + "/0/" + std::to_string(mb)],
                std::vector<float>(kMessageFloats, 2 * (mb + 1.0f)))
          << at;
    }
  // Rank 1's peaks do not depend on timing: nothing it sends is taken before
  // its last send, and it receives one activation at a time.
  EXPECT_EQ(peaks["emulated/1"], peaks["cpu/1"]) << "rank 1's peaks per category";
  EXPECT_EQ(peaks["cpu/1"][PIPE_MEM_COMM], 4 * kMessageFloats * 4);
  // Rank 0 holds its four sends at once: on the device too, where staging
  // through the host counted none of them.
  EXPECT_GE(peaks["emulated/0"][PIPE_MEM_COMM], 4 * kMessageFloats * 4);
}

TEST(DeviceRun, AMessageOfTheWrongShapeBetweenDevicesNamesBoth) {
  RunSettings settings;
  settings.ranks = 2;
  settings.microbatches = 1;
  settings.timeoutSeconds = 10;
  settings.backend = Backend::Emulated;
  settings.emulatedDeviceBytes = int64_t(16) << 20;
  std::string failure = runInThreads(
      settings, {{messageSetup, messageFirst}, {messageSetup, messageLastOfTheWrongShape}}, 1, {});
  EXPECT_NE(failure.find("rank 1"), std::string::npos) << failure;
  EXPECT_NE(failure.find("activation from rank 0 (tag 7, micro-batch 0) is f32 [1000], expected "
                         "f32 [10, 100]"),
            std::string::npos)
      << failure;
}

TEST(EmulatedDevice, CopiesFromAnotherEmulatedDevice) {
  auto a = makeEmulatedDevice(1 << 20), b = makeEmulatedDevice(1 << 20);
  std::vector<float> values{1, 2, 3, 4}, back(4);
  void *from = a->allocate(16), *to = b->allocate(16);
  a->toDevice(from, values.data(), 16);
  b->fromPeer(to, *a, from, 16);
  b->toHost(back.data(), to, 16);
  EXPECT_EQ(back, values);
  EXPECT_THROW(b->fromPeer(to, *a, values.data(), 16), DeviceError)
      << "a host address is not the source device's memory";
  a->release(from);
  b->release(to);
}

TEST(DeviceRank, RunningOutOfDeviceMemoryNamesRankStageCategoryAndBytes) {
  DeviceRank rank(Backend::Emulated, 1 << 20);
  pipe_rank *r = rank.r;
  pipe_declare_node(r, 3, "/blocks.0/attn/MatMul");
  pipe_step_begin(r);
  pipe_action_begin(r, PIPE_ACTION_FORWARD, 2, 0);
  pipe_node(r, 3);
  pipe_tensor *held = pipe_alloc(r, PIPE_F32, PIPE_INTS(1000), PIPE_MEM_SAVED);
  std::string message =
      failureOf([&] { pipe_alloc(r, PIPE_F32, PIPE_INTS(512, 512), PIPE_MEM_WORKSPACE); });
  EXPECT_NE(message.find("rank 0"), std::string::npos) << message;
  EXPECT_NE(message.find("/blocks.0/attn/MatMul"), std::string::npos) << message;
  EXPECT_NE(message.find("stage 2"), std::string::npos) << message;
  EXPECT_NE(message.find("1048576 bytes of workspace"), std::string::npos) << message;
  EXPECT_NE(message.find("f32 [512, 512]"), std::string::npos) << message;
  EXPECT_NE(message.find("emulated device"), std::string::npos) << message;
  EXPECT_NE(message.find("saved 4000"), std::string::npos) << "what the rank holds: " << message;
  pipe_free(r, held);
}

std::vector<float> randomValues(std::mt19937 &random, int64_t n) {
  std::normal_distribution<float> normal;
  std::vector<float> values(static_cast<size_t>(n));
  for (float &v : values)
    v = normal(random);
  return values;
}

int64_t elementsOf(pipe_ints shape) {
  int64_t n = 1;
  for (int d = 0; d < shape.n; ++d)
    n *= shape.v[d];
  return n;
}

struct Outcome {
  std::vector<float> cpu, emulated; ///< the output's values on each backend
  int64_t native = 0, staged = 0;   ///< the emulated rank's kernel calls
  int64_t library = 0;              ///< of those, convolutions by the device's library
};

/// Runs `body` on a CPU rank and on an emulated-device rank over the same
/// random inputs of `shapes`: the output (last tensor) of each, and how the
/// emulated rank ran its kernels.
template <typename Body>
Outcome onBothBackends(const std::vector<pipe_ints> &shapes, pipe_ints output, Body body) {
  DeviceRank cpu(Backend::Cpu), emulated(Backend::Emulated);
  std::mt19937 random(11);
  std::vector<std::vector<float>> inputs;
  for (const pipe_ints &shape : shapes)
    inputs.push_back(randomValues(random, elementsOf(shape)));
  Outcome outcome;
  for (DeviceRank *rank : {&cpu, &emulated}) {
    pipe_rank *r = rank->r;
    std::vector<pipe_tensor *> tensors;
    for (size_t i = 0; i < shapes.size(); ++i)
      tensors.push_back(tensorOf(r, inputs[i], shapes[i]));
    pipe_tensor *y = pipe_alloc(r, PIPE_F32, output, PIPE_MEM_WORKSPACE);
    body(r, tensors, y);
    (r->device ? outcome.emulated : outcome.cpu) = valuesOn(r, y);
    for (pipe_tensor *t : tensors)
      pipe_free(r, t);
    pipe_free(r, y);
  }
  outcome.native = emulated.r->nativeKernelCalls;
  outcome.library = emulated.r->libraryConvCalls;
  for (const auto &[kernel, calls] : emulated.r->stagedKernelCalls)
    outcome.staged += calls;
  return outcome;
}

double relativeError(const std::vector<float> &ours, const std::vector<float> &reference) {
  double worst = 0, scale = 1e-30;
  for (size_t i = 0; i < reference.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(ours[i]) - reference[i]));
    scale = std::max(scale, std::abs(static_cast<double>(reference[i])));
  }
  return worst / scale;
}

TEST(DeviceRank, StagedKernelsGiveTheCpuKernelsBits) {
  // tile and range have no native version: the CPU kernels run on
  // downloaded inputs.
  Outcome o = onBothBackends({PIPE_INTS(3, 5)}, PIPE_INTS(6, 5),
                             [](pipe_rank *r, auto &in, pipe_tensor *y) {
                               pipe_tensor *t =
                                   pipe_alloc(r, PIPE_F32, PIPE_INTS(5), PIPE_MEM_WORKSPACE);
                               pipe_k_tile(r, in[0], y);
                               pipe_k_range(r, t, -1.5, 0.75);
                               pipe_k_binary(r, PIPE_MUL, y, t, y);
                               pipe_free(r, t);
                             });
  ASSERT_EQ(o.cpu.size(), 30u);
  EXPECT_EQ(o.cpu, o.emulated);
  EXPECT_EQ(o.staged, 2);
  EXPECT_EQ(o.native, 1);
}

/// The native kernels' host side (shapes to launches, row-major GEMMs to
/// cuBLAS's column-major ones, broadcasts to strides) against the CPU kernels,
/// case by case, on the emulated device: the same formulas, so within
/// rounding (the emulated GEMM sums in double).
TEST(DeviceRank, NativeKernelsAgreeWithTheCpuKernels) {
  struct Case {
    const char *name;
    std::vector<pipe_ints> inputs;
    pipe_ints output;
    std::function<void(pipe_rank *, std::vector<pipe_tensor *> &, pipe_tensor *)> run;
  };
  auto matmul = [](pipe_rank *r, std::vector<pipe_tensor *> &in, pipe_tensor *y) {
    pipe_k_matmul(r, in[0], in[1], y);
  };
  auto gemm = [](int transA, int transB, bool withC, double beta) {
    return [=](pipe_rank *r, std::vector<pipe_tensor *> &in, pipe_tensor *y) {
      pipe_k_gemm(r, in[0], in[1], withC ? in[2] : nullptr, y, 0.75, beta, transA, transB);
    };
  };
  auto binary = [](int32_t fn) {
    return [=](pipe_rank *r, std::vector<pipe_tensor *> &in, pipe_tensor *y) {
      pipe_k_binary(r, fn, in[0], in[1], y);
    };
  };
  const std::vector<Case> cases = {
      {"matmul 2-D", {PIPE_INTS(5, 7), PIPE_INTS(7, 3)}, PIPE_INTS(5, 3), matmul},
      {"matmul batched a, shared b (folded)",
       {PIPE_INTS(2, 3, 5, 7), PIPE_INTS(7, 4)}, PIPE_INTS(2, 3, 5, 4), matmul},
      {"matmul shared a, batched b", {PIPE_INTS(5, 7), PIPE_INTS(3, 7, 4)}, PIPE_INTS(3, 5, 4),
       matmul},
      {"matmul equal batches", {PIPE_INTS(3, 5, 7), PIPE_INTS(3, 7, 4)}, PIPE_INTS(3, 5, 4),
       matmul},
      {"matmul 1-D a", {PIPE_INTS(7), PIPE_INTS(3, 7, 4)}, PIPE_INTS(3, 4), matmul},
      {"matmul 1-D b", {PIPE_INTS(2, 5, 7), PIPE_INTS(7)}, PIPE_INTS(2, 5), matmul},
      {"matmul broadcast batches (staged)", {PIPE_INTS(2, 1, 5, 7), PIPE_INTS(1, 3, 7, 4)},
       PIPE_INTS(2, 3, 5, 4), matmul},
      {"gemm", {PIPE_INTS(5, 7), PIPE_INTS(7, 3)}, PIPE_INTS(5, 3), gemm(0, 0, false, 0)},
      {"gemm trans a", {PIPE_INTS(7, 5), PIPE_INTS(7, 3)}, PIPE_INTS(5, 3), gemm(1, 0, false, 0)},
      {"gemm trans b, bias row", {PIPE_INTS(5, 7), PIPE_INTS(3, 7), PIPE_INTS(3)}, PIPE_INTS(5, 3),
       gemm(0, 1, true, 0.5)},
      {"gemm both trans, c column", {PIPE_INTS(7, 5), PIPE_INTS(3, 7), PIPE_INTS(5, 1)},
       PIPE_INTS(5, 3), gemm(1, 1, true, 2.0)},
      {"gemm full c", {PIPE_INTS(5, 7), PIPE_INTS(7, 3), PIPE_INTS(5, 3)}, PIPE_INTS(5, 3),
       gemm(0, 0, true, -1.0)},
      {"gemm scalar c", {PIPE_INTS(5, 7), PIPE_INTS(7, 3), PIPE_INTS()}, PIPE_INTS(5, 3),
       gemm(0, 0, true, 1.0)},
      {"add same shape", {PIPE_INTS(4, 6), PIPE_INTS(4, 6)}, PIPE_INTS(4, 6), binary(PIPE_ADD)},
      {"mul row broadcast", {PIPE_INTS(4, 6), PIPE_INTS(6)}, PIPE_INTS(4, 6), binary(PIPE_MUL)},
      {"sub both broadcast", {PIPE_INTS(4, 1, 3), PIPE_INTS(5, 1)}, PIPE_INTS(4, 5, 3),
       binary(PIPE_SUB)},
      {"div scalar", {PIPE_INTS(), PIPE_INTS(2, 3)}, PIPE_INTS(2, 3), binary(PIPE_DIV)},
      {"max column broadcast", {PIPE_INTS(3, 1), PIPE_INTS(3, 4)}, PIPE_INTS(3, 4),
       binary(PIPE_MAX)},
      {"gelu", {PIPE_INTS(3, 4)}, PIPE_INTS(3, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) { pipe_k_unary(r, PIPE_GELU, in[0], y, 0, 0); }},
      {"clip with absent bounds", {PIPE_INTS(3, 4)}, PIPE_INTS(3, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_unary(r, PIPE_CLIP, in[0], y, -0.5, NAN);
       }},
      {"tanh grad", {PIPE_INTS(3, 4), PIPE_INTS(3, 4)}, PIPE_INTS(3, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_unary_grad(r, PIPE_TANH, in[0], in[1], y, 0, 0);
       }},
      {"fill", {}, PIPE_INTS(3, 4), [](pipe_rank *r, auto &, pipe_tensor *y) {
         pipe_k_fill(r, y, -2.5);
       }},
      {"reduce sum, middle axes", {PIPE_INTS(2, 3, 4, 5)}, PIPE_INTS(2, 1, 1, 5),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_reduce(r, PIPE_REDUCE_SUM, in[0], y, PIPE_INTS(1, 2));
       }},
      {"reduce mean, outer and inner", {PIPE_INTS(3, 4, 5)}, PIPE_INTS(4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_reduce(r, PIPE_REDUCE_MEAN, in[0], y, PIPE_INTS(0, 2));
       }},
      {"reduce max, all", {PIPE_INTS(3, 4)}, PIPE_INTS(),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_reduce(r, PIPE_REDUCE_MAX, in[0], y, PIPE_INTS(0, 1));
       }},
      {"reduce prod, none", {PIPE_INTS(3, 4)}, PIPE_INTS(3, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_reduce(r, PIPE_REDUCE_PROD, in[0], y, PIPE_INTS());
       }},
      {"transpose", {PIPE_INTS(2, 3, 4)}, PIPE_INTS(4, 2, 3),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_transpose(r, in[0], y, PIPE_INTS(2, 0, 1));
       }},
      {"slice, a negative step", {PIPE_INTS(5, 6)}, PIPE_INTS(2, 3),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_slice(r, in[0], y, PIPE_INTS(1, 5), PIPE_INTS(2, -2));
       }},
      {"slice assign", {PIPE_INTS(2, 3)}, PIPE_INTS(5, 6),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_fill(r, y, 0.5);
         pipe_k_slice_assign(r, in[0], y, PIPE_INTS(1, 0), PIPE_INTS(2, 2));
       }},
      {"expand", {PIPE_INTS(3, 1)}, PIPE_INTS(2, 3, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) { pipe_k_expand(r, in[0], y); }},
      {"softmax, middle axis", {PIPE_INTS(2, 5, 3)}, PIPE_INTS(2, 5, 3),
       [](pipe_rank *r, auto &in, pipe_tensor *y) { pipe_k_softmax(r, in[0], y, 1); }},
      {"log-softmax, last axis", {PIPE_INTS(4, 7)}, PIPE_INTS(4, 7),
       [](pipe_rank *r, auto &in, pipe_tensor *y) { pipe_k_log_softmax(r, in[0], y, 1); }},
      {"softmax grad, first axis", {PIPE_INTS(3, 4), PIPE_INTS(3, 4)}, PIPE_INTS(3, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_softmax(r, in[0], y, 0);
         pipe_k_softmax_grad(r, y, in[1], y, 0);
       }},
      {"layer norm, stats", {PIPE_INTS(2, 3, 4), PIPE_INTS(3, 4), PIPE_INTS(3, 4)},
       PIPE_INTS(2, 3, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *mean = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 1, 1), PIPE_MEM_WORKSPACE);
         pipe_tensor *invstd = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 1, 1), PIPE_MEM_WORKSPACE);
         pipe_k_layer_norm(r, in[0], in[1], in[2], y, mean, invstd, 1, 1e-5);
         // The statistics into y's first elements, so they are compared too.
         pipe_tensor *x = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 3, 4), PIPE_MEM_WORKSPACE);
         pipe_k_layer_norm(r, in[0], in[1], nullptr, x, nullptr, nullptr, 1, 1e-3);
         pipe_k_binary(r, PIPE_ADD, y, x, y);
         pipe_k_binary(r, PIPE_MUL, y, invstd, y);
         pipe_k_binary(r, PIPE_SUB, y, mean, y);
         for (pipe_tensor *t : {mean, invstd, x})
           pipe_free(r, t);
       }},
      {"layer norm grad", {PIPE_INTS(4, 6), PIPE_INTS(6), PIPE_INTS(4, 6)}, PIPE_INTS(4, 6),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *mean = pipe_alloc(r, PIPE_F32, PIPE_INTS(4, 1), PIPE_MEM_WORKSPACE);
         pipe_tensor *invstd = pipe_alloc(r, PIPE_F32, PIPE_INTS(4, 1), PIPE_MEM_WORKSPACE);
         pipe_tensor *dscale = pipe_alloc(r, PIPE_F32, PIPE_INTS(6), PIPE_MEM_WORKSPACE);
         pipe_tensor *dbias = pipe_alloc(r, PIPE_F32, PIPE_INTS(6), PIPE_MEM_WORKSPACE);
         pipe_k_layer_norm(r, in[0], in[1], nullptr, y, mean, invstd, 1, 1e-5);
         pipe_k_layer_norm_grad(r, in[0], in[1], mean, invstd, in[2], y, dscale, dbias, 1);
         pipe_k_binary(r, PIPE_ADD, y, dscale, y);
         pipe_k_binary(r, PIPE_MUL, y, dbias, y);
         for (pipe_tensor *t : {mean, invstd, dscale, dbias})
           pipe_free(r, t);
       }},
      {"log-softmax grad", {PIPE_INTS(3, 4), PIPE_INTS(3, 4)}, PIPE_INTS(3, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_log_softmax(r, in[0], y, 1);
         pipe_k_log_softmax_grad(r, y, in[1], y, 1);
       }},
      {"compare, and, where with broadcasts", {PIPE_INTS(4, 6), PIPE_INTS(6), PIPE_INTS(4, 1)},
       PIPE_INTS(4, 6),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *greater = pipe_alloc(r, PIPE_BOOL, PIPE_INTS(4, 6), PIPE_MEM_WORKSPACE);
         pipe_tensor *below = pipe_alloc(r, PIPE_BOOL, PIPE_INTS(4, 6), PIPE_MEM_WORKSPACE);
         pipe_k_binary(r, PIPE_GREATER, in[0], in[1], greater);
         pipe_k_binary(r, PIPE_LESS_EQUAL, in[0], in[2], below);
         pipe_k_binary(r, PIPE_AND, greater, below, below);
         pipe_k_binary(r, PIPE_EQUAL, below, greater, greater);
         pipe_k_where(r, greater, in[1], in[2], y);
         pipe_free(r, greater);
         pipe_free(r, below);
       }},
      {"integer arithmetic and comparison", {PIPE_INTS(3, 4), PIPE_INTS(3, 4)}, PIPE_INTS(3, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *a = tensorOfType<int64_t>(r, PIPE_I64, {3, -7, 12, 0, 5, 9, -2, 8, 1, 4, -6, 7},
                                                PIPE_INTS(3, 4));
         pipe_tensor *b = tensorOfType<int64_t>(r, PIPE_I64, {2, -3, 5, 1}, PIPE_INTS(4));
         pipe_tensor *c = pipe_alloc(r, PIPE_I64, PIPE_INTS(3, 4), PIPE_MEM_WORKSPACE);
         pipe_tensor *small = tensorOfType<int32_t>(r, PIPE_I32, {4, -1, 3}, PIPE_INTS(3, 1));
         pipe_tensor *wide = pipe_alloc(r, PIPE_I32, PIPE_INTS(3, 4), PIPE_MEM_WORKSPACE);
         pipe_tensor *keep = pipe_alloc(r, PIPE_BOOL, PIPE_INTS(3, 4), PIPE_MEM_WORKSPACE);
         pipe_k_binary(r, PIPE_MUL, a, b, c);
         pipe_k_binary(r, PIPE_SUB, c, a, c);
         pipe_k_binary(r, PIPE_MAX, c, b, c);
         pipe_k_binary(r, PIPE_GREATER_EQUAL, c, a, keep);
         pipe_k_where(r, keep, in[0], in[1], y);
         pipe_tensor *mixed = pipe_alloc(r, PIPE_I32, PIPE_INTS(3, 1), PIPE_MEM_WORKSPACE);
         pipe_k_binary(r, PIPE_ADD, small, small, mixed);
         pipe_k_binary(r, PIPE_MIN, mixed, small, mixed);
         pipe_tensor *row = tensorOfType<int32_t>(r, PIPE_I32, {0, 1, 2, 3}, PIPE_INTS(4));
         pipe_k_binary(r, PIPE_LESS, row, mixed, keep);
         pipe_k_where(r, keep, y, in[0], y);
         for (pipe_tensor *t : {a, b, c, small, wide, keep, mixed, row})
           pipe_free(r, t);
       }},
      {"trilu on floats and on booleans", {PIPE_INTS(2, 3, 5), PIPE_INTS(2, 3, 5)},
       PIPE_INTS(2, 3, 5),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *mask = pipe_alloc(r, PIPE_BOOL, PIPE_INTS(2, 3, 5), PIPE_MEM_WORKSPACE);
         pipe_k_trilu(r, in[0], y, 1, 1);
         pipe_k_binary(r, PIPE_LESS, in[1], in[0], mask);
         pipe_k_trilu(r, mask, mask, -1, 0);
         pipe_k_where(r, mask, in[1], y, y);
         pipe_free(r, mask);
       }},
      {"gather, negative and repeated indices", {PIPE_INTS(3, 5, 2)}, PIPE_INTS(3, 2, 2, 2),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *index =
             tensorOfType<int64_t>(r, PIPE_I64, {4, -1, 0, 4}, PIPE_INTS(2, 2));
         pipe_k_gather(r, in[0], index, y, 1);
         pipe_free(r, index);
       }},
      {"gather grad, repeated indices add up", {PIPE_INTS(2, 4, 3)}, PIPE_INTS(2, 5, 3),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *index = tensorOfType<int32_t>(r, PIPE_I32, {1, -4, 3, 1}, PIPE_INTS(4));
         pipe_k_gather_grad(r, in[0], index, y, 1);
         pipe_free(r, index);
       }},
      {"dropout with its mask", {PIPE_INTS(5, 7)}, PIPE_INTS(5, 7),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *mask = pipe_alloc(r, PIPE_BOOL, PIPE_INTS(5, 7), PIPE_MEM_WORKSPACE);
         pipe_k_dropout(r, in[0], y, mask, 0.4, 3, 17);
         pipe_k_where(r, mask, y, in[0], y);
         pipe_free(r, mask);
       }},
      {"cross entropy over [N, C, d], ignore_index", {PIPE_INTS(2, 5, 3)}, PIPE_INTS(2, 5, 3),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *labels = tensorOfType<int64_t>(r, PIPE_I64, {4, 0, -100, 2, 2, 1},
                                                     PIPE_INTS(2, 3));
         pipe_tensor *loss = pipe_alloc(r, PIPE_F32, PIPE_INTS(), PIPE_MEM_WORKSPACE);
         pipe_k_softmax_cross_entropy(r, in[0], labels, loss, y, -100, 0.5);
         pipe_tensor *grad = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 5, 3), PIPE_MEM_WORKSPACE);
         pipe_k_softmax_cross_entropy_grad(r, loss, y, labels, grad, -100, 0.5);
         // y = log_prob + loss + grad: all three compared.
         pipe_k_binary(r, PIPE_ADD, y, loss, y);
         pipe_k_binary(r, PIPE_ADD, y, grad, y);
         for (pipe_tensor *t : {labels, loss, grad})
           pipe_free(r, t);
       }},
      {"conv 2-D: stride, padding, dilation, bias", {PIPE_INTS(2, 3, 7, 6), PIPE_INTS(4, 3, 3, 2),
        PIPE_INTS(4)}, PIPE_INTS(2, 4, 4, 5),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_conv(r, in[0], in[1], in[2], y, PIPE_INTS(2, 1), PIPE_INTS(1, 0, 1, 1),
                     PIPE_INTS(1, 2), 1);
       }},
      {"conv 1-D grouped pointwise", {PIPE_INTS(2, 4, 5), PIPE_INTS(6, 2, 1)}, PIPE_INTS(2, 6, 5),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_conv(r, in[0], in[1], nullptr, y, PIPE_INTS(1), PIPE_INTS(0, 0), PIPE_INTS(1), 2);
       }},
      {"conv grad input, grouped, strided", {PIPE_INTS(2, 6, 3, 3), PIPE_INTS(6, 2, 3, 3)},
       PIPE_INTS(2, 4, 6, 5),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_conv_grad_input(r, in[0], in[1], y, PIPE_INTS(2, 2), PIPE_INTS(1, 1, 1, 1),
                                PIPE_INTS(1, 1), 2);
       }},
      {"conv grad weight, grouped, strided", {PIPE_INTS(2, 4, 6, 5), PIPE_INTS(2, 6, 3, 3)},
       PIPE_INTS(6, 2, 3, 3),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_conv_grad_weight(r, in[0], in[1], y, PIPE_INTS(2, 2), PIPE_INTS(1, 1, 1, 1),
                                 PIPE_INTS(1, 1), 2);
       }},
      {"conv grads, 3-D pointwise", {PIPE_INTS(2, 3, 2, 3, 2), PIPE_INTS(4, 3, 1, 1, 1),
        PIPE_INTS(2, 4, 2, 3, 2)}, PIPE_INTS(2, 3, 2, 3, 2),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *dw = pipe_alloc(r, PIPE_F32, PIPE_INTS(4, 3, 1, 1, 1), PIPE_MEM_WORKSPACE);
         pipe_k_conv_grad_weight(r, in[0], in[2], dw, PIPE_INTS(1, 1, 1), PIPE_INTS(0, 0, 0, 0, 0, 0),
                                 PIPE_INTS(1, 1, 1), 1);
         // dx from the weight gradient: both compared.
         pipe_k_conv_grad_input(r, in[2], dw, y, PIPE_INTS(1, 1, 1), PIPE_INTS(0, 0, 0, 0, 0, 0),
                                PIPE_INTS(1, 1, 1), 1);
         pipe_free(r, dw);
       }},
      {"max pool, ceil mode, dilation", {PIPE_INTS(2, 3, 7, 7)}, PIPE_INTS(2, 3, 4, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_max_pool(r, in[0], y, nullptr, PIPE_INTS(3, 2), PIPE_INTS(2, 2),
                         PIPE_INTS(1, 0, 1, 1), PIPE_INTS(1, 2));
       }},
      {"max pool grad through its indices", {PIPE_INTS(2, 3, 7, 7), PIPE_INTS(2, 3, 3, 4)},
       PIPE_INTS(2, 3, 7, 7),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         // Overlapping windows: an input can be the maximum of two.
         pipe_tensor *pooled = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 3, 3, 4), PIPE_MEM_WORKSPACE);
         pipe_tensor *index = pipe_alloc(r, PIPE_I64, PIPE_INTS(2, 3, 3, 4), PIPE_MEM_WORKSPACE);
         pipe_k_max_pool(r, in[0], pooled, index, PIPE_INTS(3, 3), PIPE_INTS(2, 2),
                         PIPE_INTS(0, 1, 0, 1), PIPE_INTS(1, 1));
         pipe_k_max_pool_grad(r, in[1], index, y);
         pipe_free(r, pooled);
         pipe_free(r, index);
       }},
      {"max pool grad, an index outside its plane (staged)", {PIPE_INTS(1, 2, 1, 2)},
       PIPE_INTS(1, 2, 2, 2),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *index = tensorOfType<int64_t>(r, PIPE_I64, {0, 5, 3, -1}, PIPE_INTS(1, 2, 1, 2));
         pipe_k_max_pool_grad(r, in[0], index, y);
         pipe_free(r, index);
       }},
      {"average pool, padding counted, ceil mode", {PIPE_INTS(2, 2, 5, 6)}, PIPE_INTS(2, 2, 3, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_average_pool(r, in[0], y, PIPE_INTS(3, 3), PIPE_INTS(2, 2), PIPE_INTS(1, 1, 1, 1),
                             1);
       }},
      {"average pool grad, padding not counted", {PIPE_INTS(2, 2, 3, 4)}, PIPE_INTS(2, 2, 5, 6),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_k_average_pool_grad(r, in[0], y, PIPE_INTS(3, 3), PIPE_INTS(2, 2),
                                  PIPE_INTS(1, 1, 1, 1), 0);
       }},
      {"batch norm train, then infer from its running statistics",
       {PIPE_INTS(3, 4, 4), PIPE_INTS(4), PIPE_INTS(4)}, PIPE_INTS(3, 4, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *mean = pipe_alloc(r, PIPE_F32, PIPE_INTS(4), PIPE_MEM_WORKSPACE);
         pipe_tensor *var = pipe_alloc(r, PIPE_F32, PIPE_INTS(4), PIPE_MEM_WORKSPACE);
         pipe_tensor *inferred = pipe_alloc(r, PIPE_F32, PIPE_INTS(3, 4, 4), PIPE_MEM_WORKSPACE);
         pipe_k_fill(r, mean, 0.25);
         pipe_k_fill(r, var, 2.0);
         pipe_k_batch_norm_train(r, in[0], in[1], in[2], mean, var, y, nullptr, nullptr, 1e-5, 0.9);
         pipe_k_batch_norm_infer(r, in[0], in[1], in[2], mean, var, inferred, 1e-3);
         pipe_k_binary(r, PIPE_ADD, y, inferred, y);
         for (pipe_tensor *t : {mean, var, inferred})
           pipe_free(r, t);
       }},
      {"batch norm grad", {PIPE_INTS(3, 4, 4), PIPE_INTS(4), PIPE_INTS(3, 4, 4)},
       PIPE_INTS(3, 4, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *mean = pipe_alloc(r, PIPE_F32, PIPE_INTS(4), PIPE_MEM_WORKSPACE);
         pipe_tensor *invstd = pipe_alloc(r, PIPE_F32, PIPE_INTS(4), PIPE_MEM_WORKSPACE);
         pipe_tensor *dscale = pipe_alloc(r, PIPE_F32, PIPE_INTS(4), PIPE_MEM_WORKSPACE);
         pipe_tensor *dbias = pipe_alloc(r, PIPE_F32, PIPE_INTS(4), PIPE_MEM_WORKSPACE);
         pipe_k_batch_norm_train(r, in[0], in[1], in[1], nullptr, nullptr, y, mean, invstd, 1e-5,
                                 0.9);
         pipe_k_batch_norm_grad(r, in[0], in[1], mean, invstd, in[2], y, dscale, dbias);
         // dx, dscale and dbias (broadcast along the last dim) all compared.
         pipe_k_binary(r, PIPE_ADD, y, dscale, y);
         pipe_k_binary(r, PIPE_MUL, y, dbias, y);
         for (pipe_tensor *t : {mean, invstd, dscale, dbias})
           pipe_free(r, t);
       }},
      {"pad: constant with a crop, then reflect", {PIPE_INTS(6, 5)}, PIPE_INTS(6, 5),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *t = pipe_alloc(r, PIPE_F32, PIPE_INTS(6, 5), PIPE_MEM_WORKSPACE);
         pipe_k_pad(r, in[0], t, PIPE_INTS(1, 0, -1, 0), PIPE_PAD_CONSTANT, 2.5);
         pipe_k_pad(r, t, y, PIPE_INTS(0, -2, 0, 2), PIPE_PAD_REFLECT, 0);
         pipe_free(r, t);
       }},
      {"pad integers (edge) and booleans (wrap, constant)", {PIPE_INTS(4, 5)}, PIPE_INTS(4, 5),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *a = tensorOfType<int64_t>(r, PIPE_I64, {-3, 7, 9}, PIPE_INTS(1, 3));
         pipe_tensor *b = pipe_alloc(r, PIPE_I64, PIPE_INTS(4, 5), PIPE_MEM_WORKSPACE);
         pipe_k_pad(r, a, b, PIPE_INTS(2, 1, 1, 1), PIPE_PAD_EDGE, 0);
         pipe_tensor *m = tensorOfType<uint8_t>(r, PIPE_BOOL, {1, 0, 0}, PIPE_INTS(3, 1));
         pipe_tensor *wrapped = pipe_alloc(r, PIPE_BOOL, PIPE_INTS(4, 3), PIPE_MEM_WORKSPACE);
         pipe_tensor *mask = pipe_alloc(r, PIPE_BOOL, PIPE_INTS(4, 5), PIPE_MEM_WORKSPACE);
         pipe_k_pad(r, m, wrapped, PIPE_INTS(0, 1, 1, 1), PIPE_PAD_WRAP, 0);
         pipe_k_pad(r, wrapped, mask, PIPE_INTS(0, 1, 0, 1), PIPE_PAD_CONSTANT, 1);
         pipe_k_cast(r, b, y);
         pipe_k_where(r, mask, y, in[0], y);
         for (pipe_tensor *t : {a, b, m, wrapped, mask})
           pipe_free(r, t);
       }},
      {"cast between every dtype: saturation, NaN, booleans", {PIPE_INTS(2, 4)}, PIPE_INTS(2, 4),
       [](pipe_rank *r, auto &in, pipe_tensor *y) {
         pipe_tensor *wide = tensorOfType<double>(
             r, PIPE_F64, {3.7, -2.5, NAN, 1e12, -1e12, 0.0, 0.49, -7.0}, PIPE_INTS(2, 4));
         pipe_tensor *i32 = pipe_alloc(r, PIPE_I32, PIPE_INTS(2, 4), PIPE_MEM_WORKSPACE);
         pipe_tensor *i64 = pipe_alloc(r, PIPE_I64, PIPE_INTS(2, 4), PIPE_MEM_WORKSPACE);
         pipe_tensor *flag = pipe_alloc(r, PIPE_BOOL, PIPE_INTS(2, 4), PIPE_MEM_WORKSPACE);
         pipe_tensor *f = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 4), PIPE_MEM_WORKSPACE);
         pipe_k_cast(r, wide, i32);
         pipe_k_cast(r, i32, i64);
         pipe_k_cast(r, i64, flag);
         pipe_k_cast(r, flag, wide);
         pipe_k_cast(r, i32, y);
         pipe_k_cast(r, wide, f);
         pipe_k_binary(r, PIPE_ADD, y, f, y);
         pipe_k_cast(r, in[0], i64);
         pipe_k_cast(r, i64, f);
         pipe_k_binary(r, PIPE_ADD, y, f, y);
         for (pipe_tensor *t : {wide, i32, i64, flag, f})
           pipe_free(r, t);
       }},
  };
  for (const Case &c : cases) {
    Outcome o = onBothBackends(c.inputs, c.output, c.run);
    ASSERT_EQ(o.cpu.size(), o.emulated.size()) << c.name;
    EXPECT_LE(relativeError(o.emulated, o.cpu), 1e-6) << c.name;
    // Every call native, but the one case that is to fall back.
    const bool fallsBack = std::string(c.name).find("(staged)") != std::string::npos;
    EXPECT_EQ(o.staged, fallsBack ? 1 : 0) << c.name;
    EXPECT_GE(o.native, fallsBack ? 0 : 1) << c.name;
  }
}

pipe_ints intsOf(const std::vector<int64_t> &values) {
  pipe_ints ints{};
  ints.n = static_cast<int32_t>(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    ints.v[i] = values[i];
  return ints;
}

std::string intsOfText(const pipe_ints &ints) {
  std::string text = "[";
  for (int i = 0; i < ints.n; ++i)
    text += (i ? ", " : "") + std::to_string(ints.v[i]);
  return text + "]";
}

/// Convolutions and pooling over random geometries (1-3 spatial dims, sizes,
/// kernels, strides, dilations, uneven padding, groups, ceil mode): the
/// native kernels (im2col/col2im and pooling as gathers) against the CPU's.
namespace {

void checkAgreement(const Outcome &o, const std::string &what) {
  ASSERT_EQ(o.cpu.size(), o.emulated.size()) << what;
  EXPECT_LE(relativeError(o.emulated, o.cpu), 1e-6) << what;
  EXPECT_EQ(o.staged, 0) << what;
}

/// `count` random convolutions (1-3 spatial dims, strides, pads at either end,
/// dilations, groups), each pass native on the emulated device against the CPU
/// kernel. Returns how many passes the device's convolution library ran.
int checkRandomConvolutions(std::mt19937 &random, int count) {
  auto pick = [&](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(random);
  };
  int convs = 0, library = 0;
  while (convs < count) {
    const int spatial = pick(1, 3);
    const int64_t batch = pick(1, 2), group = pick(1, 2);
    const int64_t channels = group * pick(1, 3), outChannels = group * pick(1, 3);
    std::vector<int64_t> xShape{batch, channels}, wShape{outChannels, channels / group},
        yShape{batch, outChannels}, strides, pads(2 * spatial), dilations;
    bool valid = true;
    for (int d = 0; d < spatial; ++d) {
      const int64_t in = pick(1, 7), k = pick(1, 3), stride = pick(1, 3), dilation = pick(1, 2);
      pads[d] = pick(0, 2);
      pads[spatial + d] = pick(0, 2);
      const int64_t room = in + pads[d] + pads[spatial + d] - (dilation * (k - 1) + 1);
      valid = valid && room >= 0;
      xShape.push_back(in);
      wShape.push_back(k);
      yShape.push_back(room >= 0 ? room / stride + 1 : 0);
      strides.push_back(stride);
      dilations.push_back(dilation);
    }
    if (!valid)
      continue;
    ++convs;
    const pipe_ints x = intsOf(xShape), w = intsOf(wShape), y = intsOf(yShape),
                    st = intsOf(strides), pd = intsOf(pads), dl = intsOf(dilations);
    std::ostringstream what;
    what << "conv x " << intsOfText(x) << " w " << intsOfText(w)
         << " strides " << intsOfText(st) << " pads " << intsOfText(pd) << " dilations "
         << intsOfText(dl) << " group " << group;
    const std::string name = what.str();
    auto run = [&](const Outcome &outcome, const char *pass) {
      checkAgreement(outcome, name + pass);
      library += static_cast<int>(outcome.library);
    };
    run(onBothBackends({x, w, PIPE_INTS(outChannels)}, y,
                       [&](pipe_rank *r, auto &in, pipe_tensor *out) {
                         pipe_k_conv(r, in[0], in[1], in[2], out, st, pd, dl, group);
                       }),
        " (forward)");
    run(onBothBackends({y, w}, x,
                       [&](pipe_rank *r, auto &in, pipe_tensor *out) {
                         pipe_k_conv_grad_input(r, in[0], in[1], out, st, pd, dl, group);
                       }),
        " (grad input)");
    run(onBothBackends({x, y}, w,
                       [&](pipe_rank *r, auto &in, pipe_tensor *out) {
                         pipe_k_conv_grad_weight(r, in[0], in[1], out, st, pd, dl, group);
                       }),
        " (grad weight)");
  }
  return library;
}

} // namespace

TEST(DeviceRank, RandomWindowGeometriesAgreeWithTheCpuKernels) {
  std::mt19937 random(2026);
  auto pick = [&](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(random);
  };
  int pools = 0;
  const auto check = checkAgreement;
  EXPECT_EQ(checkRandomConvolutions(random, 60), 0) << "no convolution library by default";
  while (pools < 60) {
    const int spatial = pick(1, 3);
    const bool average = pick(0, 1) == 1;
    std::vector<int64_t> xShape{pick(1, 2), pick(1, 3)}, yShape{xShape[0], xShape[1]}, kernel,
        strides, pads(2 * spatial), dilations;
    bool valid = true;
    for (int d = 0; d < spatial; ++d) {
      const int64_t in = pick(1, 8), k = pick(1, 3), stride = pick(1, 3);
      const int64_t dilation = average ? 1 : pick(1, 2);
      pads[d] = pick(0, 2);
      pads[spatial + d] = pick(0, 2);
      const int64_t room = in + pads[d] + pads[spatial + d] - dilation * (k - 1) - 1;
      valid = valid && room >= 0;
      // Floor or ceil mode (a last window may not start in the end padding).
      int64_t out = room / stride + 1;
      int64_t ceil = (room + stride - 1) / stride + 1;
      if ((ceil - 1) * stride >= in + pads[d])
        --ceil;
      if (pick(0, 1) == 1)
        out = ceil;
      xShape.push_back(in);
      yShape.push_back(out);
      kernel.push_back(k);
      strides.push_back(stride);
      dilations.push_back(dilation);
    }
    if (!valid)
      continue;
    ++pools;
    const pipe_ints x = intsOf(xShape), y = intsOf(yShape), kn = intsOf(kernel),
                    st = intsOf(strides), pd = intsOf(pads), dl = intsOf(dilations);
    const int32_t countPad = pick(0, 1);
    std::ostringstream what;
    what << (average ? "average" : "max") << " pool x " << intsOfText(x) << " y "
         << intsOfText(y) << " kernel " << intsOfText(kn) << " strides " << intsOfText(st)
         << " pads " << intsOfText(pd) << " dilations " << intsOfText(dl)
         << " count_include_pad " << countPad;
    if (average) {
      check(onBothBackends({x}, y,
                           [&](pipe_rank *r, auto &in, pipe_tensor *out) {
                             pipe_k_average_pool(r, in[0], out, kn, st, pd, countPad);
                           }),
            what.str());
      check(onBothBackends({y}, x,
                           [&](pipe_rank *r, auto &in, pipe_tensor *out) {
                             pipe_k_average_pool_grad(r, in[0], out, kn, st, pd, countPad);
                           }),
            what.str() + " (grad)");
      continue;
    }
    check(onBothBackends({x}, y,
                         [&](pipe_rank *r, auto &in, pipe_tensor *out) {
                           pipe_k_max_pool(r, in[0], out, nullptr, kn, st, pd, dl);
                         }),
          what.str());
    // The gradient through the indices the forward chose.
    check(onBothBackends({x, y}, x,
                         [&](pipe_rank *r, auto &in, pipe_tensor *out) {
                           pipe_tensor *pooled = pipe_alloc(r, PIPE_F32, y, PIPE_MEM_WORKSPACE);
                           pipe_tensor *index = pipe_alloc(r, PIPE_I64, y, PIPE_MEM_WORKSPACE);
                           pipe_k_max_pool(r, in[0], pooled, index, kn, st, pd, dl);
                           pipe_k_max_pool_grad(r, in[1], index, out);
                           pipe_free(r, pooled);
                           pipe_free(r, index);
                         }),
          what.str() + " (grad)");
  }
}


// The native kernels' path through the device's convolution library (cuDNN on
// a GPU): here the emulated device's direct sums stand for it.
TEST(DeviceRank, ConvolutionsByTheDeviceLibraryAgreeWithTheCpuKernels) {
  setenv("PIPE_EMULATED_CONV_LIBRARY", "1", 1);
  std::mt19937 random(7);
  const int library = checkRandomConvolutions(random, 40);
  EXPECT_GE(library, 20) << "passes with symmetric pads (or pads the output does not see)";
  EXPECT_LT(library, 120) << "and some the library cannot take";
  {
    // Symmetric pads: each pass by the library, its workspace counted.
    DeviceRank rank(Backend::Emulated);
    pipe_rank *r = rank.r;
    pipe_tensor *x = pipe_splat(r, PIPE_F32, PIPE_INTS(1, 2, 5, 5), 1);
    pipe_tensor *w = pipe_splat(r, PIPE_F32, PIPE_INTS(3, 2, 3, 3), 0.5);
    pipe_tensor *y = pipe_alloc(r, PIPE_F32, PIPE_INTS(1, 3, 5, 5), PIPE_MEM_WORKSPACE);
    pipe_k_conv(r, x, w, nullptr, y, PIPE_INTS(1, 1), PIPE_INTS(1, 1, 1, 1), PIPE_INTS(1, 1), 1);
    EXPECT_EQ(r->libraryConvCalls, 1);
    EXPECT_EQ(valuesOn(r, y)[6], 9.0f) << "an inner output sums 2 x 9 taps of 0.5";
    EXPECT_EQ(valuesOn(r, y)[0], 4.0f) << "a corner reads 2 x 4 taps";
    // Pads (0, 0) at the start and (2, 2) at the end: one pad per dim cannot say it.
    pipe_tensor *z = pipe_alloc(r, PIPE_F32, PIPE_INTS(1, 3, 5, 5), PIPE_MEM_WORKSPACE);
    pipe_k_conv(r, x, w, nullptr, z, PIPE_INTS(1, 1), PIPE_INTS(0, 0, 2, 2), PIPE_INTS(1, 1), 1);
    EXPECT_EQ(r->libraryConvCalls, 1) << "the asymmetric pads took the GEMM path";
    EXPECT_EQ(valuesOn(r, z)[0], 9.0f);
    for (pipe_tensor *t : {x, w, y, z})
      pipe_free(r, t);
  }
  unsetenv("PIPE_EMULATED_CONV_LIBRARY");
}
TEST(DeviceRank, AnOptimizerStepOnTheDeviceEqualsTheCpusOne) {
  for (int32_t kind : {PIPE_SGD, PIPE_MOMENTUM, PIPE_ADAM, PIPE_ADAMW}) {
    std::vector<float> trained[2];
    int k = 0;
    for (Backend backend : {Backend::Cpu, Backend::Emulated}) {
      DeviceRank rank(backend);
      pipe_rank *r = rank.r;
      pipe_set_optimizer(r, kind, 0.1, 0.9, 0.9, 0.999, 1e-3, 0.01);
      pipe_declare_param(r, 0, "w", PIPE_F32, PIPE_INTS(4, 5), PIPE_SOURCE_INLINE, nullptr, 0, -1,
                         1, 0);
      std::mt19937 random(7);
      for (int step = 0; step < 3; ++step) {
        pipe_step_begin(r);
        pipe_tensor *g = tensorOf(r, randomValues(random, 20), PIPE_INTS(4, 5));
        pipe_accumulate_grad(r, 0, g);
        pipe_accumulate_grad(r, 0, g);
        pipe_free(r, g);
        pipe_update(r, 0);
        pipe_step_end(r);
      }
      trained[k++] = valuesOn(r, pipe_param(r, 0));
    }
    EXPECT_LE(relativeError(trained[1], trained[0]), 1e-6) << "optimizer " << kind;
  }
}

TEST(DeviceRank, AHostTensorGivenToADeviceRankFailsNamingTheDevice) {
  DeviceRank rank(Backend::Emulated);
  float values[4] = {1, 2, 3, 4};
  pipe_tensor host{};
  host.data = values;
  host.dtype = PIPE_F32;
  host.rank = 1;
  host.shape[0] = 4;
  host.numel = 4;
  pipe_tensor *y = pipe_alloc(rank.r, PIPE_F32, PIPE_INTS(4), PIPE_MEM_WORKSPACE);
  std::string message = failureOf([&] { pipe_k_unary(rank.r, PIPE_RELU, &host, y, 0, 0); });
  EXPECT_NE(message.find("not device memory"), std::string::npos) << message;
  pipe_free(rank.r, y);
}

TEST(CudaBackend, WithoutADeviceItFailsAtOnceWithTheReason) {
  std::string why;
  if (cudaDeviceCount(why) > 0)
    GTEST_SKIP() << "a GPU is present: this checks the machines without one";
  EXPECT_FALSE(why.empty());
  RunSettings settings;
  settings.backend = Backend::Cuda;
  std::string message;
  try {
    pipe_rank_destroy(createRank(settings, 1));
  } catch (const Failure &failure) {
    message = failure.what();
  }
  EXPECT_EQ(message, "rank 1: no CUDA device: " + why);
}

} // namespace
