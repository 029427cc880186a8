//===- Safetensors.h - reading and writing .safetensors --------*- C++ -*-===//
//
// Format: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32"|"F64", "shape": [...], "data_offsets": [b, e]},
//  "__metadata__": {...}}, then the data area. The reader checks every
// offset against the file before touching data and never reads past it.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_TOOLING_SAFETENSORS_H
#define UNROLL_TOOLING_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace unroll {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data; // converted to double on load
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape)
      n *= s;
    return n;
  }
};

using TensorMap = std::map<std::string, Tensor>;

/// Reads `path`; on failure returns false with a message naming the file.
bool readSafetensors(const std::string &path, TensorMap &out, std::string &error);
/// The same on `size` bytes in memory; `path` names them in messages (the
/// fuzz target's entry).
bool parseSafetensors(const char *bytes, size_t size, const std::string &path, TensorMap &out,
                      std::string &error);

/// Checks that every value of `t` is finite; false with an error that names
/// the tensor (`where`, e.g. "prompts.safetensors: tensor 'xs'"), the value
/// and its index, e.g. "... holds nan at [0, 3, 1]".
bool checkFinite(const Tensor &t, const std::string &where, std::string &error);

/// Writes tensors as F32 or F64 ("F32"/"F64"), atomically (temp + fsync +
/// rename): the old file survives any failure.
bool writeSafetensors(const std::string &path, const TensorMap &tensors, const std::string &dtype,
                      std::string &error);

} // namespace unroll

#endif
