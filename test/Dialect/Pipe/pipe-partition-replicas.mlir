// pipe-partition with gpus: data-parallel replicas of the pipeline. The plan is
// one replica's (its stages' GPUs, its share of the micro-batches) and says how
// many replicas train together.
// RUN: pipe-opt %s -pipe-partition='stages=2 gpus=4 microbatches=4 target=h100 algo=balanced' | FileCheck %s --check-prefix=FIXED
// RUN: pipe-opt %s -pipe-partition='stages=0 gpus=4 microbatches=4 target=h100 algo=balanced' | FileCheck %s --check-prefix=CHOSEN
// RUN: not pipe-opt %s -pipe-partition='stages=3 gpus=4 target=h100' 2>&1 | FileCheck %s --check-prefix=NOT-WHOLE
// RUN: not pipe-opt %s -pipe-partition='stages=2 gpus=4 microbatches=3 target=h100' 2>&1 | FileCheck %s --check-prefix=UNEVEN
// 2 replicas of 8 GPUs on two nodes of 8: stage-major keeps each all-reduce in
// a node (4 MiB of gradient per GPU) and sends the activations across.
// RUN: pipe-opt %s -pipe-partition='stages=8 gpus=16 microbatches=8 target=h100 algo=balanced' | FileCheck %s --check-prefix=STAGE-MAJOR
// STAGE-MAJOR: pipe.plan = #pipe.plan<algorithm = "balanced",
// STAGE-MAJOR-SAME: replicas = 2, replica_layout = "stage-major">
// FIXED: pipe.plan = #pipe.plan<algorithm = "balanced", stages = 2, gpus = 2, microbatches = 2,
// FIXED-SAME: replicas = 2>
// (On one node the layouts tie, and pipeline-major, the default, is kept.)
// (Fields at their defaults are not printed: 4 replicas of one stage, one
// micro-batch each, print no stages, gpus or microbatches.)
// CHOSEN: pipe.plan = #pipe.plan<algorithm = "balanced",
// CHOSEN-SAME: replicas = {{[24]}}>
// NOT-WHOLE: error: stages must divide gpus into replicas (or be 0 to choose), got 3 stages of 4 GPUs
// UNEVEN: error: no split of the 4 GPUs into replicas of a pipeline has a plan
// UNEVEN: note: 2 x 2 pipeline-major: the 3 micro-batches do not split evenly over 2 replicas
// UNEVEN-NEXT: note: 2 x 2 stage-major: the 3 micro-batches do not split evenly over 2 replicas
func.func @main(%x: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %w0 = nn.param "w0" {source = #nn.param_source<inline>} : tensor<1024x1024xf32> loc("w0")
  %w1 = nn.param "w1" {source = #nn.param_source<inline>} : tensor<1024x1024xf32> loc("w1")
  %w2 = nn.param "w2" {source = #nn.param_source<inline>} : tensor<1024x1024xf32> loc("w2")
  %w3 = nn.param "w3" {source = #nn.param_source<inline>} : tensor<1024x1024xf32> loc("w3")
  %0 = nn.matmul %x, %w0 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc0")
  %1 = nn.matmul %0, %w1 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc1")
  %2 = nn.matmul %1, %w2 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc2")
  %3 = nn.matmul %2, %w3 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc3")
  return %3 : tensor<256x1024xf32>
}
