"""Backends cpp and cuda_binding's build (backends/cpp/build.py): a missing toolchain is a
SetupError naming what to install, the cache key follows the sources, and, where tvm_ffi and
ninja are installed, a C++ module is built, cached and called destination-passing and
returning. KSEARCH_REQUIRE_TVM_FFI=1 makes a missing tvm_ffi a failure instead of a skip."""

import importlib.util
import os
import tempfile
import unittest
from unittest import mock

from ksearch_harness.backends.cpp import build
from ksearch_harness.backends.common import sources
from ksearch_harness.errors import SetupError

DPS = """#include <cstdint>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
void twice(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  const float* a = static_cast<const float*>(x.data_ptr());
  float* b = static_cast<float*>(y.data_ptr());
  for (int64_t i = 0; i < x.shape()[0]; ++i) b[i] = 2 * a[i];
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(twice, twice);
"""


def candidate(content, cache):
    return {"language": "cpp", "binding": "tvm-ffi", "entry_point": "k.cc::twice",
            "sources": [{"path": "k.cc", "content": content}], "build": {"cache_dir": cache}}


class Toolchain(unittest.TestCase):
    def test_a_missing_tvm_ffi_torch_or_ninja_names_what_to_install(self):
        with mock.patch.object(importlib.util, "find_spec", return_value=None):
            with self.assertRaises(SetupError) as e:
                build.toolchain("tvm-ffi", False, "cpp")
            self.assertIn("pip install apache-tvm-ffi ninja", e.exception.message)
            with self.assertRaises(SetupError) as e:
                build.toolchain("torch", False, "cpp")
            self.assertIn("cannot import torch", e.exception.message)
        with mock.patch.object(importlib.util, "find_spec", return_value=object()), \
                mock.patch.object(build, "_ninja", return_value=None):
            with self.assertRaises(SetupError) as e:
                build.toolchain("tvm-ffi", False, "cpp")
            self.assertIn("pip install ninja", e.exception.message)

    def test_the_cache_key_follows_the_sources_and_the_binding(self):
        checked = sources.check(candidate(DPS, None), "cpp", build.CPP_FILES, "C++ source")
        other = sources.check(candidate(DPS + "\n", None), "cpp", build.CPP_FILES, "C++ source")
        key = build.cache_key("cpp", checked, "tvm-ffi", True, None, {})
        self.assertEqual(key, build.cache_key("cpp", checked, "tvm-ffi", True, None, {}))
        self.assertNotEqual(key, build.cache_key("cpp", other, "tvm-ffi", True, None, {}))
        self.assertNotEqual(key, build.cache_key("cpp", checked, "torch", True, None, {}))
        self.assertNotEqual(key, build.cache_key("cpp", checked, "tvm-ffi", False, None, {}))


@unittest.skipIf(importlib.util.find_spec("tvm_ffi") is None
                 and os.environ.get("KSEARCH_REQUIRE_TVM_FFI") != "1",
                 "tvm_ffi is not installed (pip install apache-tvm-ffi ninja)")
class Built(unittest.TestCase):
    def test_a_module_is_built_cached_and_called(self):
        import numpy as np
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as work:
            limits = {"compile_timeout_s": 120}
            first, built, _ = build.compile_module(candidate(DPS, cache), work, limits, "cpp", "cpp")
            self.assertTrue(first["ok"], first["log"])
            self.assertFalse(first["cached"])
            again, built, tools = build.compile_module(candidate(DPS, cache), work, limits, "cpp", "cpp")
            self.assertTrue(again["cached"])
            self.assertIn("apache-tvm-ffi", tools)
            function, error = build.load(built)
            self.assertIsNone(error)
            x, y = np.arange(4, dtype=np.float32), np.zeros(4, dtype=np.float32)
            function(x, y)
            np.testing.assert_array_equal(y, 2 * x)
            bad, _, _ = build.compile_module(candidate(DPS.replace("b[i]", "c[i]"), cache), work,
                                          limits, "cpp", "cpp")
            self.assertFalse(bad["ok"])
            self.assertIn("was not declared", bad["log"])


if __name__ == "__main__":
    unittest.main()
