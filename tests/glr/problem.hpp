// Random glr problems and the calls every glr test makes on them.
//
// Inputs are drawn as the models draw them: k L2-normalised per token and head (what keeps the delta
// rule's transition I - beta k k^T a contraction), beta in (0, 1), g a negative log-decay. Every tensor
// gets fresh random values from a seed each test prints, so a failure can be replayed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "glr/params.hpp"
#include "glr/reference/chunked.hpp"

namespace glr::test {

struct Problem {
  Params p;
  std::uint64_t seed = 0;
  // Dense, in p's contiguous layouts; empty where the problem has no such tensor.
  std::vector<double> q, k, v, g, beta, h0, dout, dht;
};

// p must have contiguous strides (make_params gives them).
Problem random_problem(const Params& p, std::uint64_t seed);

struct Outputs {
  std::vector<double> o, ht;
};
struct Grads {
  std::vector<double> dq, dk, dv, dg, dbeta, dh0;
};

Outputs oracle_forward(const Problem& pr);
Grads oracle_backward(const Problem& pr);
// The chunked algorithm in working type Real; inputs are rounded to Real first, results widened back.
template <class Real>
Outputs chunked_forward(const Problem& pr, reference::ChunkedOptions opt = {});
template <class Real>
Grads chunked_backward(const Problem& pr, reference::ChunkedOptions opt = {});
// The exact recurrence in float (the same-precision reference for the chunked float algorithm).
Outputs recurrent_forward_f32(const Problem& pr);
Grads recurrent_backward_f32(const Problem& pr);

// Normwise relative error ||x - ref||_2 / ||ref||_2 (0 when both are empty; ||x|| when ref is zero).
double rel_err(const std::vector<double>& x, const std::vector<double>& ref);

// A short description for failure messages: member, sizes, seed.
std::string describe(const Problem& pr);

// A fixed seed per test unless GLR_TEST_SEED is set (then that value mixed with `salt`), so every run of
// the suite can draw fresh inputs and still replay a failure from the printed seed.
std::uint64_t test_seed(std::uint64_t salt);

}  // namespace glr::test
