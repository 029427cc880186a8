//===- Checkpoint.cpp -----------------------------------------------------===//
#include "unroll/tooling/Checkpoint.h"
#include "unroll/tooling/Safetensors.h"

#include "unroll/runtime/ModelInfo.h"
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace key = ::unroll::info;

using namespace unroll;

bool unroll::makeDirs(const std::string &dir, std::string &error) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty() && mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
        error = cur + ": cannot create folder (" + strerror(errno) + ")";
        return false;
      }
    }
    if (i < dir.size())
      cur.push_back(dir[i]);
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    error = dir + ": not a folder";
    return false;
  }
  return true;
}

bool unroll::writeFileAtomic(const std::string &path, const std::string &text, std::string &error) {
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    error = path + ": cannot write (" + strerror(errno) + ")";
    return false;
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t w = write(fd, text.data() + done, text.size() - done);
    if (w <= 0) {
      error = path + ": write failed (" + strerror(errno) + ")";
      close(fd);
      unlink(tmp.c_str());
      return false;
    }
    done += w;
  }
  if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    error = path + ": write failed (" + strerror(errno) + ")";
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

static bool readText(const std::string &path, std::string &out, std::string &error) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) {
    error = path + ": cannot open (" + strerror(errno) + ")";
    return false;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    out.append(buf, n);
  fclose(f);
  return true;
}

static void removeTree(const std::string &dir) {
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..")
        unlink((dir + "/" + n).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

static int64_t numel(const nlohmann::json &p) {
  int64_t n = 1;
  for (int64_t s : p[key::kShape])
    n *= s;
  return n;
}

/// theta slices as named tensors, optionally with a name prefix.
static TensorMap named(const nlohmann::json &info, const std::vector<double> &v,
                       const std::string &prefix) {
  TensorMap out;
  for (const auto &p : info[key::kParams]) {
    int64_t off = p[key::kOffset], n = numel(p);
    out[prefix + p[key::kName].get<std::string>()] = {
        p[key::kShape].get<std::vector<int64_t>>(),
        std::vector<double>(v.begin() + off, v.begin() + off + n)};
  }
  return out;
}

/// Fills v from named tensors; every parameter must be there with its shape.
static bool unnamed(const nlohmann::json &info, TensorMap &t, const std::string &prefix,
                    std::vector<double> &v, const std::string &file, std::string &error) {
  v.assign(info[key::kNumParams].get<int64_t>(), 0.0);
  for (const auto &p : info[key::kParams]) {
    std::string name = prefix + p[key::kName].get<std::string>();
    auto it = t.find(name);
    if (it == t.end()) {
      error = file + ": has no tensor '" + name + "'";
      return false;
    }
    auto shape = p[key::kShape].get<std::vector<int64_t>>();
    if (it->second.shape != shape) {
      error = file + ": tensor '" + name + "' has shape " +
              nlohmann::json(it->second.shape).dump() + ", the model expects " +
              nlohmann::json(shape).dump();
      return false;
    }
    int64_t off = p[key::kOffset];
    if (!checkFinite(it->second, file + ": tensor '" + name + "'", error))
      return false;
    for (size_t i = 0; i < it->second.data.size(); ++i)
      v[off + i] = it->second.data[i];
    t.erase(it);
  }
  return true;
}

bool unroll::saveCheckpoint(const std::string &dir, const nlohmann::json &info, const TrainState &s,
                            const nlohmann::json &config, std::string &error) {
  if (!makeDirs(dir, error))
    return false;
  char name[32];
  snprintf(name, sizeof name, "ckpt-%07lld", (long long)s.step);
  std::string step = dir + "/" + name;
  removeTree(step); // a half-written one from a crash at the same step
  if (!makeDirs(step, error))
    return false;
  TensorMap opt = named(info, s.theta, "master.");
  if (!s.adam.m.empty()) {
    for (auto &[k, v] : named(info, s.adam.m, "exp_avg."))
      opt[k] = v;
    for (auto &[k, v] : named(info, s.adam.v, "exp_avg_sq."))
      opt[k] = v;
  }
  nlohmann::json st{{"step", s.step},
                    {"adam_step", s.adam.step},
                    {"rng", s.rng},
                    {"lr", s.adam.lr},
                    {"encoding", TokenLayout::of(info).name()},
                    {"config", config}};
  if (!writeSafetensors(step + "/model.safetensors", named(info, s.theta, ""), "F32", error) ||
      !writeSafetensors(step + "/optimizer.safetensors", opt, "F64", error) ||
      !writeFileAtomic(step + "/state.json", st.dump(2) + "\n", error))
    return false;
  // The switch: `latest` names the new step only once it is complete.
  std::string old;
  std::string ignore;
  readText(dir + "/latest", old, ignore);
  while (!old.empty() && (old.back() == '\n' || old.back() == ' '))
    old.pop_back();
  if (!writeFileAtomic(dir + "/latest", std::string(name) + "\n", error))
    return false;
  if (!old.empty() && old != name && old.find('/') == std::string::npos)
    removeTree(dir + "/" + old);
  return true;
}

bool unroll::latestStep(const std::string &dir, std::string &stepDir, std::string &error) {
  std::string name;
  if (!readText(dir + "/latest", name, error)) {
    error = dir + ": no checkpoint here (no 'latest' file)";
    return false;
  }
  while (!name.empty() && (name.back() == '\n' || name.back() == ' '))
    name.pop_back();
  if (name.empty() || name.find('/') != std::string::npos) {
    error = dir + "/latest: does not name a checkpoint";
    return false;
  }
  stepDir = dir + "/" + name;
  return true;
}

/// A checkpoint's recorded encoding (state.json "encoding"; older ones
/// have none) against the library's.
static bool encodingMatches(const nlohmann::json &state, const nlohmann::json &info,
                            const std::string &step, std::string &error) {
  if (!state.contains("encoding"))
    return true;
  std::string lib = TokenLayout::of(info).name();
  if (state["encoding"].is_string() && state["encoding"] == lib)
    return true;
  error = step + "/state.json: trained with the " + state["encoding"].dump() +
          " encoding, but this library uses the " + lib +
          " one: its weights read other tokens (load them into the model they were trained with)";
  return false;
}

bool unroll::loadCheckpoint(const std::string &dir, const nlohmann::json &info, TrainState &s,
                            nlohmann::json &config, std::string &error) {
  std::string step, text;
  if (!latestStep(dir, step, error) || !readText(step + "/state.json", text, error))
    return false;
  auto st = nlohmann::json::parse(text, nullptr, false);
  if (st.is_discarded() || !st.is_object() || !st.contains("step") || !st.contains("rng")) {
    error = step + "/state.json: not a training state";
    return false;
  }
  // Every key with its type, before anything reads it (a damaged or edited
  // file is a message, not an exception).
  auto bad = [&](const char *key, const char *want) {
    error = step + "/state.json: '" + key + "' must be " + want + ", got " + st[key].dump();
    return false;
  };
  auto count = [&](const char *key) {
    return st[key].is_number_integer() && st[key].get<int64_t>() >= 0 &&
           !(st[key].is_number_unsigned() && st[key].get<uint64_t>() > uint64_t(INT64_MAX));
  };
  if (!count("step"))
    return bad("step", "an integer >= 0");
  if (!st["rng"].is_string())
    return bad("rng", "a string");
  if (st.contains("adam_step") && !count("adam_step"))
    return bad("adam_step", "an integer >= 0");
  if (st.contains("lr") && !(st["lr"].is_number() && std::isfinite(st["lr"].get<double>())))
    return bad("lr", "a finite number");
  if (st.contains("config") && !st["config"].is_object())
    return bad("config", "an object");
  if (!encodingMatches(st, info, step, error))
    return false;
  s.step = st["step"];
  s.rng = st["rng"];
  s.adam.step = st.value("adam_step", (int64_t)0);
  s.adam.lr = st.value("lr", 1e-4);
  config = st.value("config", nlohmann::json::object());
  TensorMap opt;
  std::string file = step + "/optimizer.safetensors";
  if (!readSafetensors(file, opt, error) || !unnamed(info, opt, "master.", s.theta, file, error))
    return false;
  if (s.adam.step > 0 && (!unnamed(info, opt, "exp_avg.", s.adam.m, file, error) ||
                          !unnamed(info, opt, "exp_avg_sq.", s.adam.v, file, error)))
    return false;
  return true;
}

bool unroll::checkpointConfig(const std::string &path, nlohmann::json &config, std::string &stepDir,
                              std::string &error) {
  struct stat own;
  if (stat((path + "/state.json").c_str(), &own) == 0 && S_ISREG(own.st_mode))
    stepDir = path;
  else if (!latestStep(path, stepDir, error))
    return false;
  std::string text;
  config = nlohmann::json::object();
  if (!readText(stepDir + "/state.json", text, error))
    return false;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || (j.contains("config") && !j["config"].is_object())) {
    error = stepDir + "/state.json: not a training state";
    return false;
  }
  if (j.contains("config"))
    config = j["config"];
  return true;
}

bool unroll::loadSnapshotParameters(const std::string &stepDir, const nlohmann::json &info,
                                    std::vector<double> &theta, std::string &error) {
  std::string file = stepDir + "/optimizer.safetensors";
  struct stat st;
  if (stat(file.c_str(), &st) != 0)
    return loadParameters(stepDir, info, theta, error);
  TensorMap opt;
  return readSafetensors(file, opt, error) && unnamed(info, opt, "master.", theta, file, error);
}

bool unroll::loadParameters(const std::string &path, const nlohmann::json &info,
                            std::vector<double> &theta, std::string &error) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    error = path + ": no such file or folder";
    return false;
  }
  std::string file = path;
  if (S_ISDIR(st.st_mode)) {
    // A checkpoint folder (its `latest` names the step) or one of its
    // snapshots (DIR/ckpt-NNNNNNN, holding model.safetensors itself).
    std::string step, text;
    struct stat own;
    if (stat((path + "/model.safetensors").c_str(), &own) == 0 && S_ISREG(own.st_mode))
      step = path;
    else if (!latestStep(path, step, error)) {
      error += " (give a checkpoint folder, one of its ckpt-NNNNNNN snapshots, or a "
               "model .safetensors)";
      return false;
    }
    file = step + "/model.safetensors";
    // The encoding the weights were trained with, where the step says.
    if (readText(step + "/state.json", text, error)) {
      auto j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_object() && !encodingMatches(j, info, step, error))
        return false;
    }
    error.clear();
  }
  TensorMap t;
  if (!readSafetensors(file, t, error) || !unnamed(info, t, "", theta, file, error))
    return false;
  if (!t.empty()) {
    error = file + ": has tensor '" + t.begin()->first + "' that the model does not have";
    return false;
  }
  return true;
}

bool unroll::openMetrics(const std::string &path, int64_t keepThrough, std::ofstream &out,
                         std::string &error) {
  std::string kept;
  if (keepThrough > 0) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
      if (!row.is_discarded() && row.value("step", (int64_t)0) <= keepThrough)
        kept += line + "\n";
    }
  }
  std::string dir = path.substr(0, path.find_last_of('/'));
  if (!makeDirs(dir, error) || !writeFileAtomic(path, kept, error))
    return false;
  out.open(path, std::ios::app);
  if (!out) {
    error = path + ": cannot write";
    return false;
  }
  return true;
}
