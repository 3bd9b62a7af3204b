// RUN: pipe-opt %s --pass-pipeline='builtin.module(pipe-split-stages,pipe-schedule,pipe-differentiate{optimizer=sgd lr=0.5},convert-pipe-to-emitc)' | FileCheck %s
// RUN: pipe-opt %s --pass-pipeline='builtin.module(pipe-split-stages,pipe-schedule,pipe-differentiate{optimizer=sgd lr=0.5},convert-pipe-to-emitc)' | mlir-translate --mlir-to-cpp --file-id=rank0 | FileCheck %s --check-prefix=RANK0
// RUN: pipe-opt %s --pass-pipeline='builtin.module(pipe-split-stages,pipe-schedule,pipe-differentiate{optimizer=sgd lr=0.5},convert-pipe-to-emitc)' | mlir-translate --mlir-to-cpp --file-id=rank1 | FileCheck %s --check-prefix=RANK1

// A two-layer perceptron on two ranks: fc1, relu and fc2 on rank 0, the loss
// on rank 1. The pipeline is replaced by one emitc.file per rank.
// CHECK-NOT: pipe.pipeline
// CHECK: emitc.file "rank0"
// CHECK: include "pipe_runtime.h"
// CHECK: func @stage0_forward({{.*}}) attributes {specifiers = ["static"]}
// CHECK: call_opaque "pipe_input"
// CHECK: call_opaque "pipe_k_gemm"
// CHECK: emitc.file "rank1"
// CHECK: func @stage1_backward

// The forward of stage 0: the input of micro-batch mb, each op one kernel on
// a tensor allocated with its static shape, every value freed after its last
// use, what the backward reads kept as soon as it is computed, and the
// activation sent to rank 1.
// RANK0-LABEL: static void stage0_forward(
// RANK0-SAME: pipe_rank* [[R:v[0-9]+]], int32_t [[MB:v[0-9]+]]) {
// RANK0: pipe_tensor* [[X:v[0-9]+]] = pipe_input([[R]], [[MB]], 0, PIPE_F32, PIPE_INTS(4, 8), 0);
// RANK0-NEXT: pipe_save([[R]], 0, [[MB]], 1, [[X]]);
// RANK0: pipe_node([[R]], 0);
// RANK0: pipe_tensor* [[H:v[0-9]+]] = pipe_alloc([[R]], PIPE_F32, PIPE_INTS(4, 16), PIPE_MEM_WORKSPACE);
// RANK0: pipe_tensor* [[W1:v[0-9]+]] = pipe_param([[R]], 0);
// RANK0: pipe_k_gemm([[R]], [[X]], [[W1]], {{v[0-9]+}}, [[H]], 1.0, 1.0, 0, 1);
// RANK0: pipe_k_unary([[R]], PIPE_RELU, [[H]], [[A:v[0-9]+]], 0.0, 0.0);
// RANK0-NEXT: pipe_save([[R]], 0, [[MB]], 0, [[A]]);
// RANK0-NEXT: pipe_free([[R]], [[H]]);
// RANK0: pipe_send([[R]], [[Y:v[0-9]+]], 1, 0, PIPE_TRANSFER_ACTIVATION, [[MB]]);
// RANK0-NEXT: pipe_free([[R]], [[Y]]);
// RANK0-NEXT: return;

// The backward: saved values restored, the output gradient received, each
// weight gradient accumulated and freed as soon as it is complete.
// RANK0-LABEL: static void stage0_backward(
// RANK0-SAME: pipe_rank* [[R:v[0-9]+]], int32_t [[MB:v[0-9]+]]) {
// RANK0: pipe_tensor* [[A:v[0-9]+]] = pipe_restore([[R]], 0, [[MB]], 0);
// RANK0: pipe_tensor* [[X:v[0-9]+]] = pipe_restore([[R]], 0, [[MB]], 1);
// RANK0: pipe_tensor* [[DY:v[0-9]+]] = pipe_recv([[R]], 1, 0, PIPE_TRANSFER_GRADIENT, [[MB]], PIPE_F32, PIPE_INTS(4, 3));
// RANK0: pipe_accumulate_grad([[R]], 2, [[DW2:v[0-9]+]]);
// RANK0-NEXT: pipe_free([[R]], [[DW2]]);
// RANK0: pipe_k_unary_grad([[R]], PIPE_RELU, [[A]],
// RANK0: pipe_accumulate_grad([[R]], 0,
// RANK0: return;

// The exported entry points: set-up and the step in the schedule's order.
// RANK0: extern "C" {
// RANK0: int32_t pipe_program_abi_version() {
// RANK0-NEXT: return PIPE_ABI_VERSION;
// RANK0: int32_t pipe_program_rank() {
// RANK0-NEXT: return 0;
// RANK0-LABEL: void pipe_program_setup(
// RANK0-SAME: pipe_rank* [[R:v[0-9]+]]) {
// RANK0: pipe_set_optimizer([[R]], PIPE_SGD, 0.5,
// RANK0: pipe_declare_node([[R]], 0, "fc1");
// RANK0: pipe_declare_stage([[R]], 0, 2);
// RANK0: pipe_declare_param([[R]], 0, "fc1.weight", PIPE_F32, PIPE_INTS(16, 8), PIPE_SOURCE_INLINE, "", -1, -1, 1, 0);
// RANK0-LABEL: void pipe_program_step(
// RANK0-SAME: pipe_rank* [[R:v[0-9]+]]) {
// RANK0: pipe_step_begin([[R]]);
// RANK0: pipe_action_begin([[R]], PIPE_ACTION_FORWARD, 0, 0);
// RANK0-NEXT: stage0_forward([[R]], 0);
// RANK0-NEXT: pipe_action_end([[R]]);
// RANK0: pipe_action_begin([[R]], PIPE_ACTION_FORWARD, 0, 1);
// RANK0: pipe_action_begin([[R]], PIPE_ACTION_BACKWARD, 0, 0);
// RANK0-NEXT: stage0_backward([[R]], 0);
// RANK0: pipe_action_begin([[R]], PIPE_ACTION_OPTIMIZER, -1, -1);
// RANK0-NEXT: pipe_all_reduce_grads([[R]]);
// RANK0: pipe_update([[R]], 0);
// RANK0: pipe_update([[R]], 3);
// RANK0: pipe_step_end([[R]]);
// RANK0: } // extern "C"

// Rank 1 computes the loss of each micro-batch, scaled by 1/microbatches.
// RANK1-LABEL: static void stage1_forward(
// RANK1: pipe_recv({{.*}}, 0, 0, PIPE_TRANSFER_ACTIVATION, {{.*}}, PIPE_F32, PIPE_INTS(4, 3));
// RANK1: pipe_label({{.*}}, 0, PIPE_I64, PIPE_INTS(4), 3);
// RANK1: pipe_k_softmax_cross_entropy(
// RANK1: pipe_splat({{.*}}, PIPE_F32, PIPE_INTS(), 0.5);
// RANK1: pipe_loss(
// RANK1-LABEL: void pipe_program_setup(
// RANK1-NOT: pipe_declare_param
// RANK1: return;
module attributes {pipe.plan = #pipe.plan<stages = 2, microbatches = 2>} {
  func.func @main(%x: tensor<4x8xf32>) -> tensor<4x3xf32> {
    %w1 = nn.param "fc1.weight" {source = #nn.param_source<inline>} : tensor<16x8xf32>
    %b1 = nn.param "fc1.bias" {source = #nn.param_source<inline>} : tensor<16xf32>
    %w2 = nn.param "fc2.weight" {source = #nn.param_source<inline>} : tensor<3x16xf32>
    %b2 = nn.param "fc2.bias" {source = #nn.param_source<inline>} : tensor<3xf32>
    %h = nn.gemm %x, %w1, %b1 {transB = 1 : i64, pipe.stage = 0 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32> loc("fc1")
    %r = nn.relu %h {pipe.stage = 0 : i64} : (tensor<4x16xf32>) -> tensor<4x16xf32> loc("relu")
    %y = nn.gemm %r, %w2, %b2 {transB = 1 : i64, pipe.stage = 0 : i64} : (tensor<4x16xf32>, tensor<3x16xf32>, tensor<3xf32>) -> tensor<4x3xf32> loc("fc2")
    %labels = pipe.label 0 {range = 3 : i64, pipe.stage = 1 : i64} : tensor<4xi64> loc(fused<"pipe.loss">["m.onnx":0:0])
    %loss, %log_prob = nn.softmax_cross_entropy_loss %y, %labels {pipe.stage = 1 : i64} : (tensor<4x3xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x3xf32>) loc(fused<"pipe.loss">["m.onnx":0:0])
    pipe.loss %loss {pipe.stage = 1 : i64} : tensor<f32> loc(fused<"pipe.loss">["m.onnx":0:0])
    return %y : tensor<4x3xf32>
  }
}
