"""numpy KernelBench-format tasks for the positive controls and the CPU tests (no torch needed). Each task is
the source a corpus row's ref_code would hold; each control in this folder pairs one with a candidate."""

_BASE = '''import numpy as np


class Model:
    def __call__(self, *xs):
        return self.forward(*xs)

    def eval(self):
        return self
'''

TASKS = {
    "tanh_scale": _BASE + '''
    def __init__(self, alpha):
        self.alpha = alpha

    def forward(self, x):
        return np.tanh(x) * self.alpha


batch_size = 16
dim = 64


def get_inputs():
    return [np.random.randn(batch_size, dim).astype(np.float32)]


def get_init_inputs():
    return [2.0]
''',
    "softmax": _BASE + '''
    def __init__(self):
        pass

    def forward(self, x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


batch_size = 8
dim = 100


def get_inputs():
    return [np.random.randn(batch_size, dim).astype(np.float32)]


def get_init_inputs():
    return []
''',
    "linear": _BASE + '''
    def __init__(self, in_features, out_features):
        self.weight = (np.random.randn(out_features, in_features) / np.sqrt(in_features)).astype(np.float32)

    def forward(self, x):
        return x @ self.weight.T


batch_size = 8
in_features = 96
out_features = 48


def get_inputs():
    return [np.random.randn(batch_size, in_features).astype(np.float32)]


def get_init_inputs():
    return [in_features, out_features]
''',
    "rowsum": _BASE + '''
    def __init__(self):
        pass

    def forward(self, x):
        return x.sum(axis=1, keepdims=True)


batch_size = 4
length = 65536


def get_inputs():
    return [np.random.rand(batch_size, length).astype(np.float32)]


def get_init_inputs():
    return []
''',
    "sum_all": _BASE + '''
    def __init__(self):
        pass

    def forward(self, x):
        return np.asarray(x.sum(dtype=np.float32), dtype=np.float32)


batch_size = 256
length = 4096


def get_inputs():
    return [np.random.randn(batch_size, length).astype(np.float32)]


def get_init_inputs():
    return []
''',
    "softsign": _BASE + '''
    def __init__(self):
        pass

    def forward(self, x):
        return x / (1 + np.abs(x))


batch_size = 16
dim = 256


def get_inputs():
    return [np.random.randn(batch_size, dim).astype(np.float32)]


def get_init_inputs():
    return []
''',
    # Both factors lower-triangular in every draw (KernelBench's triangular matmul tasks): structure the gates
    # must keep, or label the finding out of the domain.
    "tril_matmul": _BASE + '''
    def __init__(self):
        pass

    def forward(self, A, B):
        return np.tril(A @ B)


N = 48


def get_inputs():
    return [np.tril(np.random.randn(N, N)).astype(np.float32), np.tril(np.random.randn(N, N)).astype(np.float32)]


def get_init_inputs():
    return []
''',
}

CANDIDATE_BASE = '''import numpy as np


class ModelNew:
    def __call__(self, *xs):
        return self.forward(*xs)

    def eval(self):
        return self
'''
