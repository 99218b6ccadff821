"""Builds glr._C, the glr operators for PyTorch, from the C++ sources in the repository (glr/torch, the
chunked CPU algorithm and float64 oracle in glr/reference, and with CUDA the kernels in glr/cuda).

CUDA is built when the installed torch has CUDA and nvcc is found (CUDA_HOME), or when GLR_CUDA=1;
GLR_CUDA=0 forces the CPU-only build. The kernels are compiled for sm_90a (Hopper), or the architecture
GLR_CUDA_ARCH names ("90a"); an explicit -gencode also keeps torch from adding its own arch list (older torch
knows no "9.0a"). MAX_JOBS limits the parallel compile jobs (ninja). GLR_NVCC_FLAGS adds nvcc flags (split as a
shell would: "-lineinfo" for bench/glr/ncu_source.sh's source-level profile); a build with them keeps its objects
in build-nvcc-flags/, so the plain build's objects in build/ are not recompiled for it, nor it for them.
"""
import os
import shlex
import sys

from setuptools import setup
from torch.utils import cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def repo(*parts):
    return os.path.join(ROOT, *parts)


# csrc is a link committed to git; a copy of the tree that dropped it gets it back here.
if not os.path.isdir(os.path.join(HERE, "csrc")):
    if os.path.lexists(os.path.join(HERE, "csrc")):
        os.remove(os.path.join(HERE, "csrc"))
    os.symlink(os.path.join("..", "..", "glr"), os.path.join(HERE, "csrc"))


def src(*parts):
    # Sources relative to this folder, through the csrc -> ../../glr link: setuptools refuses absolute source
    # paths, and a "../.." path would put the object files outside build/.
    return os.path.join("csrc", *parts)


def want_cuda():
    flag = os.environ.get("GLR_CUDA")
    if flag is not None:
        return flag == "1"
    import torch

    return torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None


CPU_SOURCES = [src("torch", f) for f in ("module.cpp", "ops.cpp", "problem.cpp")] + [
    src("reference", f)
    for f in ("params.cpp", "chunks.cpp", "recurrent.cpp", "chunked_forward.cpp", "chunked_backward.cpp",
              "chunked.cpp")
]
CUDA_SOURCES = [
    src("torch", "cuda_ops.cpp"),
    src("cuda", "common", "setup.cpp"),
    src("cuda", "blocks", "api.cpp"),
    src("cuda", "blocks", "forward.cu"),
    src("cuda", "blocks", "backward.cu"),
    src("cuda", "sm90", "forward.cu"),  # the tensor-core forward api.cpp dispatches to on sm_90
    src("cuda", "sm90", "backward.cu"),  # and the tensor-core backward
]

cxx = ["-O2", "-std=c++20", "-fvisibility=hidden"]
# The shared C++ runtime, as torch itself uses: the GPU machine's compiler (CXX=/opt/gcc/bin/g++ there)
# links libstdc++ statically by default, and the module's private copy left its locale facets unset, so the
# first TORCH_CHECK message that formatted an integer crashed (SIGSEGV in std::ostream::_M_insert<long>,
# under PyTorch 2.11 on the H200). Named explicitly, the shared library resolves every runtime symbol before
# the compiler's static flags apply.
link = ["-l:libstdc++.so.6"] if sys.platform.startswith("linux") else []
include_dirs = [repo("glr", "include"), repo("glr", "torch")]
extra_nvcc = shlex.split(os.environ.get("GLR_NVCC_FLAGS", ""))
if want_cuda():
    arch = os.environ.get("GLR_CUDA_ARCH", "90a")
    ext = cpp_extension.CUDAExtension(
        name="glr._C",
        sources=CPU_SOURCES + CUDA_SOURCES,
        include_dirs=include_dirs + [repo("glr", "cuda"), repo("glr", "cuda", "common")],
        define_macros=[("GLR_TORCH_CUDA", "1")],
        extra_compile_args={
            "cxx": cxx,
            # torch adds -D__CUDA_NO_HALF_OPERATORS__ and friends; glr's kernels convert through intrinsics
            # only, so they are left as torch sets them.
            "nvcc": ["-O3", "-std=c++20", "--expt-relaxed-constexpr", f"-gencode=arch=compute_{arch},code=sm_{arch}"]
            + extra_nvcc,
        },
        extra_link_args=link,
    )
else:
    ext = cpp_extension.CppExtension(name="glr._C", sources=CPU_SOURCES, include_dirs=include_dirs,
                                     extra_compile_args={"cxx": cxx}, extra_link_args=link)

setup(ext_modules=[ext], cmdclass={"build_ext": cpp_extension.BuildExtension},
      options={"build": {"build_base": "build-nvcc-flags"}} if extra_nvcc else {})
