//===- DeviceTest.cpp - device memory, its accounting and staged kernels ---===//
//
// The device backends' host side, on the emulated device (no GPU needed):
// its memory is out of the host's reach, its first-fit placement agrees with
// a brute-force model of the free space, a rank on it accounts its bytes per
// category as a CPU rank does and reuses freed blocks, running out of device
// memory names the rank, stage, category and bytes, and a kernel run staged
// (inputs downloaded, outputs uploaded) gives the CPU kernel's bits. Whole
// training runs on the emulated device are compared with PyTorch in
// python/tests/test_training_equality.py; the CUDA device itself only on a GPU.
//
//===----------------------------------------------------------------------===//
#include "Device.h"
#include "Rank.h"
#include "TestSupport.h"

#include "pipe_runtime.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

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
  EXPECT_GE(emulated.r->memory.deviceCache.cachedBytes(), 4032)
      << "the device's freed blocks stay cached (at least the 4000-byte one)";
  EXPECT_LE(emulated.r->memory.deviceCache.cachedBytes(), emulated.r->memory.peakTotal());
  EXPECT_EQ(emulated.r->memory.cache.cachedBytes(), 0) << "no host block was used";
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

TEST(DeviceRank, StagedKernelsGiveTheCpuKernelsBits) {
  DeviceRank cpu(Backend::Cpu), emulated(Backend::Emulated);
  std::mt19937 random(3);
  std::normal_distribution<float> normal;
  std::vector<float> a(6 * 5), b(5 * 4);
  for (float &v : a)
    v = normal(random);
  for (float &v : b)
    v = normal(random);
  std::vector<std::vector<float>> results;
  for (DeviceRank *rank : {&cpu, &emulated}) {
    pipe_rank *r = rank->r;
    pipe_tensor *x = tensorOf(r, a, PIPE_INTS(6, 5));
    pipe_tensor *w = tensorOf(r, b, PIPE_INTS(5, 4));
    pipe_tensor *y = pipe_alloc(r, PIPE_F32, PIPE_INTS(6, 4), PIPE_MEM_WORKSPACE);
    pipe_tensor *z = pipe_alloc(r, PIPE_F32, PIPE_INTS(6, 4), PIPE_MEM_WORKSPACE);
    pipe_k_matmul(r, x, w, y);
    pipe_k_softmax(r, y, z, 1);
    pipe_k_binary(r, PIPE_ADD, z, y, z); // the output is also an input
    results.push_back(valuesOn(r, z));
    for (pipe_tensor *t : {x, w, y, z})
      pipe_free(r, t);
  }
  ASSERT_EQ(results[0].size(), 24u);
  EXPECT_EQ(results[0], results[1]);
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
