//===- unroll-fuzz.cpp - libFuzzer target over parse → verify → lower -----===//
//
// Every input is parsed and verified. Modules whose top level holds only
// unroll energies and models then run the whole --lower-to-cpu pipeline
// (derive steps, differentiate, lower, bufferize, LLVM) and the translation
// to LLVM IR that unroll-translate performs. Errors are expected and
// ignored; a crash, a sanitizer report or a hang is a bug.
//
//   scripts/fuzz.sh SECONDS    (make fuzz FUZZ_SECONDS=1800)
//
//===----------------------------------------------------------------------===//
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"
#include "unroll/InitAll.h"
#include "unroll/Pipelines/Pipelines.h"
#include "unroll/Support/Input.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>
#include <memory>

using namespace mlir;

static MLIRContext &context() {
  static MLIRContext *ctx = [] {
    DialectRegistry registry;
    unroll::registerUnrollDialects(registry);
    registerBuiltinDialectTranslation(registry);
    registerLLVMDialectTranslation(registry);
    auto *c = new MLIRContext(registry);
    c->loadAllAvailableDialects();
    c->disableMultithreading();
    // Diagnostics are the expected outcome of most inputs: drop them.
    c->getDiagEngine().registerHandler([](Diagnostic &) { return success(); });
    return c;
  }();
  return *ctx;
}

static int runOne(const uint8_t *data, size_t size);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // As the tools do (unroll/Support/Input.h): text nested past kMaxNesting
  // is refused before parsing, the rest parses on a large stack.
  llvm::StringRef text((const char *)data, size);
  if (unroll::findDeepNesting(text, unroll::kMaxNesting).first)
    return 0;
  return unroll::runWithStack([&] { return runOne(data, size); }, size_t(256) << 20);
}

static int runOne(const uint8_t *data, size_t size) {
  MLIRContext &ctx = context();
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef((const char *)data, size), "fuzz"),
      llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sm, &ctx);
  if (!module)
    return 0;
  bool ours = !module->getBody()->empty();
  for (Operation &op : *module->getBody())
    ours &= isa<unroll::EnergyOp, unroll::ModelOp>(op);
  if (!ours)
    return 0; // other dialects' IR: parse and verify only
  PassManager pm(&ctx);
  unroll::buildLowerToCPUPipeline(pm, unroll::LowerToCPUOptions());
  if (failed(pm.run(*module)))
    return 0;
  llvm::LLVMContext llctx;
  std::unique_ptr<llvm::Module> llm = translateModuleToLLVMIR(*module, llctx);
  (void)llm;
  return 0;
}
