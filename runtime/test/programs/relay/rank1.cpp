// relay, rank 1 (stage 1): loss = sum(h * t) / 4 per micro-batch, so dh = t / 4.
// Node "label" (fetching t) runs in the forward only, node "dot" in both.
// RELAY_FAULT in the environment makes it fail on purpose (the fault tests):
// throw, fail (a bad view inside node "bad_reshape"), silent (after its last
// backward, waits for a tag rank 0 never sends), leak (keeps a tensor past the
// step).
#include "pipe_runtime.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace {

const char *fault = "";
int forwards = 0;

void stage1_forward(pipe_rank *r, int mb) {
  pipe_node(r, 3);
  pipe_tensor *t = pipe_label(r, mb, 0, PIPE_F32, PIPE_INTS(2, 3), 0);
  pipe_node(r, 1);
  pipe_tensor *h = pipe_recv(r, 0, 0, PIPE_TRANSFER_ACTIVATION, mb, PIPE_F32, PIPE_INTS(2, 3));
  if (++forwards == 3 && std::strcmp(fault, "throw") == 0)
    throw std::runtime_error("deliberate failure in rank 1's third forward");
  if (std::strcmp(fault, "fail") == 0) {
    pipe_node(r, 2);
    pipe_view(r, h, PIPE_INTS(4, 4));
  }
  pipe_tensor *loss = pipe_alloc(r, PIPE_F32, PIPE_INTS(), PIPE_MEM_WORKSPACE);
  float sum = 0;
  for (int i = 0; i < 6; ++i)
    sum += static_cast<float *>(h->data)[i] * static_cast<float *>(t->data)[i];
  static_cast<float *>(loss->data)[0] = sum / 4;
  pipe_loss(r, loss);
  if (std::strcmp(fault, "leak") != 0)
    pipe_free(r, loss);
  pipe_free(r, h);
  pipe_save(r, 1, mb, 0, t);
}

void stage1_backward(pipe_rank *r, int mb) {
  pipe_node(r, 1);
  pipe_tensor *t = pipe_restore(r, 1, mb, 0);
  pipe_tensor *dh = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 3), PIPE_MEM_WORKSPACE);
  for (int i = 0; i < 6; ++i)
    static_cast<float *>(dh->data)[i] = static_cast<float *>(t->data)[i] / 4;
  pipe_send(r, dh, 0, 0, PIPE_TRANSFER_GRADIENT, mb);
  pipe_free(r, dh);
  pipe_free(r, t);
  if (mb == 3 && std::strcmp(fault, "silent") == 0)
    pipe_free(r, pipe_recv(r, 0, 7, PIPE_TRANSFER_ACTIVATION, mb, PIPE_F32, PIPE_INTS(2, 3)));
}

} // namespace

extern "C" int pipe_program_abi_version(void) { return PIPE_ABI_VERSION; }
extern "C" int pipe_program_rank(void) { return 1; }

extern "C" void pipe_program_setup(pipe_rank *r) {
  if (const char *value = std::getenv("RELAY_FAULT"))
    fault = value;
  pipe_set_optimizer(r, PIPE_SGD, 0.1, 0.0, 0.9, 0.999, 1e-08, 0.0);
  pipe_declare_stage(r, 1, 1);
  pipe_declare_node(r, 1, "dot");
  pipe_declare_node(r, 2, "bad_reshape");
  pipe_declare_node(r, 3, "label");
}

extern "C" void pipe_program_step(pipe_rank *r) {
  pipe_step_begin(r);
  for (int mb = 0; mb < 4; ++mb) {
    pipe_action_begin(r, PIPE_ACTION_FORWARD, 1, mb);  stage1_forward(r, mb);  pipe_action_end(r);
    pipe_action_begin(r, PIPE_ACTION_BACKWARD, 1, mb); stage1_backward(r, mb); pipe_action_end(r);
  }
  pipe_step_end(r);
}
