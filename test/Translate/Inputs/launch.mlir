// A lowered host function that launches an (empty) embedded kernel module.
module attributes {gpu.container_module} {
  llvm.func @f() {
    %c1 = llvm.mlir.constant(1 : index) : i64
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) : i64
    llvm.return
  }
  gpu.binary @k [#gpu.object<#nvvm.target, "">]
}
