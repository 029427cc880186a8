//===- Energy.h - energy traces through compiled.so ------------*- C++ -*-===//
#ifndef UNROLL_RUNTIME_ENERGY_H
#define UNROLL_RUNTIME_ENERGY_H

#include "unroll/runtime/AdamStep.h"
#include "unroll/runtime/Model.h"

#include <string>
#include <vector>

namespace unroll {

/// Everything an energy entry point needs; all matrices row-major doubles
/// (converted to the model's element type for the call).
struct EnergyInputs {
  int64_t n = 0, d = 0;
  std::vector<double> x;     // n × d
  std::vector<double> theta; // flat parameters, offsets from the model info
};

struct EnergyTrace {
  std::vector<double> energies; // E(Y_0) … E(Y_iterations)
  std::vector<double> y;        // Y_iterations, n × d
  std::vector<double> layers;   // Y_1 … Y_iterations, where asked (runModelDescent)
};

/// The model-info entry of the energy named `name` (the first if empty);
/// nullptr with `error` set if there is none.
/// Inputs of @E_descend: a start Y_0 [rows, cols] and the input X
/// [xRows, xCols], which need not have Y's shape (sparse coding's
/// measurements, a Hopfield memory).
struct DescentInputs {
  int64_t rows = 0, cols = 0, xRows = 0, xCols = 0;
  std::vector<double> y0, x, theta;
};

/// `iterations` steps of the energy's derived descent from Y_0 (@E_descend):
/// out.energies = E(Y_0) … E(Y_iterations), out.y = Y_iterations.
bool runEnergyDescent(const Model &m, const nlohmann::json &energy, const DescentInputs &in,
                      int64_t iterations, EnergyTrace &out, std::string &error);

/// The gradient of <dY_T, Y_T> (T = `iterations` steps from Y_0) for Y_0,
/// X and the flat parameters (@E_descend_vjp).
bool energyDescentVJP(const Model &m, const nlohmann::json &energy, const DescentInputs &in,
                      int64_t iterations, const std::vector<double> &dyT, std::vector<double> &dy0,
                      std::vector<double> &dx, std::vector<double> &grad, std::string &error);

const nlohmann::json *findEnergy(const Model &m, const std::string &name, std::string &error);

/// A learned unrolling written as a model (encoding(dense), a loop that
/// reads its input as data and descends an energy: examples/alista.mlir's
/// @alista_model) as the energy-shaped entry the optimization tasks take:
/// the energy's name, schedule and terms with the model's parameters and
/// entry points.
/// runEnergyDescent, energyDescentVJP and energyAdamStep on it run the
/// model's @M_forward and @M_energy_trace, @M_forward_tape and @M_vjp_tape
/// (the cotangent at the last layer), and @M_adam (runtime/UnrollingModel.cpp).
bool unrollingOfModel(const nlohmann::json &model, nlohmann::json &out, std::string &error);
bool isUnrollingOfModel(const nlohmann::json &energy);
/// (withEnergies false: out.energies stays empty, one pass fewer;
/// everyLayer: out.layers holds every layer's codes, [iterations, rows, cols],
/// from the same pass.)
bool runModelDescent(const Model &m, const nlohmann::json &energy, const DescentInputs &in,
                     int64_t iterations, EnergyTrace &out, std::string &error,
                     bool withEnergies = true, bool everyLayer = false);
bool modelDescentVJP(const Model &m, const nlohmann::json &energy, const DescentInputs &in,
                     int64_t iterations, const std::vector<double> &dyT, std::vector<double> &dy0,
                     std::vector<double> &dx, std::vector<double> &grad, std::string &error);

/// Training's step on a model: x_k (out.y, no energies) and the gradient of
/// ½ Σ ‖x_k − target‖² for the parameters, in one forward and one backward
/// pass (the energy form takes one more: its descent, then its VJP's).
bool modelDescentGrad(const Model &m, const nlohmann::json &energy, const DescentInputs &in,
                      int64_t iterations, const std::vector<double> &target, EnergyTrace &out,
                      std::vector<double> &grad, std::string &error);

/// Whether the library has the energy's compiled Adam (@E_adam: a
/// differentiated energy with trained parameters).
bool hasEnergyAdam(const Model &m, const nlohmann::json &energy);

/// One step of the energy's compiled Adam on theta, in place, with Adam's
/// moments `mom` and `vel` (zeros when empty). The values pass through the
/// library's element type, so an f32 library's weights and moments stay f32
/// values. `normSq`: the squared norm of grad.
bool energyAdamStep(const Model &m, const nlohmann::json &energy, const AdamStep &opt,
                    std::vector<double> &theta, const std::vector<double> &grad,
                    std::vector<double> &mom, std::vector<double> &vel, double &normSq,
                    std::string &error);

/// Runs `iterations` steps from Y_0 = X via the energy's trace entry point.
bool runEnergyTrace(const Model &m, const nlohmann::json &energy, const EnergyInputs &in,
                    int64_t iterations, EnergyTrace &out, std::string &error);

/// The vector-Jacobian product of X -> Y_iterations with the cotangent dyT
/// (n × d): dx (n × d) and grad (theta's size). Needs a differentiated energy.
bool energyVJP(const Model &m, const nlohmann::json &energy, const EnergyInputs &in,
               int64_t iterations, const std::vector<double> &dyT, std::vector<double> &dx,
               std::vector<double> &grad, std::string &error);

/// The normalized attention matrix (n × n) of the energy's first MM step at Y.
bool attentionWeights(const Model &m, const nlohmann::json &energy, const EnergyInputs &atY,
                      std::vector<double> &out, std::string &error);

} // namespace unroll

#endif
