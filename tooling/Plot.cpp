//===- Plot.cpp - small SVG line plots ------------------------------------===//
#include "unroll/tooling/Plot.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

using namespace unroll;

namespace {
const char *kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                         "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

std::string esc(const std::string &s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else
      o += c;
  }
  return o;
}

std::string num(double v) {
  char b[32];
  snprintf(b, sizeof b, "%.6g", v); // 10^(log10(2) + 4) is 19999.99...
  v = strtod(b, nullptr);
  if (v == std::round(v) && std::abs(v) < 1e7)
    snprintf(b, sizeof b, "%.0f", v); // 20000, not 2e+04
  else
    snprintf(b, sizeof b, "%.4g", v);
  return b;
}

/// Ticks of a log-10 axis over [lo, hi] (exponents): 1, 2 and 5 times each
/// power of 10 when the range spans at most 3 decades, else the powers only.
std::vector<double> logTicks(double lo, double hi) {
  std::vector<double> t;
  bool fine = hi - lo <= 3;
  for (double e = std::floor(lo); e <= std::ceil(hi); ++e)
    for (double m : {1.0, 2.0, 5.0}) {
      double v = e + std::log10(m);
      if ((m == 1.0 || fine) && v >= lo - 1e-9 && v <= hi + 1e-9)
        t.push_back(v);
    }
  return t;
}

/// About `n` "nice" ticks covering [lo, hi].
std::vector<double> niceTicks(double lo, double hi, int n) {
  double span = hi - lo;
  if (!(span > 0))
    return {lo};
  double step = std::pow(10, std::floor(std::log10(span / n)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (span / (step * m) <= n) {
      step *= m;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * span; v += step)
    t.push_back(std::abs(v) < 1e-12 * span ? 0.0 : v);
  return t;
}
} // namespace

std::string unroll::renderSvg(const PlotSpec &spec) {
  const double W = 720, H = 440, L = 80, R = 180, T = 40, B = 56;
  auto tr = [&](double y) {
    if (spec.logY && spec.yFloor > 0)
      y = std::max(y, spec.yFloor);
    return spec.logY ? std::log10(y) : y;
  };
  auto trX = [&](double x) { return spec.logX ? std::log10(x) : x; };
  auto usable = [&](double x, double y) {
    return std::isfinite(x) && std::isfinite(y) && (!spec.logY || y > 0) && (!spec.logX || x > 0);
  };
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  auto banded = [&](const Series &s, size_t i) {
    return i < s.lo.size() && i < s.hi.size() && usable(s.x[i], s.lo[i]) &&
           usable(s.x[i], s.hi[i]);
  };
  auto cover = [&](double x, double y) {
    x0 = std::min(x0, trX(x));
    x1 = std::max(x1, trX(x));
    y0 = std::min(y0, tr(y));
    y1 = std::max(y1, tr(y));
  };
  for (auto &s : spec.series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (i < s.y.size() && usable(s.x[i], s.y[i]))
        cover(s.x[i], s.y[i]);
      if (banded(s, i)) {
        cover(s.x[i], s.lo[i]);
        cover(s.x[i], s.hi[i]);
      }
    }
  if (!std::isfinite(x0)) {
    x0 = 0;
    x1 = 1;
    y0 = 0;
    y1 = 1;
  }
  if (x1 == x0) {
    x0 -= 0.5;
    x1 += 0.5;
  }
  if (y1 == y0) {
    y0 -= 0.5;
    y1 += 0.5;
  }
  double pad = 0.05 * (y1 - y0);
  y0 -= pad;
  y1 += pad;
  if (spec.logX) { // room for the end points' markers
    pad = 0.03 * (x1 - x0);
    x0 -= pad;
    x1 += pad;
  }
  auto pxT = [&](double tx) { return L + (tx - x0) / (x1 - x0) * (W - L - R); };
  auto px = [&](double x) { return pxT(trX(x)); };
  auto py = [&](double y) { return H - B - (tr(y) - y0) / (y1 - y0) * (H - T - B); };
  auto pyT = [&](double ty) { return H - B - (ty - y0) / (y1 - y0) * (H - T - B); };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << (L + (W - L - R) / 2)
    << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" << esc(spec.title) << "</text>\n";
  // Grid and ticks.
  // A log x axis with few distinct x (steps that double, say) ticks at them.
  std::vector<double> xTicks;
  if (spec.logX) {
    for (auto &s : spec.series)
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
        if (usable(s.x[i], s.y[i]))
          xTicks.push_back(trX(s.x[i]));
    std::sort(xTicks.begin(), xTicks.end());
    xTicks.erase(std::unique(xTicks.begin(), xTicks.end()), xTicks.end());
    if (xTicks.size() > 8)
      xTicks = logTicks(x0, x1);
  } else {
    xTicks = niceTicks(x0, x1, 8);
  }
  for (double t : xTicks) {
    o << "<line x1=\"" << pxT(t) << "\" x2=\"" << pxT(t) << "\" y1=\"" << T << "\" y2=\"" << H - B
      << "\" stroke=\"#eee\"/><text x=\"" << pxT(t) << "\" y=\"" << H - B + 16
      << "\" text-anchor=\"middle\">" << num(spec.logX ? std::pow(10, t) : t) << "</text>\n";
  }
  for (double t : niceTicks(y0, y1, 6)) {
    std::string label = spec.logY ? "1e" + num(t) : num(t);
    if (spec.logY && std::abs(t - std::round(t)) > 1e-9)
      continue;
    o << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << pyT(t) << "\" y2=\"" << pyT(t)
      << "\" stroke=\"#eee\"/><text x=\"" << L - 6 << "\" y=\"" << pyT(t) + 4
      << "\" text-anchor=\"end\">" << label << "</text>\n";
  }
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\""
    << H - T - B << "\" fill=\"none\" stroke=\"#333\"/>\n"
    << "<text x=\"" << (L + (W - L - R) / 2) << "\" y=\"" << H - 14 << "\" text-anchor=\"middle\">"
    << esc(spec.xLabel) << (spec.logX ? " (log scale)" : "") << "</text>\n"
    << "<text transform=\"translate(18," << (T + (H - T - B) / 2)
    << ") rotate(-90)\" text-anchor=\"middle\">" << esc(spec.yLabel)
    << (spec.logY ? (spec.yFloor > 0 ? " (log, floor " + num(spec.yFloor) + ")" : " (log scale)")
                  : "")
    << "</text>\n";
  // Bands first, under every curve: the upper bound left to right, the
  // lower one back.
  for (size_t k = 0; k < spec.series.size(); ++k) {
    const Series &s = spec.series[k];
    std::vector<size_t> in;
    for (size_t i = 0; i < s.x.size(); ++i)
      if (banded(s, i))
        in.push_back(i);
    if (in.size() < 2)
      continue;
    o << "<polygon fill=\"" << kColors[k % 8] << "\" fill-opacity=\"0.18\" stroke=\"none\" points=\"";
    for (size_t i : in)
      o << px(s.x[i]) << "," << py(s.hi[i]) << " ";
    for (size_t j = in.size(); j-- > 0;)
      o << px(s.x[in[j]]) << "," << py(s.lo[in[j]]) << " ";
    o << "\"/>\n";
  }
  // Series with a legend (a band gets a swatch of its own below its curve).
  double ly = T + 14;
  for (size_t k = 0; k < spec.series.size(); ++k) {
    const Series &s = spec.series[k];
    const char *c = kColors[k % 8];
    o << "<polyline fill=\"none\" stroke=\"" << c << "\" stroke-width=\"2\" points=\"";
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (usable(s.x[i], s.y[i]))
        o << px(s.x[i]) << "," << py(s.y[i]) << " ";
    o << "\"/>\n";
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (usable(s.x[i], s.y[i]))
        o << "<circle cx=\"" << px(s.x[i]) << "\" cy=\"" << py(s.y[i]) << "\" r=\"2.5\" fill=\""
          << c << "\"/>\n";
    o << "<line x1=\"" << W - R + 14 << "\" x2=\"" << W - R + 38 << "\" y1=\"" << ly << "\" y2=\""
      << ly << "\" stroke=\"" << c << "\" stroke-width=\"2\"/><text x=\"" << W - R + 44 << "\" y=\""
      << ly + 4 << "\">" << esc(s.name) << "</text>\n";
    ly += 20;
    if (!s.bandName.empty() && !s.lo.empty()) {
      o << "<rect x=\"" << W - R + 14 << "\" y=\"" << ly - 6 << "\" width=\"24\" height=\"12\" fill=\""
        << c << "\" fill-opacity=\"0.18\"/><text x=\"" << W - R + 44 << "\" y=\"" << ly + 4
        << "\">" << esc(s.bandName) << "</text>\n";
      ly += 20;
    }
  }
  o << "</svg>\n";
  return o.str();
}

bool unroll::writeSvg(const std::string &path, const PlotSpec &spec, std::string &error) {
  std::string text = renderSvg(spec), tmp = path + ".tmp";
  FILE *f = fopen(tmp.c_str(), "w");
  if (!f) {
    error = path + ": cannot write (" + strerror(errno) + ")";
    return false;
  }
  bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    error = path + ": write failed (" + strerror(errno) + ")";
    remove(tmp.c_str());
    return false;
  }
  return true;
}
