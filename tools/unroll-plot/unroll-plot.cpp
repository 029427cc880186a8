//===- unroll-plot.cpp - curves from CSV files into one SVG ---------------===//
//
//   unroll-plot OUT.svg [--title T] [--x COL] [--xlabel L] [--ylabel L]
//               [--log-x] [--log-y] [--y-floor V] FILE.csv:COLUMN[:LABEL] ...
//
// Puts columns of the CSV files unroll-run writes (eval.csv, loops.csv) on
// one plot, e.g. the loop studies of two models. Empty cells are skipped. A
// column COL with COL_p05 and COL_p95 in its file (or p05 and p95 right
// after it, as in loops.csv) gets its band shaded.
//
//===----------------------------------------------------------------------===//
#include "unroll/tooling/Flags.h"
#include "unroll/tooling/Plot.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace unroll;

static std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    out.push_back(item);
  if (!s.empty() && s.back() == sep)
    out.push_back("");
  return out;
}

static int fail(const std::string &msg) {
  fprintf(stderr, "unroll-plot: error: %s\n", msg.c_str());
  return 1;
}

/// unroll-plot's flags; they set `spec`, `xCol` and `bands`.
static FlagTable flags(PlotSpec &spec, std::string &xCol, bool &bands) {
  FlagTable t("unroll-plot", "unroll-plot OUT.svg [options] FILE.csv:COLUMN[:LABEL] ...",
              "Plots columns of CSV files (a header row, then numbers; empty cells skipped)\n"
              "against a shared x column into one SVG. Where the file also has COLUMN_p05\n"
              "and COLUMN_p95 (as unroll-run's eval.csv has model_p05 and model_p95), or\n"
              "p05 and p95 right after COLUMN (as in loops.csv), the 5-95% band between\n"
              "them is drawn as a shaded area around the curve.");
  t.option("--title", "T", "plot title", setText(spec.title))
      .option("--x", "COL", "the x column (default: the first column of each file)", setText(xCol))
      .option("--xlabel", "L", "x axis label (default: the x column)", setText(spec.xLabel))
      .option("--ylabel", "L", "y axis label", setText(spec.yLabel))
      .flag("--log-x", "logarithmic x axis (points with x <= 0 are skipped)",
            [&spec] { spec.logX = true; })
      .flag("--log-y", "logarithmic y axis (points with y <= 0 are skipped)",
            [&spec] { spec.logY = true; })
      .option("--y-floor", "V", "with --log-y, draw values below V at V",
              setPositive("--y-floor", spec.yFloor))
      .flag("--no-bands", "draw the curves only, without their 5-95% bands",
            [&bands] { bands = false; });
  return t;
}

int main(int argc, char **argv) {
  PlotSpec spec;
  std::string xCol, err;
  bool bands = true;
  FlagTable table = flags(spec, xCol, bands);
  if (FlagTable::wantsHelp(argc, argv) || argc < 2) {
    fputs(table.usage().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::vector<std::string> positional;
  if (!table.parse(argc, argv, positional, err))
    return fail(err);
  if (positional.empty())
    return fail("no OUT.svg given (see --help)");
  std::string out = positional[0];
  std::vector<std::string> curves(positional.begin() + 1, positional.end());
  if (curves.empty())
    return fail("no FILE.csv:COLUMN given (see --help)");
  for (const std::string &c : curves) {
    std::vector<std::string> parts = split(c, ':');
    if (parts.size() < 2 || parts.size() > 3)
      return fail("'" + c + "': expected FILE.csv:COLUMN[:LABEL]");
    std::ifstream in(parts[0]);
    if (!in)
      return fail(parts[0] + ": cannot read");
    std::string line;
    std::getline(in, line);
    std::vector<std::string> header = split(line, ',');
    auto col = [&](const std::string &name) {
      for (size_t j = 0; j < header.size(); ++j)
        if (header[j] == name)
          return (int)j;
      return -1;
    };
    int xi = xCol.empty() ? 0 : col(xCol), yi = col(parts[1]);
    if (xi < 0 || yi < 0)
      return fail(parts[0] + ": no column '" + (xi < 0 ? xCol : parts[1]) + "' (columns: " + line +
                  ")");
    Series s{parts.size() == 3 ? parts[2] : parts[1], {}, {}};
    int loI = bands ? col(parts[1] + "_p05") : -1, hiI = bands ? col(parts[1] + "_p95") : -1;
    if (bands && loI < 0 && col("p05") == yi + 1 && col("p95") == yi + 2) { // loops.csv
      loI = yi + 1;
      hiI = yi + 2;
    }
    bool banded = loI >= 0 && hiI >= 0;
    if (banded)
      s.bandName = "5-95%";
    // An empty or missing cell is a point the band leaves out.
    auto cell = [](const std::vector<std::string> &cells, int j) {
      return j < (int)cells.size() && !cells[j].empty() ? strtod(cells[j].c_str(), nullptr) : NAN;
    };
    int row = 1;
    while (std::getline(in, line)) {
      ++row;
      std::vector<std::string> cells = split(line, ',');
      if ((int)cells.size() <= std::max(xi, yi) || cells[yi].empty() || cells[xi].empty())
        continue;
      char *end = nullptr;
      double x = strtod(cells[xi].c_str(), &end), y = strtod(cells[yi].c_str(), nullptr);
      if (end == cells[xi].c_str())
        return fail(parts[0] + ":" + std::to_string(row) + ": not a number: '" + cells[xi] + "'");
      s.x.push_back(x);
      s.y.push_back(y);
      if (banded) {
        s.lo.push_back(cell(cells, loI));
        s.hi.push_back(cell(cells, hiI));
      }
    }
    if (spec.xLabel.empty())
      spec.xLabel = header[xi];
    spec.series.push_back(std::move(s));
  }
  if (!writeSvg(out, spec, err))
    return fail(err);
  printf("wrote %s (%zu curves)\n", out.c_str(), spec.series.size());
  return 0;
}
