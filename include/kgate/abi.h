/* kgate/abi.h: the versioned C entry point between kgate and the code it calls.
 *
 * A candidate kernel is a shared library exporting
 *
 *     int32_t kgate_abi_version(void);             returns KGATE_ABI_VERSION it was built against
 *     int32_t kgate_run(const kgate_call* call);   the kernel (destination-passing)
 *
 * and optionally
 *
 *     int32_t kgate_device(void);                  DLDeviceType of the tensors it takes (kDLCPU if absent)
 *
 * A float64 oracle is a shared library exporting kgate_abi_version and
 *
 *     int32_t kgate_oracle(const kgate_call* call);
 *
 * with every tensor in float64 (integer inputs stay integer), contiguous, on kgate_device() (kDLCPU if
 * absent). One library may export both kgate_run and kgate_oracle; the symbol names can be overridden on
 * the command line (lib.so:symbol).
 *
 * Conventions every caller of this ABI keeps:
 * - DLTensor.data points at the first element and byte_offset is always 0. The pointer may be misaligned
 *   (the layout gate offsets it by one element) and strides may be non-contiguous where the contract allows
 *   it; strides are never NULL (counted in elements, as DLPack says).
 * - Outputs are allocated by the caller; the callee writes every element of every output and nothing else.
 * - stream is a cudaStream_t for kDLCUDA (never the legacy default stream unless the caller passes NULL) and
 *   NULL on the CPU. The callee enqueues its work on that stream and returns without synchronising it.
 * - The return value is one of kgate_status. KGATE_REFUSED means "this input is outside what I support"
 *   (a shape, a stride, an alignment) and must leave the outputs alone; the callee may explain why in
 *   call->message (NUL-terminated, at most message_capacity bytes including the NUL).
 * - attrs carries the contract's numeric attributes (scale, chunk size, ...) by name, in contract order.
 */
#ifndef KGATE_ABI_H
#define KGATE_ABI_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any change to kgate_call or to the conventions above. */
#define KGATE_ABI_VERSION 1

/* DLPack 0.8 added kDLBool = 6; Debian ships DLPack 0.6, whose layout is otherwise identical. */
#define KGATE_DL_BOOL 6

#if defined(_WIN32)
#define KGATE_EXPORT __declspec(dllexport)
#else
#define KGATE_EXPORT __attribute__((visibility("default")))
#endif

typedef enum kgate_status {
  KGATE_OK = 0,
  KGATE_REFUSED = 1, /* clean refusal of an unsupported input; outputs untouched */
  KGATE_ERROR = 2    /* the callee failed; message says why */
} kgate_status;

typedef struct kgate_attr {
  const char* name;
  double value;
} kgate_attr;

typedef struct kgate_call {
  int32_t abi_version; /* KGATE_ABI_VERSION of the caller */
  int32_t n_inputs;
  int32_t n_outputs;
  int32_t n_attrs;
  const DLTensor* inputs; /* n_inputs tensors, contract order; the callee must not write through them */
  DLTensor* outputs;      /* n_outputs tensors, contract order */
  const kgate_attr* attrs;
  void* stream;           /* cudaStream_t for kDLCUDA, NULL on the CPU */
  char* message;          /* may be written with a reason for REFUSED or ERROR */
  size_t message_capacity;
} kgate_call;

typedef int32_t (*kgate_abi_version_fn)(void);
typedef int32_t (*kgate_device_fn)(void);
typedef int32_t (*kgate_entry_fn)(const kgate_call* call);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KGATE_ABI_H */
