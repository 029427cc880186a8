//===- unroll-opt.cpp - the unroll optimizer driver -----------------------===//
//
// Parses unroll energies and runs passes / pipelines on them, e.g.
//   unroll-opt energy.mlir --unroll-derive-steps
//   unroll-opt energy.mlir --lower-to-cpu -o lowered.mlir
//   unroll-opt model.mlir --lower-to-gpu [--gpu-chip=sm_90] [--gpu-format=isa]
//
//===----------------------------------------------------------------------===//
#include "unroll/InitAll.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/ADT/StringRef.h"

#include <vector>

int main(int argc, char **argv) {
  // Errors name a source location; the generic dump of the failing operation
  // that MLIR appends by default is noise for users (opt back in with
  // --mlir-print-op-on-diagnostic).
  std::vector<char *> args(argv, argv + argc);
  bool explicitDump = false;
  for (char *a : args)
    explicitDump |= llvm::StringRef(a).contains("mlir-print-op-on-diagnostic");
  static char quiet[] = "--mlir-print-op-on-diagnostic=false";
  if (!explicitDump)
    args.insert(args.begin() + 1, quiet);
  argc = static_cast<int>(args.size());
  argv = args.data();
  mlir::DialectRegistry registry;
  mlir::unroll::registerUnrollDialects(registry);
  mlir::unroll::registerAllUnrollPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "unroll optimizer: derive descent steps from energies and lower them\n",
      registry));
}
