/*===- pipe_runtime.h - the C ABI between generated programs and the runtime -===*
 *
 * pipe-opt lowers every pipeline rank to one C++ translation unit (rankK.cpp)
 * that calls only the functions declared here. The runtime (libpiperun)
 * implements them for a backend (CPU now, CUDA next) and a transport
 * (threads in one process, or MPI). docs/runtime-abi.md is the reference:
 * what each call does, who owns which tensor, and how memory is accounted.
 *
 * Conventions
 *  - Every call takes the rank (`pipe_rank *`) first. A call that cannot do
 *    what it is asked (bad shapes, a peer that never answers, out of memory)
 *    stops every rank with one message naming the rank, the current node and
 *    the reason; it never returns an error code to generated code.
 *  - Tensors are dense, row-major and contiguous. Kernels write into outputs
 *    the caller allocated with the static shape the compiler inferred; they
 *    check that the shapes and dtypes they are given agree.
 *  - Integer lists (shapes, strides, pads, axes, perms) are `pipe_ints`, a
 *    small value type; generated code builds them with PIPE_INTS(...).
 *  - Optional tensor arguments are NULL when absent.
 *===----------------------------------------------------------------------===*/
#ifndef PIPE_RUNTIME_H
#define PIPE_RUNTIME_H

#include <math.h> /* HUGE_VAL, NAN in generated code */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#include <initializer_list>
extern "C" {
#endif

/* Bumped whenever a declaration below changes meaning; a program built for
 * another version is refused at load time. */
#define PIPE_ABI_VERSION 2
#define PIPE_MAX_RANK 8
#define PIPE_MAX_INTS 16 /* pads of a rank-8 tensor: 8 begins, 8 ends */

#if defined(__GNUC__)
#define PIPE_EXPORT __attribute__((visibility("default")))
#else
#define PIPE_EXPORT
#endif

/*===--- Values ----------------------------------------------------------===*/

typedef enum pipe_dtype {
  PIPE_F32 = 1,
  PIPE_F64 = 2,
  PIPE_F16 = 3,  /* reserved: no CPU kernel yet */
  PIPE_BF16 = 4, /* reserved: no CPU kernel yet */
  PIPE_I64 = 5,
  PIPE_I32 = 6,
  PIPE_BOOL = 7 /* one byte per element, 0 or 1 */
} pipe_dtype;

/* What a buffer is for: the memory model's breakdown, category by category. */
typedef enum pipe_mem {
  PIPE_MEM_PARAMETERS = 0, /* weights and buffers (batch-norm statistics) */
  PIPE_MEM_GRADIENTS = 1,  /* accumulated parameter gradients (fp32) */
  PIPE_MEM_OPTIMIZER = 2,  /* momentum / Adam moments, on the owner rank */
  PIPE_MEM_SAVED = 3,      /* activations kept from a forward to its backward */
  PIPE_MEM_COMM = 4,       /* received tensors and send buffers in flight */
  PIPE_MEM_WORKSPACE = 5,  /* transient values inside one forward/backward */
  PIPE_MEM_CONSTANTS = 6,  /* constant tensors materialised at run time */
  PIPE_MEM_CATEGORIES = 7
} pipe_mem;

/* n < 0 marks a list that did not fit; every call refuses it. */
typedef struct pipe_ints {
  int32_t n;
  int64_t v[PIPE_MAX_INTS];
} pipe_ints;

typedef struct pipe_tensor {
  void *data;
  int32_t dtype; /* pipe_dtype */
  int32_t rank;
  int64_t shape[PIPE_MAX_RANK];
  int64_t numel;
  void *storage; /* runtime-private: the (shared, counted) allocation */
} pipe_tensor;

typedef struct pipe_rank pipe_rank; /* opaque: one per rank */

/*===--- Set-up (called from pipe_program_setup) --------------------------===*/

typedef enum pipe_param_source {
  PIPE_SOURCE_FILE = 0,     /* bytes [offset, offset+length) of the model file */
  PIPE_SOURCE_EXTERNAL = 1, /* bytes of `path`, relative to the model's folder */
  PIPE_SOURCE_INLINE = 2    /* no bytes anywhere (a textual model): seeded init */
} pipe_param_source;

/* Parameter `id` (0..N-1, dense over the whole pipeline) lives on this rank.
 * It is loaded at once (PIPE_MEM_PARAMETERS). When `trainable`, a gradient
 * buffer (PIPE_MEM_GRADIENTS) is made too, and, when `owner_rank` is this
 * rank, the optimizer state the configured optimizer needs. */
PIPE_EXPORT void pipe_declare_param(pipe_rank *r, int32_t id, const char *name,
                                    int32_t dtype, pipe_ints shape, int32_t source,
                                    const char *path, int64_t offset, int64_t length,
                                    int32_t trainable, int32_t owner_rank);

/* Node `id` of the model (an ONNX node) for messages and per-node timing. */
PIPE_EXPORT void pipe_declare_node(pipe_rank *r, int32_t id, const char *name);

/* Stage `stage` runs on this rank and keeps `slots` saved values per
 * micro-batch from its forward to its backward. */
PIPE_EXPORT void pipe_declare_stage(pipe_rank *r, int32_t stage, int32_t slots);

typedef enum pipe_optimizer_kind {
  PIPE_SGD = 0,
  PIPE_MOMENTUM = 1, /* SGD with momentum (torch.optim.SGD semantics) */
  PIPE_ADAM = 2,     /* torch.optim.Adam: weight decay added to the gradient */
  PIPE_ADAMW = 3     /* torch.optim.AdamW: decoupled weight decay */
} pipe_optimizer_kind;

/* Call before the first pipe_declare_param (it decides the state size). */
PIPE_EXPORT void pipe_set_optimizer(pipe_rank *r, int32_t kind, double lr, double momentum,
                                    double beta1, double beta2, double eps,
                                    double weight_decay);

/*===--- A training step (called from pipe_program_step) ------------------===*/

/* Zeroes the gradient buffers; starts the step's clock. */
PIPE_EXPORT void pipe_step_begin(pipe_rank *r);
/* Ends the step: checks that every saved slot was consumed and nothing is
 * left in flight; reports the step's loss (rank that computed it). */
PIPE_EXPORT void pipe_step_end(pipe_rank *r);

typedef enum pipe_action_kind {
  PIPE_ACTION_FORWARD = 0,
  PIPE_ACTION_BACKWARD = 1,
  PIPE_ACTION_BACKWARD_INPUT = 2,
  PIPE_ACTION_BACKWARD_WEIGHT = 3,
  PIPE_ACTION_REDUCE = 4,   /* tied-parameter gradient reduction */
  PIPE_ACTION_OPTIMIZER = 5 /* parameter updates */
} pipe_action_kind;

/* Brackets one action of the schedule, for the measured trace and period.
 * `stage` and `microbatch` are -1 for REDUCE and OPTIMIZER. */
PIPE_EXPORT void pipe_action_begin(pipe_rank *r, int32_t kind, int32_t stage,
                                   int32_t microbatch);
PIPE_EXPORT void pipe_action_end(pipe_rank *r);

/* The node whose kernels follow (errors name it; per-node time goes to it). */
PIPE_EXPORT void pipe_node(pipe_rank *r, int32_t node);

/* Data of micro-batch `microbatch` of the current step: model input `index`,
 * label `index`, or the gradient of model output `index` (loss = none).
 * Integer data is drawn in [0, range) when synthetic. Owned by the caller
 * (PIPE_MEM_WORKSPACE). */
PIPE_EXPORT pipe_tensor *pipe_input(pipe_rank *r, int32_t microbatch, int32_t index,
                                    int32_t dtype, pipe_ints shape, int64_t range);
PIPE_EXPORT pipe_tensor *pipe_label(pipe_rank *r, int32_t microbatch, int32_t index,
                                    int32_t dtype, pipe_ints shape, int64_t range);
PIPE_EXPORT pipe_tensor *pipe_output_grad(pipe_rank *r, int32_t microbatch, int32_t index,
                                          int32_t dtype, pipe_ints shape);

/* Parameter `id` and its gradient buffer: borrowed, never freed by the caller. */
PIPE_EXPORT pipe_tensor *pipe_param(pipe_rank *r, int32_t id);
/* Adds `t` into parameter `id`'s gradient buffer (fp32 accumulation). */
PIPE_EXPORT void pipe_accumulate_grad(pipe_rank *r, int32_t id, const pipe_tensor *t);

/* A new tensor of `category`, uninitialised. */
PIPE_EXPORT pipe_tensor *pipe_alloc(pipe_rank *r, int32_t dtype, pipe_ints shape,
                                    int32_t category);
/* A constant: a view of `data` (static storage of the program, not copied). */
PIPE_EXPORT pipe_tensor *pipe_constant(pipe_rank *r, int32_t dtype, pipe_ints shape,
                                       const void *data);
/* A constant filled with one value (PIPE_MEM_CONSTANTS). */
PIPE_EXPORT pipe_tensor *pipe_splat(pipe_rank *r, int32_t dtype, pipe_ints shape,
                                    double value);
/* The same elements under another shape (reshape, flatten, squeeze,
 * unsqueeze): shares the storage; free both. */
PIPE_EXPORT pipe_tensor *pipe_view(pipe_rank *r, pipe_tensor *t, pipe_ints shape);
/* Releases one reference (a view or the tensor itself). NULL is ignored. */
PIPE_EXPORT void pipe_free(pipe_rank *r, pipe_tensor *t);

/* Keeps `t` for the backward of (stage, microbatch) in `slot`; the slot takes
 * the caller's reference and accounts it as PIPE_MEM_SAVED. */
PIPE_EXPORT void pipe_save(pipe_rank *r, int32_t stage, int32_t microbatch, int32_t slot,
                           pipe_tensor *t);
/* Takes the value back out of the slot (the caller frees it); it stays
 * PIPE_MEM_SAVED until freed. */
PIPE_EXPORT pipe_tensor *pipe_restore(pipe_rank *r, int32_t stage, int32_t microbatch,
                                      int32_t slot);

/* Reports the micro-batch loss (a scalar the program already scaled). */
PIPE_EXPORT void pipe_loss(pipe_rank *r, const pipe_tensor *loss);

/*===--- Transfers -------------------------------------------------------===*/

typedef enum pipe_transfer_kind {
  PIPE_TRANSFER_ACTIVATION = 0,
  PIPE_TRANSFER_GRADIENT = 1,
  PIPE_TRANSFER_PARAM_GRAD = 2, /* a tied parameter's gradient, user -> owner */
  PIPE_TRANSFER_PARAM = 3       /* a tied parameter's new value, owner -> user */
} pipe_transfer_kind;

/* Messages match on (from rank, to rank, tag, kind, microbatch). A send never
 * blocks (the bytes are copied or handed to the transport); a receive waits
 * up to the run's timeout, then stops every rank naming both ranks and the tag. */
PIPE_EXPORT void pipe_send(pipe_rank *r, const pipe_tensor *t, int32_t peer, int32_t tag,
                           int32_t kind, int32_t microbatch);
PIPE_EXPORT pipe_tensor *pipe_recv(pipe_rank *r, int32_t peer, int32_t tag, int32_t kind,
                                   int32_t microbatch, int32_t dtype, pipe_ints shape);

/* Tied parameters: a user rank sends its accumulated gradient of `id` to the
 * owner, which adds it into its own; after the update the owner sends the new
 * value back. */
PIPE_EXPORT void pipe_send_param_grad(pipe_rank *r, int32_t id, int32_t owner_rank);
PIPE_EXPORT void pipe_recv_add_param_grad(pipe_rank *r, int32_t id, int32_t user_rank);
PIPE_EXPORT void pipe_send_param(pipe_rank *r, int32_t id, int32_t user_rank);
PIPE_EXPORT void pipe_recv_param(pipe_rank *r, int32_t id, int32_t owner_rank);

/* Data-parallel replicas: makes the gradient of every trainable parameter
 * this rank owns the mean over the run's replicas, so that every replica makes
 * the same update. Once per step, after the last gradient is accumulated (the
 * tied ones included) and before the first pipe_update; with one replica it
 * does nothing. The gradients, end to end in parameter id order, go through
 * one ring all-reduce per bucket of at most the run's bucket size
 * (program.json "all_reduce_bucket_bytes"). Ranks and peers everywhere in this
 * ABI are the pipeline's (pipe_program_rank); the runtime maps them to each
 * replica's own ranks. */
PIPE_EXPORT void pipe_all_reduce_grads(pipe_rank *r);

/* One optimizer step on parameter `id` (owner rank, trainable). With several
 * replicas, this step's pipe_all_reduce_grads must have come first. */
PIPE_EXPORT void pipe_update(pipe_rank *r, int32_t id);

/*===--- Kernels ---------------------------------------------------------===*
 * Outputs are preallocated with their final shape. Broadcasting is numpy's.
 * Every kernel supports PIPE_F32; integer and boolean support is listed. */

typedef enum pipe_unary {
  PIPE_RELU = 0,
  PIPE_ERF = 1,
  PIPE_TANH = 2,
  PIPE_SIGMOID = 3,
  PIPE_SQRT = 4,
  PIPE_EXP = 5,
  PIPE_LOG = 6,
  PIPE_NEG = 7, /* also I64 */
  PIPE_ABS = 8, /* also I64 */
  PIPE_RECIPROCAL = 9,
  PIPE_NOT = 10, /* BOOL only */
  PIPE_FLOOR = 11,
  PIPE_CEIL = 12,
  PIPE_SOFTPLUS = 13,
  PIPE_IDENTITY = 14, /* any dtype */
  PIPE_GELU = 15,      /* 0.5 x (1 + erf(x / sqrt 2)) */
  PIPE_GELU_TANH = 16, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
  PIPE_LEAKY_RELU = 17, /* alpha */
  PIPE_HARD_SIGMOID = 18, /* max(0, min(1, alpha x + beta)) */
  PIPE_HARD_SWISH = 19,
  PIPE_CLIP = 20, /* min(max(x, alpha), beta); alpha/beta = -inf/+inf when absent */
  PIPE_SIN = 21,
  PIPE_COS = 22,
  PIPE_TAN = 23,
  PIPE_ASIN = 24,
  PIPE_ACOS = 25,
  PIPE_ATAN = 26,
  PIPE_SINH = 27,
  PIPE_COSH = 28,
  PIPE_ASINH = 29,
  PIPE_ACOSH = 30,
  PIPE_ATANH = 31,
  PIPE_ROUND = 32, /* halves to even */
  PIPE_SIGN = 33
} pipe_unary;

PIPE_EXPORT void pipe_k_unary(pipe_rank *r, int32_t fn, const pipe_tensor *x, pipe_tensor *y,
                              double alpha, double beta);
/* dx = f'(.) * dy. `saved` is what the gradient rule keeps: the output y for
 * RELU, TANH, SIGMOID, SQRT, EXP, RECIPROCAL; the input x for ERF, LOG, ABS,
 * SOFTPLUS, GELU, GELU_TANH, LEAKY_RELU, HARD_SIGMOID, HARD_SWISH, CLIP, SIN, COS, TAN,
 * ASIN, ACOS, ATAN, SINH, COSH, ASINH, ACOSH, ATANH; NULL for NEG, IDENTITY, FLOOR, CEIL,
 * ROUND and SIGN (the last four give 0). CLIP passes dy where alpha <= x <= beta. */
PIPE_EXPORT void pipe_k_unary_grad(pipe_rank *r, int32_t fn, const pipe_tensor *saved,
                                   const pipe_tensor *dy, pipe_tensor *dx, double alpha,
                                   double beta);

typedef enum pipe_binary {
  PIPE_ADD = 0, /* F32, I64 */
  PIPE_SUB = 1, /* F32, I64 */
  PIPE_MUL = 2, /* F32, I64 */
  PIPE_DIV = 3, /* F32, I64 (truncating) */
  PIPE_POW = 4,
  PIPE_MOD = 5,  /* I64: sign of the divisor (Python's %) */
  PIPE_FMOD = 6, /* F32, I64: sign of the dividend (C's fmod) */
  PIPE_EQUAL = 7, /* -> BOOL; F32, I64, BOOL inputs */
  PIPE_LESS = 8,
  PIPE_LESS_EQUAL = 9,
  PIPE_GREATER = 10,
  PIPE_GREATER_EQUAL = 11,
  PIPE_AND = 12, /* BOOL */
  PIPE_OR = 13,  /* BOOL */
  PIPE_MAX = 14,
  PIPE_MIN = 15
} pipe_binary;

PIPE_EXPORT void pipe_k_binary(pipe_rank *r, int32_t fn, const pipe_tensor *a,
                               const pipe_tensor *b, pipe_tensor *y);
/* y = cond ? x : z, broadcasting all three; cond is BOOL. */
PIPE_EXPORT void pipe_k_where(pipe_rank *r, const pipe_tensor *cond, const pipe_tensor *x,
                              const pipe_tensor *z, pipe_tensor *y);
/* Element type conversion between any two supported dtypes (same shape). */
PIPE_EXPORT void pipe_k_cast(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y);
/* Every element of y set to `value`. */
PIPE_EXPORT void pipe_k_fill(pipe_rank *r, pipe_tensor *y, double value);

/* numpy.matmul, batch dims broadcast, 1-D operands promoted (BLAS sgemm). */
PIPE_EXPORT void pipe_k_matmul(pipe_rank *r, const pipe_tensor *a, const pipe_tensor *b,
                               pipe_tensor *y);
/* y = alpha op(a) op(b) + beta c, a and b 2-D, c broadcast to y (optional). */
PIPE_EXPORT void pipe_k_gemm(pipe_rank *r, const pipe_tensor *a, const pipe_tensor *b,
                             const pipe_tensor *c, pipe_tensor *y, double alpha, double beta,
                             int32_t trans_a, int32_t trans_b);

/* Convolution over 1, 2 or 3 spatial dims, NC... layout, weight
 * [M, C/group, k...]. `pads` is [begin..., end...] (explicit, the compiler
 * resolves auto_pad); strides and dilations have one entry per spatial dim. */
PIPE_EXPORT void pipe_k_conv(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *w,
                             const pipe_tensor *bias, pipe_tensor *y, pipe_ints strides,
                             pipe_ints pads, pipe_ints dilations, int64_t group);
PIPE_EXPORT void pipe_k_conv_grad_input(pipe_rank *r, const pipe_tensor *dy,
                                        const pipe_tensor *w, pipe_tensor *dx,
                                        pipe_ints strides, pipe_ints pads, pipe_ints dilations,
                                        int64_t group);
PIPE_EXPORT void pipe_k_conv_grad_weight(pipe_rank *r, const pipe_tensor *x,
                                         const pipe_tensor *dy, pipe_tensor *dw,
                                         pipe_ints strides, pipe_ints pads,
                                         pipe_ints dilations, int64_t group);

/* Pooling over the spatial dims; the output shape (ceil_mode included) is
 * y's. max_pool writes, when `indices` is given, the I64 flat index of each
 * maximum into x (ONNX MaxPool's Indices, storage_order 0; ties: the first). */
PIPE_EXPORT void pipe_k_max_pool(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y,
                                 pipe_tensor *indices, pipe_ints kernel, pipe_ints strides,
                                 pipe_ints pads, pipe_ints dilations);
/* dx = 0, then dx[indices] += dy. */
PIPE_EXPORT void pipe_k_max_pool_grad(pipe_rank *r, const pipe_tensor *dy,
                                      const pipe_tensor *indices, pipe_tensor *dx);
PIPE_EXPORT void pipe_k_average_pool(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y,
                                     pipe_ints kernel, pipe_ints strides, pipe_ints pads,
                                     int32_t count_include_pad);
PIPE_EXPORT void pipe_k_average_pool_grad(pipe_rank *r, const pipe_tensor *dy,
                                          pipe_tensor *dx, pipe_ints kernel,
                                          pipe_ints strides, pipe_ints pads,
                                          int32_t count_include_pad);

/* Batch norm over dim 1 (N, C, ...). Training: batch statistics; writes the
 * per-channel mean and 1/sqrt(var + eps) (biased var) into saved_mean /
 * saved_invstd [C], and updates running_mean / running_var in place:
 * running = momentum * running + (1 - momentum) * batch (unbiased var), as
 * ONNX's momentum and torch's (1 - momentum) mean. */
PIPE_EXPORT void pipe_k_batch_norm_train(pipe_rank *r, const pipe_tensor *x,
                                         const pipe_tensor *scale, const pipe_tensor *bias,
                                         pipe_tensor *running_mean, pipe_tensor *running_var,
                                         pipe_tensor *y, pipe_tensor *saved_mean,
                                         pipe_tensor *saved_invstd, double epsilon,
                                         double momentum);
PIPE_EXPORT void pipe_k_batch_norm_infer(pipe_rank *r, const pipe_tensor *x,
                                         const pipe_tensor *scale, const pipe_tensor *bias,
                                         const pipe_tensor *mean, const pipe_tensor *var,
                                         pipe_tensor *y, double epsilon);
/* dscale/dbias may be NULL when not needed; so may dx. */
PIPE_EXPORT void pipe_k_batch_norm_grad(pipe_rank *r, const pipe_tensor *x,
                                        const pipe_tensor *scale,
                                        const pipe_tensor *saved_mean,
                                        const pipe_tensor *saved_invstd,
                                        const pipe_tensor *dy, pipe_tensor *dx,
                                        pipe_tensor *dscale, pipe_tensor *dbias);

/* Layer norm over the dims from `axis` (normalised, >= 0). mean / invstd have
 * x's leading dims and 1 for the normalised ones (ONNX's Mean/InvStdDev);
 * optional. scale and bias have the normalised dims' shape. */
PIPE_EXPORT void pipe_k_layer_norm(pipe_rank *r, const pipe_tensor *x,
                                   const pipe_tensor *scale, const pipe_tensor *bias,
                                   pipe_tensor *y, pipe_tensor *mean, pipe_tensor *invstd,
                                   int64_t axis, double epsilon);
PIPE_EXPORT void pipe_k_layer_norm_grad(pipe_rank *r, const pipe_tensor *x,
                                        const pipe_tensor *scale, const pipe_tensor *mean,
                                        const pipe_tensor *invstd, const pipe_tensor *dy,
                                        pipe_tensor *dx, pipe_tensor *dscale,
                                        pipe_tensor *dbias, int64_t axis);

/* Along `axis` (normalised, >= 0). The gradients read the forward's output. */
PIPE_EXPORT void pipe_k_softmax(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y,
                                int64_t axis);
PIPE_EXPORT void pipe_k_log_softmax(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y,
                                    int64_t axis);
PIPE_EXPORT void pipe_k_softmax_grad(pipe_rank *r, const pipe_tensor *y, const pipe_tensor *dy,
                                     pipe_tensor *dx, int64_t axis);
PIPE_EXPORT void pipe_k_log_softmax_grad(pipe_rank *r, const pipe_tensor *y,
                                         const pipe_tensor *dy, pipe_tensor *dx, int64_t axis);

/* Dropout: y = x * mask / (1 - ratio), mask (BOOL, optional) drawn from a
 * counter-based generator keyed by (run seed, step, microbatch, key), so the
 * same key in the same step and micro-batch gives the same mask. */
PIPE_EXPORT void pipe_k_dropout(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y,
                                pipe_tensor *mask, double ratio, int32_t microbatch,
                                int64_t key);

typedef enum pipe_reduce {
  PIPE_REDUCE_SUM = 0,
  PIPE_REDUCE_MEAN = 1,
  PIPE_REDUCE_MAX = 2,
  PIPE_REDUCE_MIN = 3,
  PIPE_REDUCE_PROD = 4
} pipe_reduce;

/* Reduces x over `axes` (normalised, sorted); y has x's element count
 * divided by the reduced dims' (keepdims or not: only the count matters). */
PIPE_EXPORT void pipe_k_reduce(pipe_rank *r, int32_t fn, const pipe_tensor *x,
                               pipe_tensor *y, pipe_ints axes);

/* Data movement (any dtype). */
PIPE_EXPORT void pipe_k_transpose(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y,
                                  pipe_ints perm);
/* y[i] = x[starts + i * steps] per dim (full-rank lists; steps may be < 0). */
PIPE_EXPORT void pipe_k_slice(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y,
                              pipe_ints starts, pipe_ints steps);
/* y[starts + i * steps] = x[i]: the rest of y is left as it is (concat writes
 * each input this way; a slice's gradient fills 0 first). */
PIPE_EXPORT void pipe_k_slice_assign(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y,
                                     pipe_ints starts, pipe_ints steps);
typedef enum pipe_pad_mode {
  PIPE_PAD_CONSTANT = 0,
  PIPE_PAD_REFLECT = 1,
  PIPE_PAD_EDGE = 2,
  PIPE_PAD_WRAP = 3
} pipe_pad_mode;
/* pads: [begin..., end...] for every dim, negative values crop. */
PIPE_EXPORT void pipe_k_pad(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints pads,
                            int32_t mode, double value);
/* ONNX Gather: indices I64 (or I32), negative ones count from the end. */
PIPE_EXPORT void pipe_k_gather(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *indices,
                               pipe_tensor *y, int64_t axis);
/* dx = 0, then dx[.., indices[j], ..] += dy[.., j, ..]. */
PIPE_EXPORT void pipe_k_gather_grad(pipe_rank *r, const pipe_tensor *dy,
                                    const pipe_tensor *indices, pipe_tensor *dx, int64_t axis);
/* Broadcast x to y's shape (Expand) / repeat x along each dim (Tile). */
PIPE_EXPORT void pipe_k_expand(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y);
PIPE_EXPORT void pipe_k_tile(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y);
/* Keep the upper (upper != 0: j - i >= k) or lower (j - i <= k) triangle of
 * the last two dims, zero the rest. */
PIPE_EXPORT void pipe_k_trilu(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, int64_t k,
                              int32_t upper);
/* y[i] = start + i * delta (F32 or I64). */
PIPE_EXPORT void pipe_k_range(pipe_rank *r, pipe_tensor *y, double start, double delta);

/* Losses. Logits [N, C, d...] with classes on dim 1, labels [N, d...] I64;
 * labels equal to ignore_index contribute nothing. loss is a scalar: the mean
 * over the counted entries times `scale`; log_prob (logits' shape) is kept
 * for the gradient. */
PIPE_EXPORT void pipe_k_softmax_cross_entropy(pipe_rank *r, const pipe_tensor *logits,
                                              const pipe_tensor *labels, pipe_tensor *loss,
                                              pipe_tensor *log_prob, int64_t ignore_index,
                                              double scale);
/* dlogits = dloss * scale * (softmax - onehot(labels)) / count. */
PIPE_EXPORT void pipe_k_softmax_cross_entropy_grad(pipe_rank *r, const pipe_tensor *dloss,
                                                   const pipe_tensor *log_prob,
                                                   const pipe_tensor *labels,
                                                   pipe_tensor *dlogits, int64_t ignore_index,
                                                   double scale);

/*===--- Standalone use (tests, tools) -----------------------------------===*/

/* A rank with no program and no transport: kernels, allocation, accounting. */
PIPE_EXPORT pipe_rank *pipe_rank_create_standalone(void);
/* The same on a backend: "cpu", "emulated" (device memory the host cannot
 * touch, docs/runtime-cuda.md) or "cuda" (GPU 0). NULL when it cannot be
 * used, with the reason in why[0 .. why_size) (NUL-terminated). */
PIPE_EXPORT pipe_rank *pipe_rank_create_on(const char *backend, char *why, size_t why_size);
/* Copies all of `t`'s bytes from host memory at `host` / into host memory at
 * `host`, wherever the rank keeps its tensors. */
PIPE_EXPORT void pipe_copy_from_host(pipe_rank *r, pipe_tensor *t, const void *host);
PIPE_EXPORT void pipe_copy_to_host(pipe_rank *r, void *host, const pipe_tensor *t);
PIPE_EXPORT void pipe_rank_destroy(pipe_rank *r);
/* Live and peak bytes of a category so far. */
PIPE_EXPORT int64_t pipe_memory_live(pipe_rank *r, int32_t category);
PIPE_EXPORT int64_t pipe_memory_peak(pipe_rank *r, int32_t category);

/*===--- What a program exports --------------------------------------------===*/
/* rankK.cpp defines (extern "C"):
 *   int  pipe_program_abi_version(void);      returns PIPE_ABI_VERSION
 *   int  pipe_program_rank(void);             the rank it was generated for
 *   void pipe_program_setup(pipe_rank *r);    declarations, parameters loaded
 *   void pipe_program_step(pipe_rank *r);     one training step */
typedef int (*pipe_program_abi_version_fn)(void);
typedef int (*pipe_program_rank_fn)(void);
typedef void (*pipe_program_setup_fn)(pipe_rank *r);
typedef void (*pipe_program_step_fn)(pipe_rank *r);

#ifdef __cplusplus
} /* extern "C" */

/* PIPE_INTS(a, b, ...) builds a pipe_ints in generated C++. */
inline pipe_ints pipe_ints_of(std::initializer_list<int64_t> values) {
  pipe_ints list{};
  if (values.size() > PIPE_MAX_INTS) {
    list.n = -1;
    return list;
  }
  for (int64_t value : values)
    list.v[list.n++] = value;
  return list;
}
#define PIPE_INTS(...) pipe_ints_of({__VA_ARGS__})
#endif

#endif /* PIPE_RUNTIME_H */
