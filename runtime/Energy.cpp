//===- Energy.cpp - energy traces through compiled.so ---------------------===//
#include "unroll/runtime/Energy.h"
#include "unroll/runtime/MemRef.h"
#include "unroll/runtime/ModelInfo.h"

using namespace unroll;
namespace key = unroll::info;

const nlohmann::json *unroll::findEnergy(const Model &m, const std::string &name,
                                         std::string &error) {
  const auto &info = m.info();
  if (!info.contains(key::kEnergies) || !info[key::kEnergies].is_array() ||
      info[key::kEnergies].empty()) {
    error = m.path() + ": the model has no energy (model info lists none)";
    return nullptr;
  }
  for (const auto &e : info[key::kEnergies])
    if (name.empty() || e.value(key::kName, "") == name)
      return &e;
  error = m.path() + ": no energy named '" + name + "'";
  return nullptr;
}

namespace {
template <typename T> std::vector<T> convert(const std::vector<double> &v) {
  return std::vector<T>(v.begin(), v.end());
}

template <typename T>
bool trace(void *fn, const EnergyInputs &in, int64_t iters, EnergyTrace &out) {
  using Fn = void (*)(MemRef<T, 2> *, MemRef<T, 1> *, MemRef<T, 2> *, MemRef<T, 1> *);
  std::vector<T> x = convert<T>(in.x), theta = convert<T>(in.theta);
  std::vector<T> y(in.x.size()), e(iters + 1);
  if (theta.empty())
    theta.push_back(0); // a valid pointer even without parameters
  auto xm = makeMemRef<T, 2>(x.data(), {in.n, in.d});
  auto tm = makeMemRef<T, 1>(theta.data(), {(int64_t)in.theta.size()});
  auto ym = makeMemRef<T, 2>(y.data(), {in.n, in.d});
  auto em = makeMemRef<T, 1>(e.data(), {iters + 1});
  reinterpret_cast<Fn>(fn)(&xm, &tm, &ym, &em);
  out.energies.assign(e.begin(), e.end());
  out.y.assign(y.begin(), y.end());
  return true;
}

template <typename T> void weights(void *fn, const EnergyInputs &in, std::vector<double> &out) {
  using Fn = void (*)(MemRef<T, 2> *, MemRef<T, 1> *, MemRef<T, 2> *);
  std::vector<T> y = convert<T>(in.x), theta = convert<T>(in.theta);
  std::vector<T> a(in.n * in.n);
  if (theta.empty())
    theta.push_back(0);
  auto ym = makeMemRef<T, 2>(y.data(), {in.n, in.d});
  auto tm = makeMemRef<T, 1>(theta.data(), {(int64_t)in.theta.size()});
  auto am = makeMemRef<T, 2>(a.data(), {in.n, in.n});
  reinterpret_cast<Fn>(fn)(&ym, &tm, &am);
  out.assign(a.begin(), a.end());
}

template <typename T>
void vjp(void *fn, const EnergyInputs &in, int64_t iters, const std::vector<double> &dyT,
         std::vector<double> &dx, std::vector<double> &grad) {
  using Fn = void (*)(MemRef<T, 2> *, MemRef<T, 1> *, int64_t, MemRef<T, 2> *, MemRef<T, 2> *,
                      MemRef<T, 1> *);
  std::vector<T> x = convert<T>(in.x), theta = convert<T>(in.theta), dy = convert<T>(dyT);
  std::vector<T> dxo(in.x.size()), g(std::max<size_t>(in.theta.size(), 1));
  if (theta.empty())
    theta.push_back(0);
  auto xm = makeMemRef<T, 2>(x.data(), {in.n, in.d});
  auto tm = makeMemRef<T, 1>(theta.data(), {(int64_t)in.theta.size()});
  auto dym = makeMemRef<T, 2>(dy.data(), {in.n, in.d});
  auto dxm = makeMemRef<T, 2>(dxo.data(), {in.n, in.d});
  auto gm = makeMemRef<T, 1>(g.data(), {(int64_t)g.size()});
  reinterpret_cast<Fn>(fn)(&xm, &tm, iters, &dym, &dxm, &gm);
  dx.assign(dxo.begin(), dxo.end());
  grad.assign(g.begin(), g.begin() + in.theta.size());
}

template <typename T>
void descend(void *fn, const DescentInputs &in, int64_t iters, EnergyTrace &out) {
  using Fn =
      void (*)(MemRef<T, 2> *, MemRef<T, 2> *, MemRef<T, 1> *, MemRef<T, 2> *, MemRef<T, 1> *);
  std::vector<T> y0 = convert<T>(in.y0), x = convert<T>(in.x), theta = convert<T>(in.theta);
  std::vector<T> y(in.y0.size()), e(iters + 1);
  if (theta.empty())
    theta.push_back(0);
  auto y0m = makeMemRef<T, 2>(y0.data(), {in.rows, in.cols});
  auto xm = makeMemRef<T, 2>(x.data(), {in.xRows, in.xCols});
  auto tm = makeMemRef<T, 1>(theta.data(), {(int64_t)in.theta.size()});
  auto ym = makeMemRef<T, 2>(y.data(), {in.rows, in.cols});
  auto em = makeMemRef<T, 1>(e.data(), {iters + 1});
  reinterpret_cast<Fn>(fn)(&y0m, &xm, &tm, &ym, &em);
  out.energies.assign(e.begin(), e.end());
  out.y.assign(y.begin(), y.end());
}

template <typename T>
void descendVJP(void *fn, const DescentInputs &in, int64_t iters, const std::vector<double> &dyT,
                std::vector<double> &dy0, std::vector<double> &dx, std::vector<double> &grad) {
  using Fn = void (*)(MemRef<T, 2> *, MemRef<T, 2> *, MemRef<T, 1> *, int64_t, MemRef<T, 2> *,
                      MemRef<T, 2> *, MemRef<T, 2> *, MemRef<T, 1> *);
  std::vector<T> y0 = convert<T>(in.y0), x = convert<T>(in.x), theta = convert<T>(in.theta),
                 dy = convert<T>(dyT);
  std::vector<T> dy0o(in.y0.size()), dxo(in.x.size()), g(std::max<size_t>(in.theta.size(), 1));
  if (theta.empty())
    theta.push_back(0);
  auto y0m = makeMemRef<T, 2>(y0.data(), {in.rows, in.cols});
  auto xm = makeMemRef<T, 2>(x.data(), {in.xRows, in.xCols});
  auto tm = makeMemRef<T, 1>(theta.data(), {(int64_t)in.theta.size()});
  auto dym = makeMemRef<T, 2>(dy.data(), {in.rows, in.cols});
  auto dy0m = makeMemRef<T, 2>(dy0o.data(), {in.rows, in.cols});
  auto dxm = makeMemRef<T, 2>(dxo.data(), {in.xRows, in.xCols});
  auto gm = makeMemRef<T, 1>(g.data(), {(int64_t)g.size()});
  reinterpret_cast<Fn>(fn)(&y0m, &xm, &tm, iters, &dym, &dy0m, &dxm, &gm);
  dy0.assign(dy0o.begin(), dy0o.end());
  dx.assign(dxo.begin(), dxo.end());
  grad.assign(g.begin(), g.begin() + in.theta.size());
}

/// Checks sizes against the model info before any call into compiled code.
bool checkInputs(const Model &m, const nlohmann::json &e, const EnergyInputs &in,
                 std::string &error) {
  if (in.n <= 0 || in.d <= 0) {
    error = "token count and dimension must be positive, got n = " + std::to_string(in.n) +
            ", d = " + std::to_string(in.d);
    return false;
  }
  if ((int64_t)in.x.size() != in.n * in.d) {
    error = "input has " + std::to_string(in.x.size()) + " values, expected " +
            std::to_string(in.n * in.d);
    return false;
  }
  if (e.contains(key::kDim) && e[key::kDim].is_number() && e[key::kDim] != in.d) {
    error = "the energy '" + e.value(key::kName, "") +
            "' is compiled for d = " + e[key::kDim].dump() + ", got d = " + std::to_string(in.d);
    return false;
  }
  if (e.contains(key::kTokens) && e[key::kTokens].is_number() && e[key::kTokens] != in.n) {
    error = "the energy '" + e.value(key::kName, "") +
            "' is compiled for n = " + e[key::kTokens].dump() +
            " tokens, got n = " + std::to_string(in.n);
    return false;
  }
  if (e.contains("graph") && (int64_t)e["graph"].size() != in.n) {
    error = "the energy's graph mask has " + std::to_string(e["graph"].size()) +
            " nodes, got n = " + std::to_string(in.n) + " tokens";
    return false;
  }
  if ((int64_t)in.theta.size() != e.value(key::kNumParams, (int64_t)0)) {
    error = "expected " + e[key::kNumParams].dump() + " parameter values, got " +
            std::to_string(in.theta.size());
    return false;
  }
  (void)m;
  return true;
}

/// The C-interface function named by the energy's `key` ("trace", "weights").
void *lookupEntry(const Model &m, const nlohmann::json &e, const char *key, std::string &error) {
  std::string name = e.value(key, "");
  void *fn = m.entry(name);
  if (!fn)
    error = m.path() + ": missing entry point '_mlir_ciface_" + name + "'";
  return fn;
}

bool isF32(const Model &m) { return m.info().value(key::kElementType, "") == "f32"; }
} // namespace

bool unroll::runEnergyTrace(const Model &m, const nlohmann::json &e, const EnergyInputs &in,
                            int64_t iterations, EnergyTrace &out, std::string &error) {
  if (iterations < 0) {
    error = "iterations must be >= 0, got " + std::to_string(iterations);
    return false;
  }
  if (!checkInputs(m, e, in, error))
    return false;
  void *fn = lookupEntry(m, e, "trace", error);
  if (!fn)
    return false;
  return isF32(m) ? trace<float>(fn, in, iterations, out) : trace<double>(fn, in, iterations, out);
}

namespace {
/// The checks of @E_descend and @E_descend_vjp before any call.
bool checkDescent(const Model &m, const nlohmann::json &e, const DescentInputs &in,
                  int64_t iterations, const char *key, std::string &error) {
  if (iterations < 0) {
    error = "iterations must be >= 0, got " + std::to_string(iterations);
    return false;
  }
  if (in.rows <= 0 || in.cols <= 0 || in.xRows <= 0 || in.xCols <= 0 ||
      (int64_t)in.y0.size() != in.rows * in.cols || (int64_t)in.x.size() != in.xRows * in.xCols) {
    error = "Y_0 must be rows x cols and X xRows x xCols, all positive";
    return false;
  }
  auto sizeIs = [&](const char *k, int64_t v, const char *what) {
    if (e.contains(k) && e[k].is_number_integer() && e[k].get<int64_t>() != v) {
      error = "the energy '" + e.value(key::kName, "") + "' is compiled for " + what + " " +
              e[k].dump() + ", got " + std::to_string(v);
      return false;
    }
    return true;
  };
  if (!sizeIs("dim", in.cols, "Y's feature size") ||
      !sizeIs("input_dim", in.xCols, "X's feature size"))
    return false;
  if ((int64_t)in.theta.size() != e.value(key::kNumParams, (int64_t)0)) {
    error = "expected " + e[key::kNumParams].dump() + " parameter values, got " +
            std::to_string(in.theta.size());
    return false;
  }
  if (!e.contains(key) || !e[key].is_string()) {
    error = m.path() + ": the energy has no '" + key +
            "' entry point (rebuild it with this unroll" +
            (std::string(key) == "descend_vjp" ? ", with --unroll-differentiate)" : ")");
    return false;
  }
  return true;
}
} // namespace

bool unroll::runEnergyDescent(const Model &m, const nlohmann::json &e, const DescentInputs &in,
                              int64_t iterations, EnergyTrace &out, std::string &error) {
  if (isUnrollingOfModel(e))
    return runModelDescent(m, e, in, iterations, out, error);
  if (!checkDescent(m, e, in, iterations, "descend", error))
    return false;
  void *fn = lookupEntry(m, e, "descend", error);
  if (!fn)
    return false;
  if (isF32(m))
    descend<float>(fn, in, iterations, out);
  else
    descend<double>(fn, in, iterations, out);
  return true;
}

bool unroll::energyDescentVJP(const Model &m, const nlohmann::json &e, const DescentInputs &in,
                              int64_t iterations, const std::vector<double> &dyT,
                              std::vector<double> &dy0, std::vector<double> &dx,
                              std::vector<double> &grad, std::string &error) {
  if (isUnrollingOfModel(e))
    return modelDescentVJP(m, e, in, iterations, dyT, dy0, dx, grad, error);
  if (!checkDescent(m, e, in, iterations, "descend_vjp", error))
    return false;
  if (dyT.size() != in.y0.size() || iterations < 1) {
    error = "the cotangent must have Y_0's size and iterations >= 1";
    return false;
  }
  void *fn = lookupEntry(m, e, "descend_vjp", error);
  if (!fn)
    return false;
  if (isF32(m))
    descendVJP<float>(fn, in, iterations, dyT, dy0, dx, grad);
  else
    descendVJP<double>(fn, in, iterations, dyT, dy0, dx, grad);
  return true;
}

bool unroll::energyVJP(const Model &m, const nlohmann::json &e, const EnergyInputs &in,
                       int64_t iterations, const std::vector<double> &dyT, std::vector<double> &dx,
                       std::vector<double> &grad, std::string &error) {
  if (!checkInputs(m, e, in, error))
    return false;
  if (!e.contains(key::kVjp) || !e[key::kVjp].is_string()) {
    error = m.path() + ": the energy was compiled without its gradient (run "
                       "--unroll-differentiate, part of --lower-to-cpu)";
    return false;
  }
  if (dyT.size() != in.x.size() || iterations < 1) {
    error = "the cotangent must be n x d and iterations >= 1";
    return false;
  }
  void *fn = lookupEntry(m, e, "vjp", error);
  if (!fn)
    return false;
  if (isF32(m))
    vjp<float>(fn, in, iterations, dyT, dx, grad);
  else
    vjp<double>(fn, in, iterations, dyT, dx, grad);
  return true;
}

bool unroll::attentionWeights(const Model &m, const nlohmann::json &e, const EnergyInputs &in,
                              std::vector<double> &out, std::string &error) {
  if (!checkInputs(m, e, in, error))
    return false;
  if (!e.contains(key::kWeights) || !e[key::kWeights].is_string()) {
    error = m.path() + ": the energy's steps have no attention step, so no weights";
    return false;
  }
  void *fn = lookupEntry(m, e, "weights", error);
  if (!fn)
    return false;
  if (isF32(m))
    weights<float>(fn, in, out);
  else
    weights<double>(fn, in, out);
  return true;
}

namespace {
template <typename T>
double adamStep(void *fn, const AdamStep &opt, std::vector<double> &theta,
                const std::vector<double> &grad, std::vector<double> &mom,
                std::vector<double> &vel) {
  std::vector<T> th = convert<T>(theta), g = convert<T>(grad), m = convert<T>(mom),
                 v = convert<T>(vel), hyper = adamHyper<T>(opt), partial(kAdamPartials);
  callCompiledAdam<T>(fn, th.data(), g.data(), m.data(), v.data(), (int64_t)th.size(),
                      hyper.data(), partial.data());
  theta.assign(th.begin(), th.end());
  mom.assign(m.begin(), m.end());
  vel.assign(v.begin(), v.end());
  double sum = 0;
  for (T x : partial)
    sum += x;
  return sum;
}
} // namespace

bool unroll::hasEnergyAdam(const Model &m, const nlohmann::json &e) {
  return e.contains(key::kAdam) && e[key::kAdam].is_string() &&
         m.entry(e[key::kAdam].get<std::string>());
}

bool unroll::energyAdamStep(const Model &m, const nlohmann::json &e, const AdamStep &opt,
                            std::vector<double> &theta, const std::vector<double> &grad,
                            std::vector<double> &mom, std::vector<double> &vel, double &normSq,
                            std::string &error) {
  if (!e.contains(key::kAdam) || !e[key::kAdam].is_string()) {
    error = m.path() + ": energy '" + e.value(key::kName, "") +
            "' has no compiled Adam (@E_adam: a differentiated energy with trained parameters; "
            "rebuild the library with this unroll-opt)";
    return false;
  }
  void *fn = lookupEntry(m, e, key::kAdam, error);
  if (!fn)
    return false;
  if (mom.empty())
    mom.assign(theta.size(), 0.0);
  if (vel.empty())
    vel.assign(theta.size(), 0.0);
  if (grad.size() != theta.size() || mom.size() != theta.size() || vel.size() != theta.size() ||
      theta.size() != (size_t)e.value(key::kNumParams, (int64_t)-1)) {
    error = "energy Adam step: theta, its gradient and Adam's moments must each have the "
            "energy's " +
            std::to_string(e.value(key::kNumParams, (int64_t)-1)) + " values";
    return false;
  }
  normSq = isF32(m) ? adamStep<float>(fn, opt, theta, grad, mom, vel)
                    : adamStep<double>(fn, opt, theta, grad, mom, vel);
  return true;
}
