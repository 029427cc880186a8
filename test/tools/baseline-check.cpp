//===- baseline-check.cpp - run one in-context baseline on given data ------===//
//
//   unroll-baseline-check METHOD DATA.json
//
// DATA.json: {"x": [[...]] (n rows of d), "y": [...] (n), "test": [[...]]}.
// METHOD: tree (depth from "max_depth", default unlimited), boost ("trees",
// "max_depth", "lr"), net ("hidden", "steps", "lr"), lasso ("alpha").
// Prints {"pred": [...]} for the test rows, fitted on all n examples, plus
// what the fit reports (tree depth and leaves). Lets test/Integration/CPU/
// baselines.test compare the runtime's baselines with scikit-learn.
//
//===----------------------------------------------------------------------===//
#include "unroll/tooling/Baselines.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

using namespace unroll;

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: unroll-baseline-check tree|boost|net|lasso DATA.json\n");
    return 2;
  }
  std::string method = argv[1];
  std::ifstream in(argv[2]);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("x") || !j.contains("y") || !j.contains("test")) {
    fprintf(stderr, "unroll-baseline-check: %s: expected JSON with x, y and test\n", argv[2]);
    return 2;
  }
  int64_t n = j["x"].size(), d = n ? (int64_t)j["x"][0].size() : 0;
  std::vector<double> xs, ys = j["y"].get<std::vector<double>>();
  for (auto &row : j["x"])
    for (double v : row)
      xs.push_back(v);
  nlohmann::json out{{"pred", nlohmann::json::array()}};
  auto each = [&](auto predict) {
    for (auto &row : j["test"]) {
      std::vector<double> x = row.get<std::vector<double>>();
      out["pred"].push_back(predict(x.data()));
    }
  };
  if (method == "tree") {
    RegressionTree t;
    t.fit(xs.data(), ys.data(), n, d, j.value("max_depth", -1));
    out["depth"] = t.depth();
    out["leaves"] = t.leaves();
    each([&](const double *x) { return t.predict(x); });
  } else if (method == "boost") {
    BoostedTrees bt;
    bt.fit(xs.data(), ys.data(), n, d, j.value("trees", 50), j.value("max_depth", 4),
           j.value("lr", 0.1));
    each([&](const double *x) { return bt.predict(x); });
  } else if (method == "net") {
    TwoLayerNet net;
    net.init(d, j.value("hidden", 100), 7);
    net.train(xs.data(), ys.data(), n, j.value("steps", 300), j.value("lr", 5e-3));
    std::vector<double> g;
    out["train_mse"] = net.lossGrad(xs.data(), ys.data(), n, g);
    each([&](const double *x) { return net.predict(x); });
  } else if (method == "lasso") {
    std::vector<double> w = lasso(xs.data(), ys.data(), n, d, j.value("alpha", 0.01));
    out["coef"] = w;
    each([&](const double *x) {
      double s = 0;
      for (int64_t c = 0; c < d; ++c)
        s += w[c] * x[c];
      return s;
    });
  } else {
    fprintf(stderr, "unroll-baseline-check: unknown method '%s'\n", method.c_str());
    return 2;
  }
  printf("%s\n", out.dump().c_str());
  return 0;
}
