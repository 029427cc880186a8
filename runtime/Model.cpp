//===- Model.cpp - loading compiled.so ------------------------------------===//
#include "unroll/runtime/Model.h"
#include "unroll/runtime/ModelInfo.h"

#include <cmath>

#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

using namespace unroll;
namespace key = unroll::info;

Model::~Model() {
  if (handle_)
    dlclose(handle_);
}

void *Model::symbol(const std::string &name) const {
  return handle_ ? dlsym(handle_, name.c_str()) : nullptr;
}

/// dlopen maps segments without checking them against the file size, so a
/// truncated library crashes the process (SIGBUS) on first touch. Check the
/// ELF header and every loadable segment against the file first.
static bool checkElf(const std::string &path, uint64_t size, std::string &error) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) {
    error = path + ": cannot open (" + strerror(errno) + ")";
    return false;
  }
  auto bad = [&](const std::string &m) {
    fclose(f);
    error = path + ": " + m;
    return false;
  };
  Elf64_Ehdr eh;
  if (fread(&eh, sizeof eh, 1, f) != 1 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return bad("not a loadable shared library (not an ELF file)");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN)
    return bad("not a loadable shared library (not a 64-bit ELF shared object)");
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      eh.e_phoff + (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > size)
    return bad("not a loadable shared library (truncated: program headers "
               "lie past the end of the file)");
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (fseek(f, (long)(eh.e_phoff + i * sizeof ph), SEEK_SET) != 0 ||
        fread(&ph, sizeof ph, 1, f) != 1)
      return bad("not a loadable shared library (unreadable program header)");
    if (ph.p_type == PT_LOAD && ph.p_offset + ph.p_filesz > size)
      return bad("not a loadable shared library (truncated: segment " + std::to_string(i) +
                 " ends at byte " + std::to_string(ph.p_offset + ph.p_filesz) + ", the file has " +
                 std::to_string(size) + ")");
  }
  fclose(f);
  return true;
}

bool Model::load(const std::string &path, std::string &error, bool useDevice, int device) {
  path_ = path;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    error = path + ": no such file";
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    error = path + ": not a regular file";
    return false;
  }
  if (!checkElf(path, static_cast<uint64_t>(st.st_size), error))
    return false;
  // dlopen needs a path with a slash to not search the library path.
  std::string p = path.find('/') == std::string::npos ? "./" + path : path;
  handle_ = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char *e = dlerror();
    error = path + ": not a loadable shared library (" + (e ? e : "?") + ")";
    return false;
  }
  auto version = reinterpret_cast<int (*)()>(symbol("unroll_abi_version"));
  auto infoFn = reinterpret_cast<const char *(*)()>(symbol("unroll_model_info"));
  if (!version || !infoFn) {
    error = path + ": not an unroll model (no unroll_abi_version / "
                   "unroll_model_info); build it with unroll-translate";
    return false;
  }
  if (int v = version(); v != kAbiVersion) {
    error = path + ": ABI version " + std::to_string(v) + ", but this unroll-run speaks version " +
            std::to_string(kAbiVersion) + "; rebuild the model";
    return false;
  }
  infoText_ = infoFn();
  info_ = nlohmann::json::parse(infoText_, nullptr, /*allow_exceptions=*/false);
  if (info_.is_discarded() || !info_.is_object()) {
    error = path + ": model info is not valid JSON";
    return false;
  }
  if (!validateModelInfo(info_, path, error))
    return false;
  if (gpu() && useDevice) {
    // Refuse before any entry point runs: without a driver or a device the
    // library's first kernel launch could only abort.
    std::string chip = info_.value(key::kChip, "");
    auto init = reinterpret_cast<const char *(*)()>(symbol("unroll_gpu_init"));
    if (!init) {
      error = path + ": built for the GPU but lacks its runtime (unroll_gpu_init); "
                     "rebuild it with unroll-translate";
      return false;
    }
    if (device > 0) {
      auto select = reinterpret_cast<int32_t (*)(int32_t)>(symbol("unroll_gpu_select_device"));
      if (!select || select(device) != 0) {
        error = path + ": cannot choose GPU " + std::to_string(device) +
                " (the library's runtime predates device selection); rebuild it with "
                "unroll-translate";
        return false;
      }
    }
    if (const char *why = init()) {
      error = path + ": built for an NVIDIA GPU (" + (chip.empty() ? "?" : chip) +
              ") but no GPU can be used here: " + why +
              ". Build a CPU library with 'unroll-opt --lower-to-cpu' to run on this machine.";
      return false;
    }
    auto dev = reinterpret_cast<const char *(*)()>(symbol("unroll_gpu_device"));
    device_ = dev ? dev() : "GPU";
  }
  return true;
}

void unroll::initParameters(const nlohmann::json &params, int64_t numParams,
                            std::vector<double> &theta, const std::function<double()> &normal,
                            double defaultStd) {
  theta.assign(numParams, 0.0);
  for (const auto &p : params) {
    int64_t off = p[key::kOffset], n = 1;
    for (int64_t s : p[key::kShape])
      n *= s;
    std::string init = p.value(key::kInit, "normal");
    double sd = p.value(key::kStd, defaultStd), value = p.value(key::kValue, 0.0);
    for (int64_t i = 0; i < n; ++i)
      theta[off + i] = init == "ones"       ? 1.0
                       : init == "zeros"    ? 0.0
                       : init == "constant" ? value
                                            : sd * normal();
  }
}

//===----------------------------------------------------------------------===//
// Model info checks: every key the runtime and the tools read has its type
//===----------------------------------------------------------------------===//

namespace {
/// Checks of one JSON object, naming the first bad key in `error`.
struct Keys {
  const nlohmann::json &j;
  std::string where, &error;
  bool ok = true;
  /// Absent or null (a library writes null for what it does not fix).
  bool absent(const char *key) const { return !j.contains(key) || j[key].is_null(); }
  bool fail(const std::string &key, const std::string &want) {
    if (ok)
      error = where + ": '" + key + "' must be " + want;
    ok = false;
    return false;
  }
  bool string(const char *key, bool required = false) {
    if (absent(key))
      return !required || fail(key, "a string");
    return j[key].is_string() || fail(key, "a string");
  }
  bool integer(const char *key, int64_t lo, int64_t hi, bool required = false) {
    std::string want = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    if (absent(key))
      return !required || fail(key, want);
    const auto &v = j[key];
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(hi)) ||
        v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      return fail(key, want);
    return true;
  }
  bool number(const char *key) {
    if (absent(key))
      return true;
    return (j[key].is_number() && std::isfinite(j[key].get<double>())) ||
           fail(key, "a finite number");
  }
  bool object(const char *key) {
    return absent(key) || j[key].is_object() || fail(key, "an object");
  }
};

constexpr int64_t kMaxCount = int64_t(1) << 40;

/// An entry's "name" for messages ("?" when it has none, or not a string).
std::string nameOf(const nlohmann::json &j) {
  return j.contains(key::kName) && j[key::kName].is_string() ? j[key::kName].get<std::string>()
                                                             : "?";
}

bool validParams(const nlohmann::json &m, const std::string &where, std::string &error) {
  // Required: the tools read it without asking (a missing key read through
  // a const json is undefined behaviour; the fuzzer found it so).
  if (!m.contains(key::kParams) || !m[key::kParams].is_array()) {
    error = where + ": 'params' must be an array";
    return false;
  }
  int64_t total = m.value(key::kNumParams, (int64_t)0);
  for (const auto &p : m[key::kParams]) {
    if (!p.is_object()) {
      error = where + ": every entry of 'params' must be an object";
      return false;
    }
    Keys k{p, where + ", parameter " + nameOf(p), error};
    if (!k.string(key::kName, true) || !k.integer(key::kOffset, 0, kMaxCount, true) ||
        !k.string(key::kInit) || !k.number(key::kStd) || !k.number(key::kValue))
      return false;
    if (!p.contains(key::kShape) || !p[key::kShape].is_array()) {
      error = k.where + ": 'shape' must be an array of sizes";
      return false;
    }
    int64_t numel = 1;
    for (const auto &d : p[key::kShape]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > kMaxCount ||
          numel > kMaxCount / d.get<int64_t>()) {
        error = k.where + ": 'shape' must hold sizes >= 1 whose product is at most 2^40";
        return false;
      }
      numel *= d.get<int64_t>();
    }
    if (p[key::kOffset].get<int64_t>() + numel > total) {
      error = k.where + ": offset " + p[key::kOffset].dump() + " + " + std::to_string(numel) +
              " entries run past num_params = " + std::to_string(total);
      return false;
    }
  }
  return true;
}
} // namespace

bool unroll::validateModelInfo(const nlohmann::json &info, const std::string &path,
                               std::string &error) {
  if (!info.is_object()) {
    error = path + ": model info is not a JSON object";
    return false;
  }
  Keys top{info, path + ": model info", error};
  if (!top.string(key::kKind) || !top.string(key::kTarget) || !top.string(key::kChip) ||
      !top.string(key::kElementType))
    return false;
  for (const char *list : {key::kModels, key::kEnergies}) {
    if (!info.contains(list))
      continue;
    if (!info[list].is_array()) {
      error = path + ": model info: '" + list + "' must be an array";
      return false;
    }
    for (const auto &m : info[list]) {
      if (!m.is_object()) {
        error = path + ": model info: every entry of '" + list + "' must be an object";
        return false;
      }
      Keys k{m, path + ": model info of '" + nameOf(m) + "'", error};
      // Keys shared by models and energies, then each kind's.
      if (!k.string(key::kName, true) || !k.integer(key::kNumParams, 0, kMaxCount, true) ||
          !k.integer(key::kIterations, 1, kMaxCount, true) || !validParams(m, k.where, error))
        return false;
      if (std::string(list) == key::kModels) {
        if (!k.string(key::kForward, true) || !k.string(key::kLossGrad, true) ||
            !k.string(key::kAdam) || !k.integer(key::kPromptDim, 1, kMaxCount, true) ||
            !k.integer(key::kWindow, 1, kMaxCount, true) ||
            !k.integer(key::kPositions, 1, kMaxCount) || !k.object(key::kEnergy) ||
            !k.object(key::kFixedPoint) || !k.string(key::kEncoding))
          return false;
        if (m.contains(key::kEncoding) && m[key::kEncoding] != "interleaved" &&
            m[key::kEncoding] != "concat" && m[key::kEncoding] != "dense")
          return k.fail(key::kEncoding, "\"interleaved\", \"concat\" or \"dense\"");
        if (!k.integer(key::kOutputs, 1, kMaxCount))
          return false;
        if (m.contains(key::kEnergy) && m[key::kEnergy].is_object() &&
            !Keys{m[key::kEnergy], k.where + ", energy", error}.string(key::kTrace))
          return false;
        if (m.contains(key::kFixedPoint) && m[key::kFixedPoint].is_object()) {
          const auto &fp = m[key::kFixedPoint];
          Keys f{fp, k.where + ", fixed_point", error};
          if (!f.string(key::kSolve) || !f.string(key::kLossGradFixed) ||
              !f.string(key::kGradient) || !f.number(key::kGradientTol) ||
              !f.integer(key::kGradientMax, 1, kMaxCount) ||
              !f.integer(key::kPhantomSteps, 1, kMaxCount) || !f.number(key::kDamping) ||
              !f.integer(key::kStateBytesPerToken, 0, kMaxCount) ||
              !f.integer(key::kTapeBytesPerToken, 0, kMaxCount) || !f.object(key::kUntil))
            return false;
          if (fp.contains(key::kUntil) && fp[key::kUntil].is_object()) {
            Keys u{fp[key::kUntil], f.where + ".until", error};
            if (!u.number(key::kTol) || !u.integer(key::kMax, 1, kMaxCount) ||
                !fp[key::kUntil].contains(key::kTol) || !fp[key::kUntil].contains(key::kMax))
              return u.fail(key::kTol, "a number beside an integer 'max'");
          }
        }
      } else {
        if (!k.string(key::kTrace) || !k.string(key::kVjp) || !k.string(key::kWeights) ||
            !k.integer(key::kTokens, 1, kMaxCount) || !k.integer(key::kDim, 1, kMaxCount))
          return false;
        if (m.contains("graph") && !m["graph"].is_null() && !m["graph"].is_array())
          return k.fail("graph", "an array");
        if (!m.contains("terms") || !m["terms"].is_array())
          return k.fail("terms", "an array of objects");
        for (const auto &t : m["terms"])
          if (!t.is_object())
            return k.fail("terms", "an array of objects");
      }
    }
  }
  return true;
}
