"""The CUDA bodies of the MLX tasks' seeds compile for the H200 (sm_90a) inside the kernel that MLX
generates around them, without MLX or a GPU.

MLX's CUDA backend (mlx/backend/cuda/custom_kernel.cpp, MLX 0.32) compiles with NVRTC: its
device header, the candidate's header, then in namespace mlx::core::cu a `__global__` function
whose parameters are the inputs as `const T*` (plus NAME_shape / NAME_strides / NAME_ndim where
the body names them) and the outputs as `T*`, with the template arguments as `constexpr` /
`using` lines above the body. This test writes the same translation unit, with a stand-in for
MLX's device header (the CUDA half and bfloat16 headers, cuda::std, cooperative groups), and
compiles it with nvcc. nvcc also knows host-side C++ that NVRTC lacks, so this finds type and
syntax errors in a body, not every NVRTC refusal; the GPU run is the final word. Skipped without
nvcc (pip install nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-cccl provides one), unless
KSEARCH_REQUIRE_NVCC=1, as for crates/spec/tests/cuda_seeds_compile.rs.
"""

import json
import os
import subprocess
import tempfile
import unittest

from ksearch_harness.backends.common import sources
from ksearch_harness.backends.cuda import nvcc
from ksearch_harness.backends.mlx import spec as mlx_spec
from ksearch_harness.definition import Spec

TASKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "tasks")
CUDA_TYPES = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16",
              "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
              "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
              "uint64": "uint64_t", "bool": "bool"}
DEVICE_HEADER = """#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/std/array>
#include <cuda/std/limits>
namespace mlx::core::cu {
using Shape = cuda::std::array<int32_t, 8>;
using Strides = cuda::std::array<int64_t, 8>;
}
"""


def translation_unit(spec, launch, definition):
    dtypes = {t.name: t.dtype_name for t in definition.inputs}
    scalar = {t.name: t.is_scalar for t in definition.inputs}
    params = []
    for name in spec.inputs:
        params.append(f"    const {CUDA_TYPES[dtypes[name]]}* {name}")
        if not scalar[name]:
            for suffix, kind in (("shape", "Shape"), ("strides", "Strides"), ("ndim", "int")):
                if f"{name}_{suffix}" in spec.source:
                    params.append(f"    const __grid_constant__ {kind} {name}_{suffix}")
    for o in spec.outputs:
        params.append(f"    {CUDA_TYPES[o.dtype]}* {o.name}")
    constants = []
    for name, kind, value in launch.template:
        if kind == "dtype":
            constants.append(f"  using {name} = {CUDA_TYPES[value]};")
        else:
            constants.append(f"  constexpr {'bool' if kind == 'bool' else 'int'} {name} = "
                             f"{str(value).lower() if kind == 'bool' else value};")
    return ('#include "mlx/backend/cuda/device/utils.cuh"\n\n#include <cooperative_groups.h>\n\n'
            "#define inf cuda::std::numeric_limits<float>::infinity()\n\n"
            + spec.header + "\nnamespace mlx::core::cu {\n\nnamespace cg = cooperative_groups;\n\n"
            + f"__global__ void custom_kernel_{spec.kernel_name}(\n" + ",\n".join(params)
            + ") {\n" + "\n".join(constants) + "\n\n" + spec.source
            + "\n}\n\n} // namespace mlx::core::cu\n")


class SeedsCompile(unittest.TestCase):
    def test_the_cuda_bodies_of_the_mlx_seeds_compile(self):
        compiler = nvcc.find()
        if not compiler:
            if os.environ.get("KSEARCH_REQUIRE_NVCC") == "1":
                self.fail("nvcc not found and KSEARCH_REQUIRE_NVCC=1")
            self.skipTest("nvcc not found")
        cccl = os.path.join(os.path.dirname(os.path.dirname(compiler)), "include", "cccl")
        tasks = sorted(t for t in os.listdir(TASKS) if t.startswith("mlx_"))
        self.assertEqual(tasks, ["mlx_attention", "mlx_mamba_scan", "mlx_mamba_step"])
        with tempfile.TemporaryDirectory() as tmp:
            header_dir = os.path.join(tmp, "include", "mlx", "backend", "cuda", "device")
            os.makedirs(header_dir)
            with open(os.path.join(header_dir, "utils.cuh"), "w") as f:
                f.write(DEVICE_HEADER)
            for task in tasks:
                folder = os.path.join(TASKS, task)
                with open(os.path.join(folder, "definition.json")) as f:
                    definition = Spec(json.load(f))
                with open(os.path.join(folder, "seed.toml")) as f:
                    seed = f.read()
                with open(os.path.join(folder, "workloads.jsonl")) as f:
                    workload = json.loads(f.readline())
                checked = sources.check(
                    {"language": "mlx", "sources": [{"path": "seed.toml", "content": seed}],
                     "entry_point": f"seed.toml::{task}"}, "mlx", (".toml",), "launch spec")
                spec = mlx_spec.parse(checked, definition, "cuda")
                launch = spec.launch(definition.axes_for(workload, 0))
                path = os.path.join(tmp, f"{task}.cu")
                with open(path, "w") as f:
                    f.write(translation_unit(spec, launch, definition))
                command = [compiler, "-std=c++17", "-arch=sm_90a", "-c", "-Xptxas", "-v",
                           "-I", os.path.join(tmp, "include"), "-o", path + ".o", path]
                if os.path.isdir(cccl):
                    command[1:1] = ["-I", cccl]
                done = subprocess.run(command, capture_output=True, text=True, timeout=600)
                self.assertEqual(done.returncode, 0, f"{task}:\n{done.stdout}{done.stderr}")
                # ptxas reports the kernel: it was compiled to machine code, not just parsed.
                self.assertIn(f"custom_kernel_{spec.kernel_name}", done.stdout + done.stderr)


if __name__ == "__main__":
    unittest.main()
