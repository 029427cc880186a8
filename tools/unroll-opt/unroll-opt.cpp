//===- unroll-opt.cpp - the unroll optimizer driver -----------------------===//
//
// Parses unroll energies and runs passes / pipelines on them, e.g.
//   unroll-opt energy.mlir --unroll-derive-steps
//   unroll-opt energy.mlir --lower-to-cpu -o lowered.mlir
//
//===----------------------------------------------------------------------===//
#include "unroll/InitAll.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::unroll::registerUnrollDialects(registry);
  mlir::unroll::registerAllUnrollPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv,
      "unroll optimizer: derive descent steps from energies and lower them\n",
      registry));
}
