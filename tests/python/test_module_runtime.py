"""kgate._core links the shared C++ runtime. A module with its own static copy of libstdc++ beside torch's
shared one crashed on the GPU machine, whose compiler (CXX=/opt/gcc/bin/g++) links libstdc++ statically by
default (python/CMakeLists.txt says how the build prevents it)."""
import shutil
import subprocess

import pytest

from kgate import _core


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs readelf (binutils)")
def test_the_module_needs_the_shared_cpp_runtime():
    dyn = subprocess.run(["readelf", "-d", _core.__file__], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[")[1].rstrip("]") for line in dyn.splitlines() if "(NEEDED)" in line]
    assert "libstdc++.so.6" in needed, needed
