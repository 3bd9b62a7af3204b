//===- Tensor.h - how the runtime makes and checks pipe_tensors -----*- C++ -*-===//
//
// Every pipe_tensor the runtime hands out is the head of a TensorBox: the box
// says whether the program may free it (parameters are borrowed) and which node
// made it. The rank keeps the set of its live tensors, which catches a freed or
// foreign pointer with a clear message and lets teardown free what is left.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_TENSOR_H
#define PIPE_RUNTIME_TENSOR_H

#include "Storage.h"
#include "pipe_runtime.h"

#include <string>
#include <vector>

namespace piperun {

struct TensorBox {
  pipe_tensor tensor; ///< first: a pipe_tensor * is a TensorBox *
  bool borrowed;      ///< a parameter or optimizer buffer: never pipe_free'd
  bool inSlot;        ///< handed to pipe_save, not yet restored
  int32_t node;       ///< the node running when it was made (-1: none)
};

/// Checks a pipe_ints shape (0..PIPE_MAX_RANK dims, none negative) and returns
/// its element count; `what` names the call in the message.
int64_t checkedNumel(pipe_rank *r, const pipe_ints &shape, const char *what);
/// A new tensor over a new storage of `category`.
pipe_tensor *newTensor(pipe_rank *r, int32_t dtype, const pipe_ints &shape, int32_t category,
                       const char *what);
/// A new tensor (one more reference) over an existing storage.
pipe_tensor *tensorOver(pipe_rank *r, Storage *storage, void *data, int32_t dtype,
                        const pipe_ints &shape, int64_t numel);
/// The box of a tensor the runtime made; fails on anything else.
TensorBox *boxOf(pipe_rank *r, const pipe_tensor *t, const char *what);
/// A live tensor of workspace, received or (restored, unfreed) saved bytes, for
/// the end-of-step check.
const TensorBox *anyTransientTensor(pipe_rank *r);
/// Releases a tensor, borrowed or not (the rank's own teardown).
void destroyTensor(pipe_rank *r, pipe_tensor *t);
int64_t tensorBytes(pipe_rank *r, const pipe_tensor *t);
/// "parameters", "workspace", ... (pipe_mem order).
const char *categoryName(int32_t category);
/// Stops the rank: `bytes` of `category` for `tensor` did not fit; names the
/// device (or host), the stage running, and what the rank holds per category.
[[noreturn]] void failOutOfMemory(pipe_rank *r, const char *what, int64_t bytes,
                                  int32_t category, const std::string &tensor);
pipe_ints shapeOf(const pipe_tensor *t);
std::vector<int64_t> shapeVector(const pipe_tensor *t);
/// "[2, 16]".
std::string shapeText(const pipe_ints &shape);
/// "f32 [2, 16]".
std::string describe(const pipe_tensor *t);
std::string describe(int32_t dtype, const pipe_ints &shape);

} // namespace piperun

#endif // PIPE_RUNTIME_TENSOR_H
