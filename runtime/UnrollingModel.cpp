//===- UnrollingModel.cpp - a learned unrolling written as a model -------===//
//
// A dense model whose loop reads its input as data and descends an energy
// (examples/alista.mlir's @alista_model) is a learned unrolling. The
// optimization tasks take it as the energy-shaped entry unrollingOfModel
// builds; the descent, its gradient and Adam then run on the model's entry
// points:
//
//   the codes after k layers   @M_forward(Z = b [rows, 1, m], theta, k)
//   E(x_0) … E(x_k)            @M_energy_trace, summed over the rows
//   the gradient of <dY, x_k>  @M_forward_tape + @M_vjp_tape, the cotangent
//                              at the last of the k layers alone (training:
//                              x_k and the gradient of ½ Σ ‖x_k − x*‖² in
//                              this one forward and backward pass)
//   Adam                       @M_adam (the energy's ABI)
//
//===----------------------------------------------------------------------===//
#include "unroll/runtime/Energy.h"
#include "unroll/runtime/MemRef.h"
#include "unroll/runtime/ModelInfo.h"

using namespace unroll;
namespace key = unroll::info;

namespace {

constexpr const char *kOfModel = "of_model";

template <typename T> std::vector<T> convert(const std::vector<double> &v) {
  std::vector<T> out(v.begin(), v.end());
  if (out.empty())
    out.push_back(0); // a valid pointer even when empty
  return out;
}

void *entryOf(const Model &m, const nlohmann::json &mv, const char *which, std::string &error) {
  void *fn = m.entry(mv.value(which, ""));
  if (!fn)
    error = m.path() + ": model '" + mv.value(key::kName, "?") + "' has no entry point '" +
            mv.value(which, "") + "'";
  return fn;
}

template <typename T>
void forward(void *fwd, void *trace, const DescentInputs &in, int64_t k, bool everyLayer,
             EnergyTrace &out) {
  using Fwd = void (*)(MemRef<T, 3> *, MemRef<T, 1> *, int64_t, MemRef<T, 3> *);
  using Trace = void (*)(MemRef<T, 3> *, MemRef<T, 1> *, int64_t, MemRef<T, 2> *, MemRef<T, 2> *);
  std::vector<T> z = convert<T>(in.x), theta = convert<T>(in.theta);
  auto zm = makeMemRef<T, 3>(z.data(), {in.rows, 1, in.xCols});
  auto tm = makeMemRef<T, 1>(theta.data(), {(int64_t)in.theta.size()});
  out.y.assign(in.rows * in.cols, 0.0);
  if (k > 0) {
    std::vector<T> preds(k * in.rows * in.cols);
    auto pm = makeMemRef<T, 3>(preds.data(), {k, in.rows, in.cols});
    reinterpret_cast<Fwd>(fwd)(&zm, &tm, k, &pm);
    std::copy(preds.end() - in.rows * in.cols, preds.end(), out.y.begin());
    if (everyLayer)
      out.layers.assign(preds.begin(), preds.end());
  }
  out.energies.clear();
  if (!trace)
    return;
  std::vector<T> e((k + 1) * in.rows), starts(std::max<int64_t>(k, 1) * in.rows);
  auto em = makeMemRef<T, 2>(e.data(), {k + 1, in.rows});
  auto sm = makeMemRef<T, 2>(starts.data(), {k, in.rows});
  reinterpret_cast<Trace>(trace)(&zm, &tm, k, &em, &sm);
  out.energies.assign(k + 1, 0.0);
  for (int64_t t = 0; t <= k; ++t)
    for (int64_t r = 0; r < in.rows; ++r)
      out.energies[t] += e[t * in.rows + r];
}

/// Runs @M_forward_tape for k layers, then @M_vjp_tape with the cotangent
/// at the last layer: dyT where given, else x_k − target (the gradient of
/// ½ Σ ‖x_k − target‖²). `y` (where given) receives x_k.
template <typename T>
void gradient(void *fwdTape, void *vjpTape, int64_t wsPerRow, const DescentInputs &in, int64_t k,
              const std::vector<double> *dyT, const std::vector<double> *target,
              std::vector<double> *y, std::vector<double> &grad) {
  using FwdTape =
      void (*)(MemRef<T, 3> *, MemRef<T, 3> *, MemRef<T, 1> *, int64_t, int64_t, MemRef<T, 1> *);
  using VjpTape = void (*)(MemRef<T, 3> *, MemRef<T, 3> *, MemRef<T, 1> *, int64_t, int64_t,
                           MemRef<T, 1> *, MemRef<T, 1> *);
  std::vector<T> z = convert<T>(in.x), theta = convert<T>(in.theta);
  std::vector<T> preds(k * in.rows * in.cols), dpreds(preds.size(), T(0));
  std::vector<T> ws(std::max<int64_t>(in.rows * wsPerRow, 1)), g(theta.size());
  auto zm = makeMemRef<T, 3>(z.data(), {in.rows, 1, in.xCols});
  auto tm = makeMemRef<T, 1>(theta.data(), {(int64_t)in.theta.size()});
  auto pm = makeMemRef<T, 3>(preds.data(), {k, in.rows, in.cols});
  auto dm = makeMemRef<T, 3>(dpreds.data(), {k, in.rows, in.cols});
  auto wm = makeMemRef<T, 1>(ws.data(), {(int64_t)ws.size()});
  auto gm = makeMemRef<T, 1>(g.data(), {(int64_t)g.size()});
  reinterpret_cast<FwdTape>(fwdTape)(&zm, &pm, &tm, k, k, &wm);
  const size_t last = preds.size() - in.rows * in.cols;
  if (y)
    y->assign(preds.begin() + last, preds.end());
  for (size_t i = 0; i < size_t(in.rows * in.cols); ++i)
    dpreds[last + i] = dyT ? T((*dyT)[i]) : T(double(preds[last + i]) - (*target)[i]);
  reinterpret_cast<VjpTape>(vjpTape)(&zm, &dm, &tm, k, k, &wm, &gm);
  grad.assign(g.begin(), g.begin() + in.theta.size());
}

bool isF32(const Model &m) { return m.info().value(key::kElementType, "f64") == "f32"; }

/// The model's descent takes x_0 = 0 and one row of b per sample.
bool checkModelDescent(const Model &m, const nlohmann::json &mv, const DescentInputs &in,
                       int64_t k, std::string &error) {
  int64_t cols = mv.value("width", (int64_t)-1), xCols = mv.value(key::kPromptDim, (int64_t)-1);
  if (k < 0 || in.cols != cols || in.xCols != xCols || in.xRows != in.rows ||
      (int64_t)in.x.size() != in.rows * xCols ||
      (int64_t)in.theta.size() != mv.value(key::kNumParams, (int64_t)-1)) {
    error = m.path() + ": model '" + mv.value(key::kName, "?") + "' descends codes of " +
            std::to_string(cols) + " from one measurement of " + std::to_string(xCols) +
            " per row, with " + std::to_string(mv.value(key::kNumParams, (int64_t)-1)) +
            " parameters; got rows of " + std::to_string(in.cols) + " and " +
            std::to_string(in.xCols) + " (" + std::to_string(in.xRows) + " measurements for " +
            std::to_string(in.rows) + " rows) and " + std::to_string(in.theta.size()) +
            " parameters";
    return false;
  }
  for (double v : in.y0)
    if (v != 0.0) {
      error = m.path() + ": model '" + mv.value(key::kName, "?") +
              "' starts its loop at x_0 = 0; it cannot descend from another start";
      return false;
    }
  return true;
}

} // namespace

bool unroll::unrollingOfModel(const nlohmann::json &model, nlohmann::json &out,
                              std::string &error) {
  std::string name = model.value(key::kName, "?");
  const char *why = nullptr;
  if (model.value(key::kEncoding, "") != "dense")
    why = "encoding(dense): the codes are its predictions";
  else if (!model.contains(key::kEnergy) || !model[key::kEnergy].is_object())
    why = "a loop that descends an energy (unroll.descend)";
  else if (model.value(key::kOutputs, (int64_t)0) != model.value("width", (int64_t)-1))
    why = "predictions that are the loop's state (no read-out)";
  else if (!model.value(key::kFixedPoint, nlohmann::json()).is_null())
    why = "a loop that reads its input as data (`: type(b) -> type(x)`)";
  else if (!model.value("forward_tape", nlohmann::json()).is_string() ||
           !model.value("vjp_tape", nlohmann::json()).is_string())
    why = "@M_forward_tape and @M_vjp_tape (a CPU library)";
  if (why) {
    error = "model '" + name + "' is not a learned unrolling: it needs " + why +
            " (examples/alista.mlir's @alista_model is one)";
    return false;
  }
  // The energy's own entry (schedule, terms, name: a checkpoint names the
  // energy, so the energy form's and the model form's are interchangeable),
  // with the model's parameters, sizes and entry points.
  out = model[key::kEnergy];
  for (const char *k : {key::kParams, key::kNumParams, key::kAdam})
    out[k] = model[k];
  out[key::kDim] = model["width"];
  out[key::kInputDim] = model[key::kPromptDim];
  out[key::kTokens] = nullptr;
  const auto &ws = model["window_workspace"];
  int64_t tape = 0;
  for (const auto &w : ws.value("tape", nlohmann::json::array()))
    tape += w.get<int64_t>();
  out[kOfModel] = {{key::kName, name},
                   {key::kForward, model[key::kForward]},
                   {"forward_tape", model["forward_tape"]},
                   {"vjp_tape", model["vjp_tape"]},
                   {key::kTrace, model[key::kEnergy][key::kTrace]},
                   {"width", model["width"]},
                   {key::kPromptDim, model[key::kPromptDim]},
                   {key::kNumParams, model[key::kNumParams]},
                   {"state", ws.value("state", (int64_t)0)},
                   {"tape", tape},
                   {"previous", ws.value("previous", false)}};
  return true;
}

bool unroll::isUnrollingOfModel(const nlohmann::json &energy) { return energy.contains(kOfModel); }

bool unroll::runModelDescent(const Model &m, const nlohmann::json &energy, const DescentInputs &in,
                             int64_t iterations, EnergyTrace &out, std::string &error,
                             bool withEnergies, bool everyLayer) {
  const nlohmann::json &mv = energy[kOfModel];
  if (!checkModelDescent(m, mv, in, iterations, error))
    return false;
  void *fwd = entryOf(m, mv, key::kForward, error);
  void *trace = fwd && withEnergies ? entryOf(m, mv, key::kTrace, error) : nullptr;
  if (!fwd || (withEnergies && !trace))
    return false;
  if (isF32(m))
    forward<float>(fwd, trace, in, iterations, everyLayer, out);
  else
    forward<double>(fwd, trace, in, iterations, everyLayer, out);
  return true;
}

namespace {

/// @M_forward_tape + @M_vjp_tape for k layers, the cotangent at the last
/// one: dyT where given, else x_k − target (`y` then receives x_k). The
/// workspace per row (one token): k + 1 states, k tapes, one more state
/// where the body takes the previous iterate (docs/abi.md).
bool lastLayerGradient(const Model &m, const nlohmann::json &energy, const DescentInputs &in,
                       int64_t k, const std::vector<double> *dyT,
                       const std::vector<double> *target, std::vector<double> *y,
                       std::vector<double> &grad, std::string &error) {
  const nlohmann::json &mv = energy[kOfModel];
  if (!checkModelDescent(m, mv, in, k, error))
    return false;
  if ((int64_t)(dyT ? dyT : target)->size() != in.rows * in.cols || k < 1) {
    error = std::string(dyT ? "the cotangent" : "the target") +
            " must have the codes' size and iterations >= 1";
    return false;
  }
  void *ft = entryOf(m, mv, "forward_tape", error);
  void *vt = ft ? entryOf(m, mv, "vjp_tape", error) : nullptr;
  if (!vt)
    return false;
  int64_t state = mv["state"], tape = mv["tape"];
  int64_t perRow = (k + 1) * state + k * tape + (mv.value("previous", false) ? state : 0);
  if (isF32(m))
    gradient<float>(ft, vt, perRow, in, k, dyT, target, y, grad);
  else
    gradient<double>(ft, vt, perRow, in, k, dyT, target, y, grad);
  return true;
}

} // namespace

bool unroll::modelDescentVJP(const Model &m, const nlohmann::json &energy, const DescentInputs &in,
                             int64_t iterations, const std::vector<double> &dyT,
                             std::vector<double> &dy0, std::vector<double> &dx,
                             std::vector<double> &grad, std::string &error) {
  if (!lastLayerGradient(m, energy, in, iterations, &dyT, nullptr, nullptr, grad, error))
    return false;
  // x_0 = 0 is no input, and the measurements are data: neither gets one.
  dy0.assign(in.y0.size(), 0.0);
  dx.assign(in.x.size(), 0.0);
  return true;
}

bool unroll::modelDescentGrad(const Model &m, const nlohmann::json &energy,
                              const DescentInputs &in, int64_t iterations,
                              const std::vector<double> &target, EnergyTrace &out,
                              std::vector<double> &grad, std::string &error) {
  out.energies.clear();
  return lastLayerGradient(m, energy, in, iterations, nullptr, &target, &out.y, grad, error);
}
