// mlp2, rank 0 (stage 0): fc1 = Gemm(x, fc1.weight^T, fc1.bias), then Relu; the
// activation goes to rank 1. Hand-written exactly as pipe-opt generates rank
// programs (docs/runtime-abi.md, "A rank program"); 1F1B over 4 micro-batches.
#include "pipe_runtime.h"

namespace {

void stage0_forward(pipe_rank *r, int32_t mb) {
  pipe_tensor *x = pipe_input(r, mb, 0, PIPE_F32, PIPE_INTS(2, 8), 0);
  pipe_node(r, 0);
  pipe_tensor *h = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 16), PIPE_MEM_WORKSPACE);
  pipe_k_gemm(r, x, pipe_param(r, 0), pipe_param(r, 1), h, 1.0, 1.0, 0, 1);
  pipe_node(r, 1);
  pipe_tensor *a = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 16), PIPE_MEM_WORKSPACE);
  pipe_k_unary(r, PIPE_RELU, h, a, 0.0, 0.0);
  pipe_free(r, h);
  pipe_send(r, a, 1, 0, PIPE_TRANSFER_ACTIVATION, mb);
  pipe_save(r, 0, mb, 0, x);
  pipe_save(r, 0, mb, 1, a);
}

void stage0_backward(pipe_rank *r, int32_t mb) {
  pipe_tensor *x = pipe_restore(r, 0, mb, 0);
  pipe_tensor *a = pipe_restore(r, 0, mb, 1);
  pipe_tensor *da = pipe_recv(r, 1, 0, PIPE_TRANSFER_GRADIENT, mb, PIPE_F32, PIPE_INTS(2, 16));
  pipe_node(r, 1);
  pipe_tensor *dh = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 16), PIPE_MEM_WORKSPACE);
  pipe_k_unary_grad(r, PIPE_RELU, a, da, dh, 0.0, 0.0);
  pipe_free(r, da);
  pipe_free(r, a);
  pipe_node(r, 0);
  pipe_tensor *dw = pipe_alloc(r, PIPE_F32, PIPE_INTS(16, 8), PIPE_MEM_WORKSPACE);
  pipe_k_gemm(r, dh, x, nullptr, dw, 1.0, 0.0, 1, 0);
  pipe_accumulate_grad(r, 0, dw);
  pipe_free(r, dw);
  pipe_tensor *db = pipe_alloc(r, PIPE_F32, PIPE_INTS(16), PIPE_MEM_WORKSPACE);
  pipe_k_reduce(r, PIPE_REDUCE_SUM, dh, db, PIPE_INTS(0));
  pipe_accumulate_grad(r, 1, db);
  pipe_free(r, db);
  pipe_free(r, dh);
  pipe_free(r, x);
}

} // namespace

extern "C" int pipe_program_abi_version(void) { return PIPE_ABI_VERSION; }
extern "C" int pipe_program_rank(void) { return 0; }

extern "C" void pipe_program_setup(pipe_rank *r) {
  pipe_set_optimizer(r, PIPE_ADAM, 0.01, 0.0, 0.9, 0.999, 1e-08, 0.01);
  pipe_declare_stage(r, 0, 2);
  pipe_declare_node(r, 0, "fc1");
  pipe_declare_node(r, 1, "relu1");
  pipe_declare_param(r, 0, "fc1.weight", PIPE_F32, PIPE_INTS(16, 8), PIPE_SOURCE_FILE, nullptr,
                     0, 512, 1, 0);
  pipe_declare_param(r, 1, "fc1.bias", PIPE_F32, PIPE_INTS(16), PIPE_SOURCE_FILE, nullptr, 512,
                     64, 1, 0);
}

extern "C" void pipe_program_step(pipe_rank *r) {
  pipe_step_begin(r);
  pipe_action_begin(r, PIPE_ACTION_FORWARD, 0, 0);  stage0_forward(r, 0);  pipe_action_end(r);
  pipe_action_begin(r, PIPE_ACTION_FORWARD, 0, 1);  stage0_forward(r, 1);  pipe_action_end(r);
  pipe_action_begin(r, PIPE_ACTION_BACKWARD, 0, 0); stage0_backward(r, 0); pipe_action_end(r);
  pipe_action_begin(r, PIPE_ACTION_FORWARD, 0, 2);  stage0_forward(r, 2);  pipe_action_end(r);
  pipe_action_begin(r, PIPE_ACTION_BACKWARD, 0, 1); stage0_backward(r, 1); pipe_action_end(r);
  pipe_action_begin(r, PIPE_ACTION_FORWARD, 0, 3);  stage0_forward(r, 3);  pipe_action_end(r);
  pipe_action_begin(r, PIPE_ACTION_BACKWARD, 0, 2); stage0_backward(r, 2); pipe_action_end(r);
  pipe_action_begin(r, PIPE_ACTION_BACKWARD, 0, 3); stage0_backward(r, 3); pipe_action_end(r);
  pipe_action_begin(r, PIPE_ACTION_OPTIMIZER, -1, -1);
  pipe_all_reduce_grads(r);
  pipe_update(r, 0);
  pipe_update(r, 1);
  pipe_action_end(r);
  pipe_step_end(r);
}
