//===- GradientSpec.h - the `gradient` grammar, written once ---*- C++ -*-===//
//
// How a loop with a fixed point is differentiated, as a user spells it:
// bptt | implicit[:TOL[:MAX]] | jfb | phantom[:K[:TAU]]. unroll-run's
// --gradient (GradientMode.h) and unroll-opt's gradient= pass option
// (lib/Transforms/FixedPoint.cpp) both parse it here. Header-only, standard
// library only: the compiler includes it as it includes the kernel ABI.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUNTIME_GRADIENTSPEC_H
#define UNROLL_RUNTIME_GRADIENTSPEC_H

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace unroll {

/// A parsed `gradient` value: the mode, and the parameters the text gave
/// (absent ones keep whatever default the user of the spec has).
struct GradientSpec {
  enum Kind { Bptt, Implicit, Jfb, Phantom } kind = Bptt;
  std::optional<double> tol;      // implicit: relative tolerance (> 0)
  std::optional<int64_t> max;     // implicit: iteration cap (>= 1)
  std::optional<int64_t> steps;   // phantom: K (>= 1)
  std::optional<double> damping;  // phantom: TAU in (0, 1]

  /// The grammar, for error messages.
  static constexpr const char *kGrammar =
      "bptt, implicit[:TOL[:MAX]], jfb or phantom[:K[:TAU]]";

  /// Parses `text`; false with `why` (what is wrong, not repeating the text).
  static bool parse(const std::string &text, GradientSpec &out, std::string &why) {
    std::vector<std::string> parts;
    for (size_t pos = 0;;) {
      size_t c = text.find(':', pos);
      parts.push_back(text.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
      if (c == std::string::npos)
        break;
      pos = c + 1;
    }
    auto real = [](const std::string &s, std::optional<double> &v) {
      char *end = nullptr;
      double x = strtod(s.c_str(), &end);
      if (s.empty() || *end || !std::isfinite(x))
        return false;
      v = x;
      return true;
    };
    auto integer = [](const std::string &s, std::optional<int64_t> &v) {
      char *end = nullptr;
      long long x = strtoll(s.c_str(), &end, 10);
      if (s.empty() || *end)
        return false;
      v = x;
      return true;
    };
    GradientSpec g;
    const std::string &name = parts[0];
    if (name == "bptt" || name == "jfb") {
      if (parts.size() > 1)
        return why = name + " takes no parameters", false;
      g.kind = name == "bptt" ? Bptt : Jfb;
    } else if (name == "implicit") {
      g.kind = Implicit;
      if (parts.size() > 3)
        return why = "too many parameters", false;
      if (parts.size() > 1 && !(real(parts[1], g.tol) && *g.tol > 0))
        return why = "the tolerance must be a number > 0", false;
      if (parts.size() > 2 && !(integer(parts[2], g.max) && *g.max >= 1))
        return why = "the iteration cap must be an integer >= 1", false;
    } else if (name == "phantom") {
      g.kind = Phantom;
      if (parts.size() > 3)
        return why = "too many parameters", false;
      if (parts.size() > 1 && !(integer(parts[1], g.steps) && *g.steps >= 1))
        return why = "the step count K must be an integer >= 1", false;
      if (parts.size() > 2 &&
          !(real(parts[2], g.damping) && *g.damping > 0 && *g.damping <= 1))
        return why = "the damping TAU must be in (0, 1]", false;
    } else {
      return why = "unknown mode '" + name + "'", false;
    }
    out = g;
    return true;
  }
};

} // namespace unroll

#endif
