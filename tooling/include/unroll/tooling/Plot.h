//===- Plot.h - small SVG line plots ---------------------------*- C++ -*-===//
//
// Enough of a plotting library for what unroll-run reports: one or more
// named series on linear or log-10 axes, each with an optional shaded band,
// with ticks, a legend and a title,
// written as a standalone SVG (atomically).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_TOOLING_PLOT_H
#define UNROLL_TOOLING_PLOT_H

#include <string>
#include <vector>

namespace unroll {

struct Series {
  std::string name;
  std::vector<double> x, y; // non-finite points are skipped
  /// An optional band around the curve (a 5-95% interval, say), drawn as a
  /// shaded area in the curve's colour: empty, or one bound per x (points
  /// whose bounds are not both usable are left out of the area).
  std::vector<double> lo, hi;
  /// The band's name in the legend (e.g. "5-95% band").
  std::string bandName;
};

struct PlotSpec {
  std::string title, xLabel, yLabel;
  bool logY = false;
  /// Logarithmic x axis: ticks at the data's x values when there are at
  /// most 8 distinct ones, else at 1, 2 and 5 times the powers of 10;
  /// points with x <= 0 are skipped.
  bool logX = false;
  /// With logY: values below are drawn at the floor (0 = no floor).
  double yFloor = 0;
  std::vector<Series> series;
};

/// Renders the plot as SVG text.
std::string renderSvg(const PlotSpec &spec);

/// Writes renderSvg(spec) to `path` (temp file + rename); false with `error`.
bool writeSvg(const std::string &path, const PlotSpec &spec, std::string &error);

} // namespace unroll

#endif
