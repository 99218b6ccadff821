// glr/cuda/common/stages/stage.hpp: what every stage has. A stage is a struct with
//
//     static constexpr int kThreads;           threads per block
//     static constexpr const char* kName;      for error messages and the stage table of the tests
//     using Args = ...;                        the kernel's one argument (plain data)
//     static std::size_t smem_bytes();         dynamic shared memory per block
//     template <class Blk> GLR_HD static void run(const Args&, BlockIdx, char* smem, Blk&);
//
// run() is the block program (see block.hpp); the grid is chosen by the pipeline (pipeline.hpp).
#pragma once

#include "../block.hpp"
#include "../problem.hpp"

namespace glr::cuda {

template <class Acc>
struct StageArgs {
  Problem p;
  Work<Acc> w;
};

// Split a flat index over a (rows, cols) tile: the shape comments below say (rows, cols).
struct RC {
  int r, c;
};
GLR_HD GLR_INLINE RC split(int e, int cols) { return {e / cols, e % cols}; }

}  // namespace glr::cuda
