//===- unroll-opt.cpp - the unroll optimizer driver -----------------------===//
//
// Parses unroll energies and runs passes / pipelines on them, e.g.
//   unroll-opt energy.mlir --unroll-derive-steps
//   unroll-opt energy.mlir --lower-to-cpu -o lowered.mlir
//   unroll-opt model.mlir --lower-to-gpu [--gpu-chip=sm_90] [--gpu-format=isa]
//
//===----------------------------------------------------------------------===//
#include "unroll/InitAll.h"
#include "unroll/Support/Input.h"

#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <vector>

static int optMain(int argc, char **argv) {
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
  auto [inputName, outputName] = mlir::registerAndParseCLIOptions(
      argc, argv, "unroll optimizer: derive descent steps from energies and lower them\n",
      registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects())
    return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, inputName, outputName, registry));
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = mlir::openInputFile(inputName, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  // Nesting past the parser's stack: a located error, not a crash.
  if (auto [line, col] =
          mlir::unroll::findDeepNesting(input->getBuffer(), mlir::unroll::kMaxNesting);
      line) {
    llvm::errs() << (inputName == "-" ? "<stdin>" : inputName) << ":" << line << ":" << col
                 << ": error: brackets nested deeper than " << mlir::unroll::kMaxNesting
                 << " levels (unroll-opt parses at most that)\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output = mlir::openOutputFile(outputName, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}

int main(int argc, char **argv) {
  // The parser and the passes recurse over nested IR: a large stack.
  return mlir::unroll::runWithStack([&] { return optMain(argc, argv); });
}
