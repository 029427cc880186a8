//===- Safetensors.cpp ----------------------------------------------------===//
#include "unroll/tooling/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace unroll;

static bool readAll(const std::string &path, std::vector<char> &buf, std::string &error) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) {
    error = path + ": cannot open (" + strerror(errno) + ")";
    return false;
  }
  char chunk[1 << 16];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
    buf.insert(buf.end(), chunk, chunk + n);
  bool bad = ferror(f);
  fclose(f);
  if (bad)
    error = path + ": read error";
  return !bad;
}

bool unroll::readSafetensors(const std::string &path, TensorMap &out, std::string &error) {
  std::vector<char> buf;
  if (!readAll(path, buf, error))
    return false;
  return parseSafetensors(buf.data(), buf.size(), path, out, error);
}

bool unroll::parseSafetensors(const char *bytes, size_t size, const std::string &path,
                              TensorMap &out, std::string &error) {
  auto fail = [&](const std::string &m) {
    error = path + ": " + m;
    return false;
  };
  if (size < 8)
    return fail("too short for a safetensors header (" + std::to_string(size) + " bytes)");
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i)
    hlen = (hlen << 8) | static_cast<unsigned char>(bytes[i]);
  if (hlen > size - 8)
    return fail("header length " + std::to_string(hlen) + " runs past the end of the file (" +
                std::to_string(size) + " bytes)");
  auto header = nlohmann::json::parse(bytes + 8, bytes + 8 + hlen, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return fail("header is not a JSON object");
  const uint64_t dataSize = size - 8 - hlen;
  const char *data = bytes + 8 + hlen;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto &[name, t] : header.items()) {
    if (name == "__metadata__")
      continue;
    std::string where = "tensor '" + name + "': ";
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") ||
        !t.contains("data_offsets"))
      return fail(where + "expected dtype, shape and data_offsets");
    if (!t["dtype"].is_string())
      return fail(where + "dtype is not a string");
    std::string dt = t["dtype"];
    size_t es = dt == "F32" ? 4 : dt == "F64" ? 8 : 0;
    if (!es)
      return fail(where + "unsupported dtype '" + dt + "' (expected F32 or F64)");
    Tensor tensor;
    uint64_t numel = 1;
    if (!t["shape"].is_array())
      return fail(where + "shape is not an array");
    for (auto &d : t["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return fail(where + "shape entries must be non-negative integers");
      uint64_t s = d.get<uint64_t>();
      if (s && numel > (UINT64_MAX / 8) / s)
        return fail(where + "shape is too large");
      numel *= s;
      tensor.shape.push_back(static_cast<int64_t>(s));
    }
    auto &off = t["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      return fail(where + "data_offsets must be two non-negative integers");
    uint64_t b = off[0], e = off[1];
    if (b > e || e > dataSize)
      return fail(where + "data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                  "] are outside the data area (" + std::to_string(dataSize) + " bytes)");
    if (e - b != numel * es)
      return fail(where + "holds " + std::to_string(e - b) +
                  " bytes but its shape and dtype need " + std::to_string(numel * es));
    ranges.push_back({b, e});
    tensor.data.resize(numel);
    for (uint64_t i = 0; i < numel; ++i) {
      if (es == 4) {
        float v;
        memcpy(&v, data + b + 4 * i, 4);
        tensor.data[i] = v;
      } else {
        memcpy(&tensor.data[i], data + b + 8 * i, 8);
      }
    }
    out[name] = std::move(tensor);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      return fail("tensors overlap in the data area");
  return true;
}

bool unroll::writeSafetensors(const std::string &path, const TensorMap &tensors,
                              const std::string &dtype, std::string &error) {
  size_t es = dtype == "F32" ? 4 : 8;
  nlohmann::json header = nlohmann::json::object();
  uint64_t off = 0;
  for (auto &[name, t] : tensors) {
    uint64_t bytes = t.data.size() * es;
    header[name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {off, off + bytes}}};
    off += bytes;
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8) // keep the data 8-byte aligned
    h.push_back(' ');
  std::vector<char> buf(8);
  uint64_t hl = h.size();
  for (int i = 0; i < 8; ++i)
    buf[i] = static_cast<char>((hl >> (8 * i)) & 0xff);
  buf.insert(buf.end(), h.begin(), h.end());
  for (auto &[name, t] : tensors)
    for (double v : t.data) {
      char b[8];
      if (es == 4) {
        float f = static_cast<float>(v);
        memcpy(b, &f, 4);
      } else {
        memcpy(b, &v, 8);
      }
      buf.insert(buf.end(), b, b + es);
    }
  // A regular file (or a new one) is replaced atomically: temp, fsync,
  // rename. Anything else (a device such as /dev/full, a FIFO) is written in
  // place: renaming over it would replace the device with a file.
  struct stat st;
  bool inPlace = stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  std::string tmp = inPlace ? path : path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    error = path + ": cannot write (" + strerror(errno) + ")";
    return false;
  }
  auto failWith = [&](const char *what) {
    error = path + ": " + what + " (" + strerror(errno) + ")";
    close(fd);
    if (!inPlace)
      unlink(tmp.c_str());
    return false;
  };
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t w = write(fd, buf.data() + done, buf.size() - done);
    if (w <= 0)
      return failWith("write failed");
    done += static_cast<size_t>(w);
  }
  if (!inPlace && fsync(fd) != 0)
    return failWith("write failed");
  if (close(fd) != 0) {
    error = path + ": write failed (" + strerror(errno) + ")";
    if (!inPlace)
      unlink(tmp.c_str());
    return false;
  }
  if (!inPlace && rename(tmp.c_str(), path.c_str()) != 0) {
    error = path + ": cannot complete the write (" + strerror(errno) + ")";
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

bool unroll::checkFinite(const Tensor &t, const std::string &where, std::string &error) {
  for (size_t i = 0; i < t.data.size(); ++i) {
    if (std::isfinite(t.data[i]))
      continue;
    // The row-major multi-index of element i.
    std::vector<int64_t> at(t.shape.size());
    size_t rest = i;
    for (size_t k = t.shape.size(); k-- > 0;) {
      at[k] = t.shape[k] > 0 ? int64_t(rest % t.shape[k]) : 0;
      rest = t.shape[k] > 0 ? rest / t.shape[k] : rest;
    }
    std::string idx;
    for (size_t k = 0; k < at.size(); ++k)
      idx += (k ? ", " : "") + std::to_string(at[k]);
    error = where + " holds " +
            (std::isnan(t.data[i]) ? std::string("nan") : t.data[i] > 0 ? "inf" : "-inf") +
            " at [" + idx + "] (every value must be finite)";
    return false;
  }
  return true;
}
