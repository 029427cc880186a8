//===- Model.cpp - loading compiled.so ------------------------------------===//
#include "Model.h"

#include <dlfcn.h>
#include <sys/stat.h>

using namespace unroll;

Model::~Model() {
  if (handle_)
    dlclose(handle_);
}

void *Model::symbol(const std::string &name) const {
  return handle_ ? dlsym(handle_, name.c_str()) : nullptr;
}

bool Model::load(const std::string &path, std::string &error) {
  path_ = path;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    error = path + ": no such file";
    return false;
  }
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
    error = path + ": ABI version " + std::to_string(v) +
            ", but this unroll-run speaks version " +
            std::to_string(kAbiVersion) + "; rebuild the model";
    return false;
  }
  infoText_ = infoFn();
  info_ = nlohmann::json::parse(infoText_, nullptr, /*allow_exceptions=*/false);
  if (info_.is_discarded() || !info_.is_object()) {
    error = path + ": model info is not valid JSON";
    return false;
  }
  return true;
}
