//===- Model.cpp - loading compiled.so ------------------------------------===//
#include "unroll/runtime/Model.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

using namespace unroll;

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

bool Model::load(const std::string &path, std::string &error, bool useDevice) {
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
  if (gpu() && useDevice) {
    // Refuse before any entry point runs: without a driver or a device the
    // library's first kernel launch could only abort.
    std::string chip = info_.value("chip", "");
    auto init = reinterpret_cast<const char *(*)()>(symbol("unroll_gpu_init"));
    if (!init) {
      error = path + ": built for the GPU but lacks its runtime (unroll_gpu_init); "
                     "rebuild it with unroll-translate";
      return false;
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
    int64_t off = p["offset"], n = 1;
    for (int64_t s : p["shape"])
      n *= s;
    std::string init = p.value("init", "normal");
    double sd = p.value("std", defaultStd), value = p.value("value", 0.0);
    for (int64_t i = 0; i < n; ++i)
      theta[off + i] = init == "ones"       ? 1.0
                       : init == "zeros"    ? 0.0
                       : init == "constant" ? value
                                            : sd * normal();
  }
}
