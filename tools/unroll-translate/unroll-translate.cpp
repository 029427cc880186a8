//===- unroll-translate.cpp - lowered MLIR -> compiled.so -----------------===//
//
//   unroll-translate lowered.mlir -o compiled.so
//
// Translates LLVM-dialect MLIR (the output of `unroll-opt --lower-to-cpu` or
// `--lower-to-gpu`, whose kernels are already embedded as gpu.binary) to
// LLVM IR, optimizes it (-O3 by default), emits a position-independent object
// for the host CPU and links it with the system C compiler into a shared
// library. GPU libraries also get the mgpu* runtime (libunroll_cuda_runtime.a,
// which only needs libcuda.so.1 at run time); CPU libraries whose
// contractions call the packed GEMM kernel get libunroll_cpu_kernels.a. The library is written to a
// temporary name and renamed into place, so a failure never leaves a half-written compiled.so
// behind.
//
//===----------------------------------------------------------------------===//
#include "unroll/InitAll.h"
#include "unroll/Support/Input.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/InstIterator.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Operator.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

using namespace llvm;

static cl::OptionCategory cat("unroll-translate options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<lowered.mlir>"), cl::init("-"),
                                      cl::cat(cat));
static cl::opt<std::string> outputFile("o", cl::desc("Output shared library"),
                                       cl::value_desc("compiled.so"), cl::init("compiled.so"),
                                       cl::cat(cat));
static cl::opt<unsigned> optLevel("O", cl::desc("LLVM optimization level 0-3"), cl::init(3),
                                  cl::Prefix, cl::cat(cat));
static cl::opt<bool> emitLLVM("emit-llvm", cl::desc("Write optimized LLVM IR instead of a .so"),
                              cl::cat(cat));
static cl::opt<bool>
    fpReassoc("fp-reassoc",
              cl::desc("Allow reassociation and contraction (FMA) of floating-point "
                       "operations, so reductions vectorize (default on; NaN/Inf "
                       "semantics are kept)"),
              cl::init(true), cl::cat(cat));
static cl::opt<std::string>
    gpuRuntime("gpu-runtime",
               cl::desc("The mgpu* runtime archive linked into GPU libraries (default: "
                        "libunroll_cuda_runtime.a in ../lib next to this tool, else the "
                        "build tree's)"),
               cl::init(""), cl::cat(cat));
static cl::opt<std::string>
    cpuKernels("cpu-kernels",
               cl::desc("The GEMM kernel archive linked into libraries that call it "
                        "(default: libunroll_cpu_kernels.a in ../lib next to this tool, "
                        "else the build tree's)"),
               cl::init(""), cl::cat(cat));
static cl::opt<std::string> linker("linker",
                                   cl::desc("C compiler used to link (default: $CC, else cc)"),
                                   cl::init(""), cl::cat(cat));

static int fail(const Twine &msg) {
  errs() << "unroll-translate: error: " << msg << "\n";
  return 1;
}

/// The input must be fully lowered: only the LLVM dialect inside the module,
/// plus serialized kernels (gpu.binary) and their launches.
static mlir::LogicalResult checkLowered(mlir::ModuleOp module, bool &hasGpu) {
  mlir::Operation *bad = nullptr;
  hasGpu = false;
  module.walk<mlir::WalkOrder::PreOrder>([&](mlir::Operation *op) {
    if (bad || op == module.getOperation())
      return;
    if (isa<mlir::gpu::BinaryOp, mlir::gpu::LaunchFuncOp>(op)) {
      hasGpu = true;
      return;
    }
    if (isa<mlir::gpu::GPUModuleOp>(op)) {
      op->emitError() << "GPU kernels are not serialized yet (gpu.module "
                         "without gpu-module-to-binary); run 'unroll-opt "
                         "--lower-to-gpu' to the end";
      bad = op;
      return;
    }
    if (!isa<mlir::LLVM::LLVMDialect>(op->getDialect()))
      bad = op;
  });
  if (!bad)
    return mlir::success();
  if (!isa<mlir::gpu::GPUModuleOp>(bad))
    bad->emitError() << "'" << bad->getName()
                     << "' is not lowered to the LLVM dialect; run "
                        "'unroll-opt --lower-to-cpu' (or --lower-to-gpu) first";
  return mlir::failure();
}

/// A runtime archive: `override` if given, else `file` in ../lib next to this
/// executable (a copied tree), else the build tree's `builtin`.
static std::string findArchive(const char *argv0, StringRef override, StringRef file,
                               StringRef builtin) {
  if (!override.empty())
    return override.str();
  std::string exe = sys::fs::getMainExecutable(argv0, (void *)&findArchive);
  SmallString<256> p(sys::path::parent_path(sys::path::parent_path(exe)));
  sys::path::append(p, "lib", file);
  if (sys::fs::exists(p))
    return std::string(p);
  return builtin.str();
}

/// Whether the module declares (calls) an external function named prefix*.
static bool callsExternal(mlir::ModuleOp module, StringRef prefix) {
  for (auto fn : module.getOps<mlir::LLVM::LLVMFuncOp>())
    if (fn.isExternal() && fn.getName().starts_with(prefix))
      return true;
  return false;
}

static int translateMain(int argc, char **argv);

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // The parser recurses over nested IR: a large stack (unroll/Support/Input.h).
  return mlir::unroll::runWithStack([&] { return translateMain(argc, argv); });
}

static int translateMain(int argc, char **argv) {
  cl::HideUnrelatedOptions(cat);
  cl::ParseCommandLineOptions(argc, argv,
                              "unroll-translate: turn `unroll-opt --lower-to-cpu` output into a "
                              "shared library\n(compiled.so) with the C ABI of docs/abi.md.\n");

  InitializeNativeTarget();
  InitializeNativeTargetAsmPrinter();

  mlir::DialectRegistry registry;
  mlir::unroll::registerUnrollDialects(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::MLIRContext ctx(registry);

  std::string err;
  auto file = mlir::openInputFile(inputFile, &err);
  if (!file)
    return fail(err);
  if (auto [line, col] =
          mlir::unroll::findDeepNesting(file->getBuffer(), mlir::unroll::kMaxNesting);
      line)
    return fail((inputFile == "-" ? std::string("<stdin>") : std::string(inputFile)) + ":" +
                std::to_string(line) + ":" + std::to_string(col) +
                ": brackets nested deeper than " + std::to_string(mlir::unroll::kMaxNesting) +
                " levels");
  SourceMgr sm;
  sm.AddNewSourceBuffer(std::move(file), SMLoc());
  mlir::SourceMgrDiagnosticHandler diag(sm, &ctx);
  auto module = mlir::parseSourceFile<mlir::ModuleOp>(sm, &ctx);
  if (!module)
    return 1; // the parser reported a located error
  bool hasGpu = false;
  if (mlir::failed(checkLowered(*module, hasGpu)))
    return 1;
  std::string gpuLib, cpuLib;
  if (hasGpu && !emitLLVM) {
    gpuLib = findArchive(argv[0], gpuRuntime, "libunroll_cuda_runtime.a", UNROLL_CUDA_RUNTIME_LIB);
    if (!sys::fs::exists(gpuLib))
      return fail("the module launches GPU kernels but the GPU runtime '" + gpuLib +
                  "' is missing (build the unroll_cuda_runtime target or pass "
                  "--gpu-runtime)");
  }
  bool usesGemm =
      !hasGpu &&
      (callsExternal(*module, "unroll_gemm_") || callsExternal(*module, "unroll_attention_") ||
       callsExternal(*module, "_mlir_memref_to_llvm_") || callsExternal(*module, "unroll_state_"));
  if (usesGemm && !emitLLVM) {
    cpuLib = findArchive(argv[0], cpuKernels, "libunroll_cpu_kernels.a", UNROLL_CPU_KERNELS_LIB);
    if (!sys::fs::exists(cpuLib))
      return fail("the module calls unroll's CPU kernels but '" + cpuLib +
                  "' is missing (build the unroll_cpu_kernels target or pass "
                  "--cpu-kernels)");
  }

  LLVMContext llctx;
  std::unique_ptr<Module> llm = mlir::translateModuleToLLVMIR(*module, llctx);
  if (!llm)
    return fail("translation to LLVM IR failed");

  std::string triple = sys::getDefaultTargetTriple();
  const Target *target = TargetRegistry::lookupTarget(triple, err);
  if (!target)
    return fail(err);
  TargetOptions topts;
  std::unique_ptr<TargetMachine> tm(target->createTargetMachine(
      triple, sys::getHostCPUName(), "", topts, Reloc::PIC_, std::nullopt,
      optLevel >= 2 ? CodeGenOptLevel::Aggressive : CodeGenOptLevel::None));
  llm->setTargetTriple(triple);
  llm->setDataLayout(tm->createDataLayout());

  if (fpReassoc)
    for (Function &f : *llm)
      for (Instruction &inst : instructions(f))
        if (isa<FPMathOperator>(inst)) {
          inst.setHasAllowReassoc(true);
          inst.setHasAllowContract(true);
        }

  if (auto e = mlir::makeOptimizingTransformer(optLevel, 0, tm.get())(llm.get()))
    return fail("LLVM optimization failed: " + toString(std::move(e)));

  if (emitLLVM) {
    std::error_code ec;
    ToolOutputFile out(outputFile, ec, sys::fs::OF_Text);
    if (ec)
      return fail("cannot write '" + outputFile + "': " + ec.message());
    llm->print(out.os(), nullptr);
    out.keep();
    return 0;
  }

  // Object file in a temporary next to the output.
  SmallString<256> obj;
  int fd;
  if (auto ec = sys::fs::createTemporaryFile("unroll", "o", fd, obj))
    return fail("cannot create a temporary object file: " + ec.message());
  FileRemover objRemover(obj);
  {
    raw_fd_ostream os(fd, /*shouldClose=*/true);
    legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, CodeGenFileType::ObjectFile))
      return fail("the target cannot emit object files");
    pm.run(*llm);
    os.flush();
    if (os.has_error())
      return fail("writing the object file failed");
  }

  // Link into a temporary, then rename into place (atomic on one file system).
  std::string cc = linker;
  if (cc.empty()) {
    const char *env = getenv("CC");
    cc = env && *env ? env : "cc";
  }
  auto ccPath = sys::findProgramByName(cc);
  if (!ccPath)
    return fail("cannot find the linker '" + cc + "' (set --linker or $CC)");
  std::string tmp = outputFile + ".tmp";
  FileRemover tmpRemover(tmp);
  SmallVector<StringRef> args{*ccPath, "-shared", "-o", tmp, obj};
  if (usesGemm)
    args.append({cpuLib, "-l:libstdc++.a", "-Wl,--exclude-libs,libstdc++.a"});
  if (hasGpu) {
    // The runtime is C++ without exceptions: link its support statically so
    // the library needs only libc, libm and (at run time) libcuda.so.1.
    args.append({gpuLib, "-l:libstdc++.a", "-static-libgcc", "-Wl,--exclude-libs,libstdc++.a",
                 "-ldl", "-lpthread"});
  }
  args.push_back("-lm");
  std::string linkErr;
  int rc = sys::ExecuteAndWait(*ccPath, args, std::nullopt, {}, 0, 0, &linkErr);
  if (rc != 0)
    return fail("linking with '" + *ccPath + "' failed" + (linkErr.empty() ? "" : ": " + linkErr));
  if (auto ec = sys::fs::rename(tmp, outputFile))
    return fail("cannot write '" + outputFile + "': " + ec.message());
  return 0;
}
