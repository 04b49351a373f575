#pragma once

#include <google/protobuf/descriptor.h>

#include <string>
#include <string_view>

namespace tern::protoc_gen {

// Whether `word` is a C++ keyword or alternative token (and, bitor, ...). Any thread.
bool is_cpp_keyword(std::string_view word) noexcept;

// The names of the classes generated for a service ("Foo" -> "FooBase", "FooClient").
std::string base_class_name(const google::protobuf::ServiceDescriptor& service);
std::string client_class_name(const google::protobuf::ServiceDescriptor& service);

// Why the code for `file` cannot be generated ("protoc-gen-tern: foo.proto:3:3: ..."), or an
// empty string when it can: a streaming method, a package or method name that is a C++ keyword,
// or a generated name that clashes with another one or with a symbol of the same package.
std::string check_file(const google::protobuf::FileDescriptor& file);

}  // namespace tern::protoc_gen
