# Correct control: a triangular matmul that relies on the structure the task's get_inputs() guarantees (both
# factors lower-triangular) and skips the zero triangles; must pass every gate. A perturbation that fills a
# zero triangle is labelled out of the domain, never counted; a NaN the dense oracle carries only through a
# structural zero (0 * NaN) is excused, counted in the summary, never "masked" (docs/audit.md).
from . import CANDIDATE_BASE

TASK = "tril_matmul"
EXPECT: set = set()
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self):
        pass

    def forward(self, A, B):
        # C[i, j] sums A[i, k] B[k, j] over k in [j, i] only: elsewhere one factor is a structural zero
        n = A.shape[0]
        C = np.zeros((n, n), np.float32)
        for i in range(n):
            C[i, : i + 1] = A[i, : i + 1] @ B[: i + 1, : i + 1]
        return C
'''
