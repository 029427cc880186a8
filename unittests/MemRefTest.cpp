//===- MemRefTest.cpp - C-interface memref descriptors -------------------===//
#include "unroll/runtime/MemRef.h"

#include <gtest/gtest.h>

#include <cstddef>

using namespace unroll;

// The descriptor must have exactly the layout MLIR's C interface uses:
// {T *allocated, T *aligned, int64_t offset, int64_t sizes[N], int64_t strides[N]}.
using M2 = MemRef<float, 2>;
TEST(MemRef, LayoutMatchesMlirCInterface) {
  EXPECT_EQ(offsetof(M2, aligned), 8u);
  EXPECT_EQ(offsetof(M2, offset), 16u);
  EXPECT_EQ(offsetof(M2, sizes), 24u);
  EXPECT_EQ(offsetof(M2, strides), 40u);
  EXPECT_EQ(sizeof(MemRef<double, 1>), 40u);
}

TEST(MemRef, RowMajorStrides) {
  double data[24];
  auto m = makeMemRef<double, 3>(data, {2, 3, 4});
  EXPECT_EQ(m.strides[0], 12);
  EXPECT_EQ(m.strides[1], 4);
  EXPECT_EQ(m.strides[2], 1);
  EXPECT_EQ(m.aligned, data);
  EXPECT_EQ(m.offset, 0);
}
