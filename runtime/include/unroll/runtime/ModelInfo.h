//===- ModelInfo.h - the model info's keys and ABI version, written once -===//
//
// A compiled library describes itself in JSON (unroll_model_info,
// docs/abi.md): the compiler writes it (lib/Conversion/UnrollToEntryPoints)
// and the runtime checks and reads it (runtime/Model.cpp, ModelRun.cpp,
// Energy.cpp). Both take the keys and the ABI version from here, so that a
// key renamed on one side cannot be missed on the other. Header-only, no
// dependencies: the compiler includes it as it includes the kernel ABI.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUNTIME_MODELINFO_H
#define UNROLL_RUNTIME_MODELINFO_H

namespace unroll::info {

/// The version of the C ABI of compiled.so; a library of another version
/// is refused with the advice to rebuild it.
constexpr int kAbiVersion = 2;

// The top level.
constexpr const char *kAbi = "abi_version";
constexpr const char *kKind = "kind";     // "model" or "energy"
constexpr const char *kTarget = "target"; // "cpu" or "gpu"
constexpr const char *kChip = "chip";
constexpr const char *kElementType = "element_type"; // "f32" or "f64"
constexpr const char *kModels = "models";
constexpr const char *kEnergies = "energies";

// Every entry of "models" and "energies".
constexpr const char *kName = "name";
constexpr const char *kNumParams = "num_params";
constexpr const char *kIterations = "iterations";
constexpr const char *kParams = "params";

// A parameter of "params": where it lies in theta and how it starts.
constexpr const char *kShape = "shape";
constexpr const char *kOffset = "offset";
constexpr const char *kInit = "init";
constexpr const char *kStd = "std";
constexpr const char *kValue = "value";
constexpr const char *kFixed = "fixed";

// A model: its entry points and shapes.
constexpr const char *kForward = "forward";
constexpr const char *kLossGrad = "loss_grad";
constexpr const char *kAdam = "adam";
constexpr const char *kPromptDim = "prompt_dim";
constexpr const char *kTokenDim = "token_dim";
constexpr const char *kEncoding = "encoding"; // "interleaved", "concat" or "dense"
constexpr const char *kOutputs = "outputs";   // features per prediction (1 but when dense)
constexpr const char *kWindow = "window";
constexpr const char *kPositions = "positions";
constexpr const char *kEnergy = "energy"; // the energy its loop descends
constexpr const char *kFixedPoint = "fixed_point";

// A model's "fixed_point".
constexpr const char *kSolve = "solve";
constexpr const char *kLossGradFixed = "loss_grad_fixed";
constexpr const char *kGradient = "gradient";
constexpr const char *kGradientTol = "gradient_tol";
constexpr const char *kGradientMax = "gradient_max";
constexpr const char *kPhantomSteps = "phantom_steps";
constexpr const char *kDamping = "damping";
constexpr const char *kStateBytesPerToken = "state_bytes_per_token";
constexpr const char *kTapeBytesPerToken = "tape_bytes_per_token";
constexpr const char *kUntil = "until"; // {"tol", "max"}
constexpr const char *kTol = "tol";
constexpr const char *kMax = "max";

// An energy (and a model's "energy"): its entry points and sizes.
constexpr const char *kTrace = "trace";
constexpr const char *kVjp = "vjp";
constexpr const char *kWeights = "weights";
constexpr const char *kTokens = "tokens";
constexpr const char *kDim = "dim";
constexpr const char *kInputDim = "input_dim"; // a data-input energy's X width
constexpr const char *kSchedule = "schedule";

} // namespace unroll::info

#endif // UNROLL_RUNTIME_MODELINFO_H
