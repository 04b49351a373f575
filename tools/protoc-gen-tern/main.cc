// protoc-gen-tern: protoc runs it for --tern_out and it writes the tern::rpc code of each .proto.
#include <google/protobuf/compiler/plugin.h>

#include "generator.h"

int main(int argc, char* argv[]) {
  const tern::protoc_gen::Generator generator;
  return google::protobuf::compiler::PluginMain(argc, argv, &generator);
}
