//===- SafetensorsTest.cpp - the safetensors reader and writer -----------===//
#include "unroll/tooling/Safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace unroll;

namespace {
std::string tmpPath(const std::string &name) {
  return ::testing::TempDir() + "unroll_" + std::to_string(getpid()) + "_" + name;
}

/// Writes raw bytes: an 8-byte little-endian header length, the header, data.
void writeRaw(const std::string &path, const std::string &header, const std::string &data,
              uint64_t hlen) {
  std::ofstream f(path, std::ios::binary);
  for (int i = 0; i < 8; ++i)
    f.put(static_cast<char>((hlen >> (8 * i)) & 0xff));
  f << header << data;
}
void writeRaw(const std::string &path, const std::string &header, const std::string &data) {
  writeRaw(path, header, data, header.size());
}
} // namespace

TEST(Safetensors, RoundTripF64IsExact) {
  TensorMap in;
  in["a"] = {{2, 3}, {1.0, -2.5, 3.25, 1e-300, -0.0, M_PI}};
  in["b"] = {{1}, {42.0}};
  std::string p = tmpPath("rt64.safetensors"), err;
  ASSERT_TRUE(writeSafetensors(p, in, "F64", err)) << err;
  TensorMap out;
  ASSERT_TRUE(readSafetensors(p, out, err)) << err;
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out["a"].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out["a"].data, in["a"].data);
  EXPECT_EQ(out["b"].data, in["b"].data);
  // The data area starts 8-byte aligned.
  std::ifstream f(p, std::ios::binary);
  uint64_t hlen = 0;
  f.read(reinterpret_cast<char *>(&hlen), 8);
  EXPECT_EQ((8 + hlen) % 8, 0u);
  remove(p.c_str());
}

TEST(Safetensors, RoundTripF32RoundsToFloat) {
  TensorMap in;
  in["x"] = {{3}, {0.1, 1.0 / 3.0, 1e6}};
  std::string p = tmpPath("rt32.safetensors"), err;
  ASSERT_TRUE(writeSafetensors(p, in, "F32", err)) << err;
  TensorMap out;
  ASSERT_TRUE(readSafetensors(p, out, err)) << err;
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(out["x"].data[i], static_cast<double>(static_cast<float>(in["x"].data[i])));
  remove(p.c_str());
}

TEST(Safetensors, ReadsAHandWrittenFile) {
  // Independent of the writer: bytes laid out by hand.
  double v[2] = {1.5, -4.0};
  std::string data(reinterpret_cast<char *>(v), sizeof v);
  std::string p = tmpPath("hand.safetensors"), err;
  writeRaw(p, R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},"__metadata__":{"k":"v"}})",
           data);
  TensorMap out;
  ASSERT_TRUE(readSafetensors(p, out, err)) << err;
  EXPECT_EQ(out["w"].data, (std::vector<double>{1.5, -4.0}));
  remove(p.c_str());
}

struct BadCase {
  const char *name, *header;
  int dataBytes;
  long long hlen; // -1: the header's size
  const char *message;
};

class SafetensorsBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(SafetensorsBad, IsRejectedWithAMessage) {
  const BadCase &c = GetParam();
  std::string p = tmpPath(std::string(c.name) + ".safetensors"), err;
  std::string header = c.header;
  writeRaw(p, header, std::string(c.dataBytes, '\0'),
           c.hlen < 0 ? header.size() : static_cast<uint64_t>(c.hlen));
  TensorMap out;
  EXPECT_FALSE(readSafetensors(p, out, err));
  EXPECT_NE(err.find(c.message), std::string::npos) << "got: " << err;
  EXPECT_NE(err.find(p), std::string::npos) << "the message names the file";
  remove(p.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Corrupt, SafetensorsBad,
    ::testing::Values(
        BadCase{"hlen", R"({})", 0, 1LL << 40, "runs past the end of the file"},
        BadCase{"json", R"({oops)", 0, -1, "header is not a JSON object"},
        BadCase{"range", R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})", 8, -1,
                "outside the data area"},
        BadCase{"size", R"({"a":{"dtype":"F64","shape":[3],"data_offsets":[0,16]}})", 16, -1,
                "holds 16 bytes but its shape and dtype need 24"},
        BadCase{
            "overlap",
            R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},"b":{"dtype":"F64","shape":[1],"data_offsets":[8,16]}})",
            16, -1, "tensors overlap"},
        BadCase{"dtype", R"({"a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}})", 2, -1,
                "unsupported dtype 'BF16'"},
        BadCase{"shape", R"({"a":{"dtype":"F64","shape":[-1],"data_offsets":[0,8]}})", 8, -1,
                "shape entries must be non-negative integers"},
        BadCase{"offsets", R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[16,8]}})", 16, -1,
                "outside the data area"},
        BadCase{"fields", R"({"a":{"dtype":"F64"}})", 0, -1,
                "expected dtype, shape and data_offsets"},
        BadCase{"huge",
                R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8,
                -1, "shape is too large"}),
    [](const auto &info) { return std::string(info.param.name); });

TEST(Safetensors, ShortFile) {
  std::string p = tmpPath("short.safetensors"), err;
  {
    std::ofstream f(p, std::ios::binary);
    f << "abc";
  }
  TensorMap out;
  EXPECT_FALSE(readSafetensors(p, out, err));
  EXPECT_NE(err.find("too short"), std::string::npos) << err;
  remove(p.c_str());
}

TEST(Safetensors, FailedWriteKeepsTheOldFile) {
  std::string p = tmpPath("keep.safetensors"), err;
  TensorMap a;
  a["x"] = {{1}, {7.0}};
  ASSERT_TRUE(writeSafetensors(p, a, "F64", err)) << err;
  // /dev/full accepts the open but fails every write; it is written in
  // place (never replaced by a renamed file) and stays a device.
  EXPECT_FALSE(writeSafetensors("/dev/full", a, "F64", err));
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
  struct stat st;
  ASSERT_EQ(stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // A write into a missing folder fails without touching p.
  EXPECT_FALSE(writeSafetensors(p + ".missing/dir/x", a, "F64", err));
  TensorMap back;
  ASSERT_TRUE(readSafetensors(p, back, err)) << err;
  EXPECT_EQ(back["x"].data[0], 7.0);
  remove(p.c_str());
}

// checkFinite names the first non-finite value by its row-major index,
// which is computed here independently from the flat position.
TEST(Safetensors, CheckFiniteNamesTheIndex) {
  Tensor t{{2, 3, 4}, std::vector<double>(24, 0.5)};
  std::string error;
  EXPECT_TRUE(checkFinite(t, "p.safetensors: tensor 'xs'", error));
  t.data[(1 * 3 + 2) * 4 + 3] = -INFINITY;
  ASSERT_FALSE(checkFinite(t, "p.safetensors: tensor 'xs'", error));
  EXPECT_EQ(error, "p.safetensors: tensor 'xs' holds -inf at [1, 2, 3] (every value must be finite)");
  t.data[(0 * 3 + 1) * 4 + 2] = NAN; // an earlier one is reported first
  ASSERT_FALSE(checkFinite(t, "x", error));
  EXPECT_EQ(error, "x holds nan at [0, 1, 2] (every value must be finite)");
  Tensor row{{5}, {1, 2, INFINITY, 4, 5}};
  ASSERT_FALSE(checkFinite(row, "y", error));
  EXPECT_EQ(error, "y holds inf at [2] (every value must be finite)");
}
