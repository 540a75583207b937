//! Backends `cpp` and `cuda_binding` (harness/ksearch_harness/backends/cpp/ and cuda_binding/):
//! FlashInfer-Bench's C++ and CUDA sources built through tvm-ffi (the default) into an extension
//! module whose entry takes tensors (`tvm::ffi::TensorView`), inputs then outputs.

use super::{entry, file, gpu_name, names, writes, BackendContract, Setting};
use ksearch_spec::Language;

/// The file a single unnamed code block is given when the task has no seed.
pub(super) const DEFAULT_FILE_CPP: &str = "kernel.cc";
/// The same for `cuda_binding`.
pub(super) const DEFAULT_FILE_CUDA: &str = "kernel.cu";

pub(super) fn contract(s: &Setting<'_>, language: Language) -> BackendContract {
    let task = s.task;
    let (inputs, outputs, _) = names(task);
    let params: Vec<String> = inputs
        .iter()
        .chain(outputs.iter())
        .map(|n| format!("tvm::ffi::TensorView {n}"))
        .collect();
    let symbol = entry(task);
    let gpu = language == Language::CudaBinding;
    BackendContract {
        language,
        signature: format!(
            "void {symbol}({}); TVM_FFI_DLL_EXPORT_TYPED_FUNC({symbol}, {symbol});",
            params.join(", ")
        ),
        calling: format!(
            "{} source (entry `{}::{symbol}`), built as FlashInfer-Bench builds it: tvm_ffi.cpp.build into a module, \
             the entry exported with TVM_FFI_DLL_EXPORT_TYPED_FUNC (include <tvm/ffi/container/tensor.h> and \
             <tvm/ffi/function.h>). Destination-passing style: the inputs in definition order as tensors (scalars as \
             int64_t, double or bool), then the outputs, preallocated; read shapes from the tensors. {}",
            if gpu { "CUDA C++" } else { "C++17" },
            file(task),
            writes(task),
        ),
        device: if gpu {
            format!("{}; tensors are torch CUDA tensors", gpu_name(s.device))
        } else {
            "the CPU of the machine that evaluates; tensors are contiguous host arrays".to_string()
        },
        build: if gpu {
            "nvcc through tvm_ffi.cpp.build (-O2, -gencode for the device's arch), linked with -ltvm_ffi -lcudart."
                .to_string()
        } else {
            "the host C++ compiler through tvm_ffi.cpp.build (-std=c++17 -fPIC -O2) and ninja.".to_string()
        },
        arithmetic: "the compiler's defaults at -O2; outputs are compared with the task's reference within its \
                     tolerance."
            .to_string(),
        timing: if gpu {
            super::gpu_timing(task)
        } else {
            format!(
                "{}. The host clock (perf_counter_ns) spans each single call.",
                super::timed_calls(task)
            )
        },
    }
}
