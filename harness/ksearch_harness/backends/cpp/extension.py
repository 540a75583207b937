"""Builds one extension module the way FlashInfer-Bench builds it; run by build.py as a child
process (`python extension.py ARGS.json`), so the compiler runs under build.py's timeout and
log, never in the harness's own process. Imports only tvm_ffi or torch, not the harness.

ARGS.json: binding ("tvm-ffi" or "torch"), name (the module's), build_dir (the sources are in
it; it is also an include path), sources (their paths), cuda (bool), ldflags (extra linker
flags), out (a JSON file this writes: {"library": the built .so}).
"""

import json
import os
import sys


def main(path):
    with open(path, encoding="utf-8") as f:
        args = json.load(f)
    build_dir, sources = args["build_dir"], args["sources"]
    if args["binding"] == "tvm-ffi":
        import tvm_ffi.cpp

        cpp = [s for s in sources if s.endswith((".cpp", ".cc", ".cxx", ".c"))]
        cu = [s for s in sources if s.endswith(".cu")]
        library = tvm_ffi.cpp.build(name=args["name"], cpp_files=cpp, cuda_files=cu,
                                    extra_include_paths=[build_dir],
                                    extra_ldflags=args["ldflags"] or None,
                                    build_directory=build_dir)
    else:
        import torch.utils.cpp_extension as ext

        ext.load(name=args["name"], sources=sources, extra_include_paths=[build_dir],
                 extra_ldflags=args["ldflags"] or None, build_directory=build_dir,
                 with_cuda=bool(args["cuda"]), verbose=True)
        library = os.path.join(build_dir, args["name"] + ".so")
    with open(args["out"], "w", encoding="utf-8") as f:
        json.dump({"library": str(library)}, f)


if __name__ == "__main__":
    main(sys.argv[1])
