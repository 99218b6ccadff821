"""torch KernelBench-format tasks for the positive controls on the GPU (the same defects as the numpy set,
plus those only a GPU shows: unwritten outputs, a side stream, TF32, misaligned vector loads)."""

_HEAD = "import torch\nimport torch.nn as nn\n\n\n"

TASKS = {
    "tanh_scale": _HEAD + '''class Model(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return torch.tanh(x) * self.alpha


batch_size = 64
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [2.0]
''',
    "softmax": _HEAD + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 32
dim = 1000


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
''',
    "linear": _HEAD + '''class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.fc(x)


batch_size = 128
in_features = 512
out_features = 256


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
''',
    "rowsum": _HEAD + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=1, keepdim=True)


batch_size = 4
length = 65536


def get_inputs():
    return [torch.rand(batch_size, length)]


def get_init_inputs():
    return []
''',
    "sum_all": _HEAD + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum()


batch_size = 256
length = 4096


def get_inputs():
    return [torch.randn(batch_size, length)]


def get_init_inputs():
    return []
''',
    "softsign": _HEAD + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / (1 + torch.abs(x))


batch_size = 64
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
''',
}

CANDIDATE_HEAD = _HEAD
