//===- NpzTest.cpp - .npz reading and writing, and numpy's view of it ------===//
//
// Round trips through our writer and reader for every dtype and rank, numpy
// reading what we write and us reading what numpy writes (np.savez, including
// its zip64 entries), and the one-line errors for what we do not read.
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "Npz.h"

#include <cstring>

using namespace piperun;
using namespace piperun::test;

namespace {

template <typename T>
NpyArray arrayOf(const std::string &name, int32_t dtype, std::vector<int64_t> shape,
                 const std::vector<T> &values) {
  NpyArray array;
  array.name = name;
  array.dtype = dtype;
  array.shape = std::move(shape);
  const char *bytes = reinterpret_cast<const char *>(values.data());
  array.bytes.assign(bytes, bytes + values.size() * sizeof(T));
  return array;
}

std::vector<NpyArray> sampleArrays() {
  std::vector<float> big(3 * 5 * 7);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = 0.25f * static_cast<float>(i) - 3;
  return {arrayOf<float>("input_0", PIPE_F32, {3, 5, 7}, big),
          arrayOf<double>("d", PIPE_F64, {2}, {1.5, -2.25}),
          arrayOf<int64_t>("label_0", PIPE_I64, {2, 2}, {0, 7, -3, 1ll << 40}),
          arrayOf<int32_t>("i32", PIPE_I32, {3}, {1, -2, 3}),
          arrayOf<uint8_t>("mask", PIPE_BOOL, {4}, {1, 0, 0, 1}),
          arrayOf<uint16_t>("half", PIPE_F16, {1}, {0x3C00}),
          arrayOf<float>("scalar", PIPE_F32, {}, {42}),
          arrayOf<float>("empty", PIPE_F32, {0, 3}, {})};
}

void expectSame(const std::vector<NpyArray> &a, const std::vector<NpyArray> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].dtype, b[i].dtype) << a[i].name;
    EXPECT_EQ(a[i].shape, b[i].shape) << a[i].name;
    EXPECT_EQ(a[i].bytes, b[i].bytes) << a[i].name;
  }
}

std::string errorOf(const std::vector<char> &archive) {
  try {
    parseNpz(archive, "x.npz");
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

bool havePythonNumpy() {
  return runCommand({PIPE_RUNTIME_PYTHON, "-c", "import numpy"}, 60).exitCode == 0;
}

TEST(Npz, RoundTripEveryDtypeAndRank) {
  std::string dir = scratchDir();
  writeNpz(dir + "/a.npz", sampleArrays());
  expectSame(readNpz(dir + "/a.npz"), sampleArrays());
}

TEST(Npz, NumpyReadsWhatWeWrite) {
  if (!havePythonNumpy())
    GTEST_SKIP() << "no numpy";
  std::string dir = scratchDir();
  writeNpz(dir + "/ours.npz", sampleArrays());
  const char *script = R"(
import sys, numpy as np
d = np.load(sys.argv[1])
assert sorted(d.files) == sorted(["input_0", "d", "label_0", "i32", "mask", "half", "scalar", "empty"]), d.files
x = d["input_0"]
assert x.dtype == np.float32 and x.shape == (3, 5, 7)
assert np.array_equal(x.reshape(-1), 0.25 * np.arange(105, dtype=np.float32) - 3)
assert d["d"].tolist() == [1.5, -2.25]
assert d["label_0"].dtype == np.int64 and d["label_0"].tolist() == [[0, 7], [-3, 1 << 40]]
assert d["i32"].dtype == np.int32 and d["i32"].tolist() == [1, -2, 3]
assert d["mask"].dtype == np.bool_ and d["mask"].tolist() == [True, False, False, True]
assert d["half"].dtype == np.float16 and d["half"].tolist() == [1.0]
assert d["scalar"].shape == () and float(d["scalar"]) == 42.0
assert d["empty"].shape == (0, 3)
)";
  CommandResult result = runCommand({PIPE_RUNTIME_PYTHON, "-c", script, dir + "/ours.npz"}, 120);
  EXPECT_EQ(result.exitCode, 0) << result.err;
}

TEST(Npz, WeReadWhatNumpyWrites) {
  if (!havePythonNumpy())
    GTEST_SKIP() << "no numpy";
  std::string dir = scratchDir();
  const char *script = R"(
import sys, numpy as np
np.savez(sys.argv[1], input_0=np.arange(12, dtype=np.float32).reshape(3, 4) / 8,
         label_0=np.array([3, 1, 2], dtype=np.int64), flag=np.array([True, False]),
         wide=np.array([[1.0, 2.0]], dtype=np.float64), s=np.float32(-1.5),
         column=np.asfortranarray(np.ones((2, 3), dtype=np.float32))[:, :1].copy())
)";
  CommandResult made = runCommand({PIPE_RUNTIME_PYTHON, "-c", script, dir + "/theirs.npz"}, 120);
  ASSERT_EQ(made.exitCode, 0) << made.err;
  std::vector<NpyArray> arrays = readNpz(dir + "/theirs.npz");
  ASSERT_EQ(arrays.size(), 6u);
  std::map<std::string, NpyArray> byName;
  for (NpyArray &a : arrays)
    byName[a.name] = a;
  const NpyArray &x = byName.at("input_0");
  EXPECT_EQ(x.dtype, PIPE_F32);
  EXPECT_EQ(x.shape, (std::vector<int64_t>{3, 4}));
  std::vector<float> values(12);
  std::memcpy(values.data(), x.bytes.data(), 48);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(values[i], i / 8.0f);
  EXPECT_EQ(byName.at("label_0").dtype, PIPE_I64);
  EXPECT_EQ(byName.at("flag").dtype, PIPE_BOOL);
  EXPECT_EQ(byName.at("wide").dtype, PIPE_F64);
  EXPECT_EQ(byName.at("s").shape.size(), 0u);
  EXPECT_EQ(byName.at("column").shape, (std::vector<int64_t>{2, 1}));
}

TEST(Npz, ClearErrors) {
  std::vector<char> good = serializeNpz({arrayOf<float>("a", PIPE_F32, {2}, {1, 2})});
  EXPECT_EQ(errorOf(std::vector<char>(good.begin(), good.begin() + 10)),
            "x.npz: not an .npz archive (too short)");
  std::vector<char> corrupt = good;
  // One entry: local header (30) + "a.npy" + 64-byte .npy header, then its 8 data bytes.
  corrupt[30 + 5 + 64 + 1] ^= 1;
  EXPECT_EQ(errorOf(corrupt), "x.npz: array a is corrupt (CRC mismatch)");
  std::vector<char> compressed = good;
  // The central directory entry (46 + "a.npy") precedes the 22-byte end record;
  // its compression method (offset 10) becomes deflate.
  compressed[good.size() - 22 - (46 + 5) + 10] = 8;
  EXPECT_EQ(errorOf(compressed),
            "x.npz: array a is compressed (np.savez_compressed); write it with np.savez");
  try {
    readNpz("/nonexistent/data.npz");
    FAIL();
  } catch (const std::exception &e) {
    EXPECT_EQ(std::string(e.what()).rfind("/nonexistent/data.npz: cannot open", 0), 0u);
  }
}

// What fuzzing found (test/fuzz/NpzReaderFuzzer.cpp): archives that used to be
// read into something that does not write back the same.
TEST(Npz, NamesAndShapesThatCannotRoundTripAreRefused) {
  EXPECT_EQ(errorOf(serializeNpz({arrayOf<float>("", PIPE_F32, {1}, {1})})),
            "x.npz: zip entry '.npy' is not a .npy array (\"<name>.npy\")");
  EXPECT_EQ(errorOf(serializeNpz({arrayOf<float>("a", PIPE_F32, {1}, {1}),
                                  arrayOf<float>("a", PIPE_F32, {1}, {2})})),
            "x.npz: array a appears twice");
  // A shape whose element count overflows: refused before any size is computed.
  EXPECT_EQ(errorOf(serializeNpz({arrayOf<float>("big", PIPE_F32, {1ll << 30, 1ll << 30}, {})})),
            "x.npz: array big: shape (1073741824, 1073741824) has more than 2^40 elements");
}

TEST(Npz, UnsupportedDtypeAndLayoutAreNamed) {
  if (!havePythonNumpy())
    GTEST_SKIP() << "no numpy";
  std::string dir = scratchDir();
  CommandResult made =
      runCommand({PIPE_RUNTIME_PYTHON, "-c",
                  "import sys, numpy as np; np.savez(sys.argv[1], u=np.zeros(2, dtype=np.uint16))",
                  dir + "/u.npz"},
                 120);
  ASSERT_EQ(made.exitCode, 0) << made.err;
  try {
    readNpz(dir + "/u.npz");
    FAIL();
  } catch (const std::exception &e) {
    EXPECT_NE(std::string(e.what()).find("array u: dtype '<u2' is not supported"),
              std::string::npos)
        << e.what();
  }
  made = runCommand({PIPE_RUNTIME_PYTHON, "-c",
                     "import sys, numpy as np; np.savez(sys.argv[1], "
                     "f=np.asfortranarray(np.ones((2, 3), dtype=np.float32)))",
                     dir + "/f.npz"},
                    120);
  ASSERT_EQ(made.exitCode, 0) << made.err;
  try {
    readNpz(dir + "/f.npz");
    FAIL();
  } catch (const std::exception &e) {
    EXPECT_NE(std::string(e.what()).find("array f: Fortran-order arrays are not supported"),
              std::string::npos)
        << e.what();
  }
  made = runCommand({PIPE_RUNTIME_PYTHON, "-c",
                     "import sys, numpy as np; np.savez_compressed(sys.argv[1], "
                     "input_0=np.zeros(3, dtype=np.float32))",
                     dir + "/c.npz"},
                    120);
  ASSERT_EQ(made.exitCode, 0) << made.err;
  try {
    readNpz(dir + "/c.npz");
    FAIL();
  } catch (const std::exception &e) {
    EXPECT_NE(std::string(e.what()).find("array input_0 is compressed"), std::string::npos);
  }
}

} // namespace
