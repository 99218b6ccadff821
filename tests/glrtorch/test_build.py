"""glr._C links the shared C++ runtime, as torch does. Built with a private static libstdc++ (the default of
the GPU machine's compiler, CXX=/opt/gcc/bin/g++), the first TORCH_CHECK message that formatted an integer
crashed the process under PyTorch 2.11 (python/glr/setup.py says how the build prevents it)."""
import shutil
import subprocess

import pytest

import glr


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs readelf (binutils)")
def test_the_extension_needs_the_shared_cpp_runtime():
    dyn = subprocess.run(["readelf", "-d", glr._C.__file__], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[")[1].rstrip("]") for line in dyn.splitlines() if "(NEEDED)" in line]
    assert "libstdc++.so.6" in needed, needed
