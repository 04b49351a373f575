#pragma once

#include <google/protobuf/compiler/code_generator.h>

#include <cstdint>
#include <string>

namespace tern::protoc_gen {

// Writes <name>.tern.h and <name>.tern.cc for every .proto protoc hands it: per service a server
// base class (one virtual per method) and a typed client over tern::rpc::Channel. A file without
// services still gets the pair (it only includes <name>.pb.h), so build rules can name the outputs
// before they run. Refuses streaming methods and names that would not compile. protoc's thread.
class Generator final : public google::protobuf::compiler::CodeGenerator {
 public:
  // Writes the pair for `file`; on failure sets `error` and returns false (protoc reports it).
  bool Generate(const google::protobuf::FileDescriptor* file, const std::string& parameter,
                google::protobuf::compiler::GeneratorContext* context,
                std::string* error) const override;

  // proto3 optional fields are accepted: the generated code touches only messages, not fields.
  std::uint64_t GetSupportedFeatures() const override { return FEATURE_PROTO3_OPTIONAL; }
};

}  // namespace tern::protoc_gen
