//===- OptimizationCommon.cpp - what the optimization tasks share ---------===//
//
// The problem's pieces (the dictionary's Lipschitz constant, ALISTA's
// analytic weight, the samples) and the tasks' outputs.
//
//===----------------------------------------------------------------------===//
#include "OptimizationCommon.h"

#include "unroll/runtime/ModelInfo.h"
#include "unroll/tooling/Checkpoint.h"
#include "unroll/tooling/Safetensors.h"

#include <cmath>
#include <cstring>
#include <filesystem>

namespace key = ::unroll::info;

using namespace unroll;

namespace unroll::opt {

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Writes `name` into the output folder (atomically); no-op without one.
bool writeOut(const OptimizationOptions &o, const std::string &name, const std::string &text,
              std::string &error) {
  if (o.out.empty())
    return true;
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) {
    error = "cannot create " + o.out + ": " + ec.message();
    return false;
  }
  return writeFileAtomic(o.out + "/" + name, text, error);
}

/// The one parameter of an energy whose terms name it under `key`.
bool paramOffset(const nlohmann::json &e, const char *op, const char *key, int64_t &offset,
                 std::string &error) {
  for (const auto &t : e["terms"])
    if (t.value("op", "") == op && t.contains(key) && t[key].is_string())
      for (const auto &p : e[key::kParams])
        if (p.value(key::kName, "") == t[key].get<std::string>()) {
          offset = p[key::kOffset];
          return true;
        }
  error = "the energy's '" + std::string(op) + "' term has no parameter '" + key + "'";
  return false;
}

double termValue(const nlohmann::json &e, const char *op, const char *key) {
  for (const auto &t : e["terms"])
    if (t.value("op", "") == op && t.contains(key))
      return t[key].get<double>();
  return 0;
}

bool problemDictionary(const OptimizationOptions &o, int64_t mm, int64_t n,
                       std::vector<double> &A, std::string &error) {
  if (o.dictionary.empty()) {
    std::seed_seq dictSeq{uint32_t(o.dictSeed), uint32_t(o.dictSeed >> 32), 0xd1c7u};
    std::mt19937_64 rng(dictSeq);
    std::normal_distribution<double> N01(0.0, 1.0);
    A.resize(mm * n);
    for (double &v : A)
      v = N01(rng) / std::sqrt((double)mm);
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t i = 0; i < mm; ++i)
        s += A[i * n + j] * A[i * n + j];
      for (int64_t i = 0; i < mm; ++i)
        A[i * n + j] /= std::sqrt(s);
    }
    return true;
  }
  TensorMap t;
  if (!readSafetensors(o.dictionary, t, error))
    return false;
  auto it = t.find("A");
  std::string want = "[" + std::to_string(mm) + ", " + std::to_string(n) + "]";
  if (it == t.end()) {
    error = o.dictionary + ": has no tensor 'A' (the dictionary, " + want + ")";
    return false;
  }
  const Tensor &a = it->second;
  if (a.shape != std::vector<int64_t>{mm, n}) {
    error = o.dictionary + ": tensor 'A' has shape " + nlohmann::json(a.shape).dump() +
            ", the energy's dictionary is " + want + " (m measurements, n code entries)";
    return false;
  }
  if (!checkFinite(a, o.dictionary + ": tensor 'A'", error))
    return false;
  for (int64_t j = 0; j < n; ++j) {
    bool zero = true;
    for (int64_t i = 0; i < mm && zero; ++i)
      zero = a.data[i * n + j] == 0.0;
    if (zero) {
      error = o.dictionary + ": column " + std::to_string(j) +
              " of tensor 'A' is zero (code entry " + std::to_string(j) +
              " would not show in b = A x)";
      return false;
    }
  }
  A = a.data;
  return true;
}

nlohmann::json dictionaryIdentity(const OptimizationOptions &o, const std::vector<double> &A) {
  if (o.dictionary.empty())
    return {{"dict_seed", o.dictSeed}};
  // FNV-1a over the values' bytes: the same for an F32 and an F64 file of
  // the same values.
  uint64_t h = 1469598103934665603ull;
  for (double v : A) {
    unsigned char b[sizeof v];
    std::memcpy(b, &v, sizeof v);
    for (unsigned char c : b)
      h = (h ^ c) * 1099511628211ull;
  }
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  return {{"dictionary_fingerprint", hex}};
}

bool sameDictionary(const nlohmann::json &c, const nlohmann::json &identity,
                    const std::string &where, std::string &error) {
  bool cFile = c.contains("dictionary_fingerprint"), file = identity.contains("dictionary_fingerprint");
  if (!cFile && !c.contains("dict_seed"))
    return true; // a checkpoint from before either was recorded
  std::string trained = cFile ? "the dictionary in " + c.value("dictionary_file", std::string("a file")) +
                                    " (fingerprint " + c["dictionary_fingerprint"].get<std::string>() + ")"
                              : "dictionary seed " + c["dict_seed"].dump();
  if (cFile == file &&
      (cFile ? c["dictionary_fingerprint"] == identity["dictionary_fingerprint"]
             : c["dict_seed"] == identity["dict_seed"]))
    return true;
  error = where + ": trained on " + trained + ", this run has " +
          (file ? "a dictionary file with fingerprint " +
                      identity["dictionary_fingerprint"].get<std::string>()
                : "dictionary seed " + identity["dict_seed"].dump()) +
          (cFile ? " (pass --dictionary with the file it was trained on)"
                 : " (pass --dict-seed " + c["dict_seed"].dump() + ")");
  return false;
}

std::string dictionaryName(const OptimizationOptions &o) {
  return o.dictionary.empty() ? "dictionary seed " + std::to_string(o.dictSeed)
                              : "dictionary " + o.dictionary;
}

/// λ_max(AᵀA) by a long power method (independent of the compiled step's).
double lipschitz(const std::vector<double> &A, int64_t mm, int64_t n) {
  std::vector<double> v(n, 1.0), w(mm);
  double L = 0;
  for (int it = 0; it < 2000; ++it) {
    for (int64_t i = 0; i < mm; ++i) {
      w[i] = 0;
      for (int64_t j = 0; j < n; ++j)
        w[i] += A[i * n + j] * v[j];
    }
    double s = 0;
    for (int64_t j = 0; j < n; ++j) {
      v[j] = 0;
      for (int64_t i = 0; i < mm; ++i)
        v[j] += A[i * n + j] * w[i];
      s += v[j] * v[j];
    }
    L = std::sqrt(s); // ‖AᵀA v‖ with ‖v‖ = 1 → λ_max
    for (double &vj : v)
      vj /= L;
  }
  return L;
}

/// ALISTA's analytic weight for the Frobenius coherence: W minimizing
/// ‖WᵀA‖_F subject to diag(WᵀA) = 1, column by column
/// w_j = (AAᵀ)⁻¹ a_j / (a_jᵀ (AAᵀ)⁻¹ a_j) (Cholesky of AAᵀ).
std::vector<double> analyticWeight(const std::vector<double> &A, int64_t mm, int64_t n) {
  std::vector<double> G(mm * mm, 0.0), Z = A, W(mm * n);
  for (int64_t i = 0; i < mm; ++i)
    for (int64_t k = 0; k <= i; ++k) {
      double s = 0;
      for (int64_t j = 0; j < n; ++j)
        s += A[i * n + j] * A[k * n + j];
      G[i * mm + k] = G[k * mm + i] = s;
    }
  for (int64_t j = 0; j < mm; ++j) { // G = C Cᵀ in place (lower)
    for (int64_t k = 0; k < j; ++k)
      G[j * mm + j] -= G[j * mm + k] * G[j * mm + k];
    G[j * mm + j] = std::sqrt(G[j * mm + j]);
    for (int64_t i = j + 1; i < mm; ++i) {
      for (int64_t k = 0; k < j; ++k)
        G[i * mm + j] -= G[i * mm + k] * G[j * mm + k];
      G[i * mm + j] /= G[j * mm + j];
    }
  }
  for (int64_t c = 0; c < n; ++c) { // Z[:, c] = G⁻¹ a_c
    for (int64_t i = 0; i < mm; ++i) {
      double s = Z[i * n + c];
      for (int64_t k = 0; k < i; ++k)
        s -= G[i * mm + k] * Z[k * n + c];
      Z[i * n + c] = s / G[i * mm + i];
    }
    for (int64_t i = mm - 1; i >= 0; --i) {
      double s = Z[i * n + c];
      for (int64_t k = i + 1; k < mm; ++k)
        s -= G[k * mm + i] * Z[k * n + c];
      Z[i * n + c] = s / G[i * mm + i];
    }
    double d = 0;
    for (int64_t i = 0; i < mm; ++i)
      d += A[i * n + c] * Z[i * n + c];
    for (int64_t i = 0; i < mm; ++i)
      W[i * n + c] = Z[i * n + c] / d;
  }
  return W;
}

/// Draws `count` samples of the problem: x* (Bernoulli(0.1) × N(0, 1)) and
/// b = A x*, plus Gaussian noise at `snrDb` dB (the batch's signal power)
/// when snrDb >= 0.
void drawSamples(std::mt19937_64 &rng, const std::vector<double> &A, int64_t mm, int64_t n,
                 int64_t count, double snrDb, std::vector<double> &xs, std::vector<double> &b) {
  std::normal_distribution<double> N01(0.0, 1.0);
  std::bernoulli_distribution support(0.1);
  xs.assign(count * n, 0.0);
  b.assign(count * mm, 0.0);
  for (double &v : xs)
    v = support(rng) ? N01(rng) : 0.0;
  for (int64_t s = 0; s < count; ++s)
    for (int64_t i = 0; i < mm; ++i) {
      double acc = 0;
      for (int64_t j = 0; j < n; ++j)
        acc += A[i * n + j] * xs[s * n + j];
      b[s * mm + i] = acc;
    }
  if (snrDb < 0)
    return;
  double power = 0;
  for (double v : b)
    power += v * v;
  double sigma = std::sqrt(power / b.size() / std::pow(10.0, snrDb / 10.0));
  for (double &v : b)
    v += sigma * N01(rng);
}

} // namespace unroll::opt
