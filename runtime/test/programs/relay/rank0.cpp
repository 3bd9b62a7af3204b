// relay, rank 0 (stage 0): h = x * w elementwise, sent to rank 1. A hand-written
// rank program in the shape pipe-opt generates (docs/runtime-abi.md), with no kernels.
#include "pipe_runtime.h"

namespace {

void stage0_forward(pipe_rank *r, int mb) {
  pipe_node(r, 0);
  pipe_tensor *x = pipe_input(r, mb, 0, PIPE_F32, PIPE_INTS(2, 3), 0);
  pipe_tensor *w = pipe_param(r, 0);
  pipe_tensor *h = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 3), PIPE_MEM_WORKSPACE);
  for (int i = 0; i < 6; ++i)
    static_cast<float *>(h->data)[i] =
        static_cast<float *>(x->data)[i] * static_cast<float *>(w->data)[i];
  pipe_send(r, h, 1, 0, PIPE_TRANSFER_ACTIVATION, mb);
  pipe_free(r, h);
  pipe_save(r, 0, mb, 0, x);
}

void stage0_backward(pipe_rank *r, int mb) {
  pipe_node(r, 0);
  pipe_tensor *x = pipe_restore(r, 0, mb, 0);
  pipe_tensor *dh = pipe_recv(r, 1, 0, PIPE_TRANSFER_GRADIENT, mb, PIPE_F32, PIPE_INTS(2, 3));
  pipe_tensor *dw = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 3), PIPE_MEM_WORKSPACE);
  for (int i = 0; i < 6; ++i)
    static_cast<float *>(dw->data)[i] =
        static_cast<float *>(x->data)[i] * static_cast<float *>(dh->data)[i];
  pipe_accumulate_grad(r, 0, dw);
  pipe_free(r, dw);
  pipe_free(r, dh);
  pipe_free(r, x);
}

} // namespace

extern "C" int pipe_program_abi_version(void) { return PIPE_ABI_VERSION; }
extern "C" int pipe_program_rank(void) { return 0; }

extern "C" void pipe_program_setup(pipe_rank *r) {
  pipe_set_optimizer(r, PIPE_SGD, 0.1, 0.0, 0.9, 0.999, 1e-08, 0.0);
  pipe_declare_stage(r, 0, 1);
  pipe_declare_node(r, 0, "mul");
  pipe_declare_param(r, 0, "w", PIPE_F32, PIPE_INTS(2, 3), PIPE_SOURCE_FILE, nullptr, 0, 24, 1, 0);
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
  pipe_action_end(r);
  pipe_step_end(r);
}
