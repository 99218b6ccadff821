"""Each member's layer computes the same through glr's op and through the reference recurrence (same
weights), forward and backward, including GVA-free and multi-head widths."""
import pytest
import torch

import glr
from glr.layers import LanguageModel
from conftest import rel


@pytest.mark.parametrize("member", sorted(glr.MEMBERS))
def test_model_glr_equals_reference(member):
    torch.manual_seed(0)
    a = LanguageModel(member, vocab=40, d_model=32, n_layers=2, head_dim=16, impl="glr")
    torch.manual_seed(0)
    b = LanguageModel(member, vocab=40, d_model=32, n_layers=2, head_dim=16, impl="reference")
    sd_a, sd_b = a.state_dict(), b.state_dict()
    assert sd_a.keys() == sd_b.keys() and all(torch.equal(sd_a[k], sd_b[k]) for k in sd_a)  # same init
    x = torch.randint(0, 40, (2, 70))
    la, lb = a(x), b(x)
    assert rel(la, lb) < 1e-5
    la.square().mean().backward()
    lb.square().mean().backward()
    for (n, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert pa.grad is not None, n
        assert rel(pa.grad, pb.grad) < 1e-4, n


def test_unknown_member_and_width():
    with pytest.raises(ValueError, match="unknown member"):
        LanguageModel("lstm", 10, 32, 1, 16)
    with pytest.raises(ValueError, match="multiple of head_dim"):
        LanguageModel("gdn", 10, 40, 1, 16)
