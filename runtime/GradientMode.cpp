//===- GradientMode.cpp - gradient modes of loops with a fixed point ------===//
#include "unroll/runtime/GradientMode.h"
#include "unroll/runtime/GradientSpec.h"
#include "unroll/runtime/ModelInfo.h"

#include <algorithm>
#include <cstdio>

using namespace unroll;
namespace key = unroll::info;

std::string GradientMode::str() const {
  char buf[96];
  switch (kind) {
  case Bptt:
    return "bptt";
  case Jfb:
    return "jfb";
  case Implicit:
    snprintf(buf, sizeof buf, "implicit:%g:%lld", tol, (long long)steps);
    return damping == 1.0 ? buf : std::string(buf) + " (damping " + std::to_string(damping) + ")";
  case Phantom:
    snprintf(buf, sizeof buf, "phantom:%lld:%g", (long long)steps, damping);
    return buf;
  }
  return "?";
}

bool unroll::parseGradientMode(const std::string &text, GradientMode &out, std::string &error) {
  GradientSpec s;
  std::string why;
  if (!GradientSpec::parse(text, s, why)) {
    error = "--gradient " + text + ": " + why + " (expected " + GradientSpec::kGrammar + ")";
    return false;
  }
  GradientMode g;
  switch (s.kind) {
  case GradientSpec::Bptt:
    g.kind = GradientMode::Bptt;
    break;
  case GradientSpec::Jfb:
    g.kind = GradientMode::Jfb;
    break;
  case GradientSpec::Implicit:
    g.kind = GradientMode::Implicit;
    g.tol = s.tol.value_or(1e-5);
    g.steps = s.max.value_or(100);
    break;
  case GradientSpec::Phantom:
    g.kind = GradientMode::Phantom;
    g.steps = s.steps.value_or(5);
    g.damping = s.damping.value_or(0.5);
    break;
  }
  out = g;
  return true;
}

GradientMode unroll::modelGradientMode(const nlohmann::json &info) {
  GradientMode g;
  if (!info.contains(key::kFixedPoint))
    return g;
  const auto &fp = info[key::kFixedPoint];
  std::string mode = fp.value(key::kGradient, "bptt"), error;
  if (!parseGradientMode(mode, g, error))
    return GradientMode();
  if (fp.contains(key::kGradientTol))
    g.tol = fp[key::kGradientTol].get<double>();
  if (fp.contains(key::kGradientMax))
    g.steps = fp[key::kGradientMax].get<int64_t>();
  if (fp.contains(key::kPhantomSteps))
    g.steps = fp[key::kPhantomSteps].get<int64_t>();
  if (fp.contains(key::kDamping))
    g.damping = fp[key::kDamping].get<double>();
  return g;
}

int64_t unroll::activationBytesPerPrompt(const nlohmann::json &info, const GradientMode &g,
                                         int64_t window, int64_t loops, int64_t tokens) {
  if (!info.contains(key::kFixedPoint))
    return -1;
  int64_t state = info[key::kFixedPoint].value(key::kStateBytesPerToken, (int64_t)0),
          tape = info[key::kFixedPoint].value(key::kTapeBytesPerToken, (int64_t)0);
  int64_t tw = std::min(window, loops);
  return tokens * (g.fixedPoint() ? 2 * state + tape : (tw + 1) * state + tw * tape);
}
