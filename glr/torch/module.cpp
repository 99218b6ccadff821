// The Python module glr._C: importing it loads this library, whose static initialisers register the glr
// operators (ops.cpp, cuda_ops.cpp) with PyTorch's dispatcher; they are then torch.ops.glr.*. The module
// itself has no attributes, so no pybind11 is compiled.
#include <Python.h>

static struct PyModuleDef glr_module = {PyModuleDef_HEAD_INIT, "_C",
                                        "glr operators, registered as torch.ops.glr.*", -1, nullptr,
                                        nullptr, nullptr, nullptr, nullptr};

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&glr_module); }
