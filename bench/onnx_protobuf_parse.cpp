//===- onnx_protobuf_parse.cpp - protobuf's own parse time of a model -----===//
//
// The baseline of the import benchmark: reads an .onnx file and parses it
// into an onnx::ModelProto with protobuf alone, as any C++ ONNX reader does.
// Prints `parse_seconds <s> nodes <n> initializers <n>`.
//
//===----------------------------------------------------------------------===//
#include <onnx/onnx_pb.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: onnx-protobuf-parse MODEL.onnx\n");
    return 2;
  }
  auto start = std::chrono::steady_clock::now();
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "onnx-protobuf-parse: cannot open %s\n", argv[1]);
    return 1;
  }
  std::stringstream bytes;
  bytes << in.rdbuf();
  std::string data = bytes.str();
  onnx::ModelProto model;
  if (!model.ParseFromString(data)) {
    std::fprintf(stderr, "onnx-protobuf-parse: %s is not a valid ModelProto\n", argv[1]);
    return 1;
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("parse_seconds %.4f nodes %d initializers %d\n", seconds,
              model.graph().node_size(), model.graph().initializer_size());
  return 0;
}
