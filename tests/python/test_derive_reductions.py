"""The derived contract names every dim an output is summed along, including one the output also has (a square
matmul's inner N, a softmax's row): the accumulation gate and the bounds read `reduced`, and the shapes alone
cannot tell a square matmul from an elementwise product."""
import pytest

from kgate.kernelbench import fw_numpy as fw
from kgate.kernelbench.derive import derive

TASK = """
import numpy as np
N = {n}
M = {m}
class Model:
    def __init__(self):
        pass
    def forward(self, A, B):
        {body}
def get_inputs():
    return [np.random.randn(N, M).astype(np.float32), np.random.randn(M, M).astype(np.float32)]
def get_init_inputs():
    return []
"""


def reduced(body, n=48, m=48):
    d = derive(fw, TASK.format(n=n, m=m, body=body), 7)
    return [sorted(o[3]) for o in d.outputs], d.notes


@pytest.mark.parametrize("n,m", [(48, 48), (16, 40)])
def test_a_square_or_rectangular_matmul_reduces_its_inner_dim(n, m):
    assert reduced("return A @ B", n, m)[0] == [["M"]]


def test_an_elementwise_op_reduces_nothing_even_on_square_inputs():
    assert reduced("return A * B[:A.shape[0], :] + 1.0 if A.shape[0] <= B.shape[0] else A")[0] == [[]]


def test_a_softmax_over_rows_reduces_the_row():
    body = "e = np.exp(A - A.max(axis=1, keepdims=True)); return e / e.sum(axis=1, keepdims=True)"
    assert reduced(body)[0] == [["M"]]


def test_a_sum_along_a_dim_the_output_keeps_by_size_is_found():
    # (N, M) summed over M into (N,) with N == M: the output has a dim of the same size, and the old rule
    # (dims absent from the output) named M only because the contract tells N from M.
    assert reduced("return A.sum(axis=1)")[0] == [["M"]]


def test_a_cumulative_sum_is_not_a_reduction_of_its_length():
    assert reduced("return np.cumsum(A, axis=1)")[0] == [[]]


def test_a_model_the_probe_cannot_run_keeps_the_shapes_rule_and_says_so():
    body = "import math\n        if np.isnan(A).any(): raise ValueError('no NaN here')\n        return A @ B"
    out, notes = reduced(body)
    assert out == [[]] and any("NaN probe could not run" in n for n in notes), (out, notes)
