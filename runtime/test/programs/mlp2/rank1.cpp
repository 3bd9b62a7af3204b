// mlp2, rank 1 (stage 1): fc2 = Gemm(a, fc2.weight^T, fc2.bias), then the mean
// softmax cross entropy of the micro-batch scaled by 1/4 (the program's share
// of the mini-batch mean). Hand-written as pipe-opt generates rank programs.
#include "pipe_runtime.h"

namespace {

void stage1_forward(pipe_rank *r, int32_t mb) {
  pipe_tensor *a = pipe_recv(r, 0, 0, PIPE_TRANSFER_ACTIVATION, mb, PIPE_F32, PIPE_INTS(2, 16));
  pipe_node(r, 2);
  pipe_tensor *logits = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 4), PIPE_MEM_WORKSPACE);
  pipe_k_gemm(r, a, pipe_param(r, 2), pipe_param(r, 3), logits, 1.0, 1.0, 0, 1);
  pipe_tensor *labels = pipe_label(r, mb, 0, PIPE_I64, PIPE_INTS(2), 4);
  pipe_node(r, 3);
  pipe_tensor *loss = pipe_alloc(r, PIPE_F32, PIPE_INTS(), PIPE_MEM_WORKSPACE);
  pipe_tensor *logProb = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 4), PIPE_MEM_WORKSPACE);
  pipe_k_softmax_cross_entropy(r, logits, labels, loss, logProb, -100, 0.25);
  pipe_loss(r, loss);
  pipe_free(r, loss);
  pipe_free(r, logits);
  pipe_save(r, 1, mb, 0, a);
  pipe_save(r, 1, mb, 1, labels);
  pipe_save(r, 1, mb, 2, logProb);
}

void stage1_backward(pipe_rank *r, int32_t mb) {
  pipe_tensor *a = pipe_restore(r, 1, mb, 0);
  pipe_tensor *labels = pipe_restore(r, 1, mb, 1);
  pipe_tensor *logProb = pipe_restore(r, 1, mb, 2);
  pipe_node(r, 3);
  pipe_tensor *dloss = pipe_splat(r, PIPE_F32, PIPE_INTS(), 1.0);
  pipe_tensor *dlogits = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 4), PIPE_MEM_WORKSPACE);
  pipe_k_softmax_cross_entropy_grad(r, dloss, logProb, labels, dlogits, -100, 0.25);
  pipe_free(r, dloss);
  pipe_free(r, logProb);
  pipe_free(r, labels);
  pipe_node(r, 2);
  pipe_tensor *dw = pipe_alloc(r, PIPE_F32, PIPE_INTS(4, 16), PIPE_MEM_WORKSPACE);
  pipe_k_gemm(r, dlogits, a, nullptr, dw, 1.0, 0.0, 1, 0);
  pipe_accumulate_grad(r, 2, dw);
  pipe_free(r, dw);
  pipe_tensor *db = pipe_alloc(r, PIPE_F32, PIPE_INTS(4), PIPE_MEM_WORKSPACE);
  pipe_k_reduce(r, PIPE_REDUCE_SUM, dlogits, db, PIPE_INTS(0));
  pipe_accumulate_grad(r, 3, db);
  pipe_free(r, db);
  pipe_tensor *da = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 16), PIPE_MEM_WORKSPACE);
  pipe_k_gemm(r, dlogits, pipe_param(r, 2), nullptr, da, 1.0, 0.0, 0, 0);
  pipe_free(r, dlogits);
  pipe_free(r, a);
  pipe_send(r, da, 0, 0, PIPE_TRANSFER_GRADIENT, mb);
  pipe_free(r, da);
}

} // namespace

extern "C" int pipe_program_abi_version(void) { return PIPE_ABI_VERSION; }
extern "C" int pipe_program_rank(void) { return 1; }

extern "C" void pipe_program_setup(pipe_rank *r) {
  pipe_set_optimizer(r, PIPE_ADAM, 0.01, 0.0, 0.9, 0.999, 1e-08, 0.01);
  pipe_declare_stage(r, 1, 3);
  pipe_declare_node(r, 2, "fc2");
  pipe_declare_node(r, 3, "loss");
  pipe_declare_param(r, 2, "fc2.weight", PIPE_F32, PIPE_INTS(4, 16), PIPE_SOURCE_FILE, nullptr,
                     576, 256, 1, 1);
  pipe_declare_param(r, 3, "fc2.bias", PIPE_F32, PIPE_INTS(4), PIPE_SOURCE_FILE, nullptr, 832,
                     16, 1, 1);
}

extern "C" void pipe_program_step(pipe_rank *r) {
  pipe_step_begin(r);
  for (int32_t mb = 0; mb < 4; ++mb) {
    pipe_action_begin(r, PIPE_ACTION_FORWARD, 1, mb);  stage1_forward(r, mb);  pipe_action_end(r);
    pipe_action_begin(r, PIPE_ACTION_BACKWARD, 1, mb); stage1_backward(r, mb); pipe_action_end(r);
  }
  pipe_action_begin(r, PIPE_ACTION_OPTIMIZER, -1, -1);
  pipe_all_reduce_grads(r);
  pipe_update(r, 2);
  pipe_update(r, 3);
  pipe_action_end(r);
  pipe_step_end(r);
}
