//===- Tasks.cpp ----------------------------------------------------------===//
#include "Tasks.h"

#include <sstream>

using namespace unroll;

std::string Rng::save() const {
  std::ostringstream os;
  os << eng_;
  return os.str();
}

bool Rng::restore(const std::string &s) {
  std::istringstream is(s);
  is >> eng_;
  return !is.fail();
}

Prompts unroll::sampleLinear(int64_t batch, int64_t points, int64_t dim, int64_t active,
                             double noise, Rng &rng) {
  Prompts p{batch, points, dim, std::vector<double>(batch * points * dim, 0.0),
            std::vector<double>(batch * points, 0.0)};
  std::vector<double> w(dim);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < dim; ++c)
      w[c] = c < active ? rng.normal() : 0.0;
    for (int64_t i = 0; i < points; ++i) {
      double y = 0;
      double *x = &p.xs[(b * points + i) * dim];
      for (int64_t c = 0; c < active; ++c) {
        x[c] = rng.normal();
        y += x[c] * w[c];
      }
      p.ys[b * points + i] = y + (noise > 0 ? noise * rng.normal() : 0.0);
    }
  }
  return p;
}
