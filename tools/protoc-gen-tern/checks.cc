#include "checks.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace tern::protoc_gen {

namespace pb = google::protobuf;

namespace {

// C++23 keywords and alternative tokens, sorted for binary search.
constexpr std::string_view kKeywords[] = {
    "alignas",       "alignof",     "and",
    "and_eq",        "asm",         "auto",
    "bitand",        "bitor",       "bool",
    "break",         "case",        "catch",
    "char",          "char16_t",    "char32_t",
    "char8_t",       "class",       "co_await",
    "co_return",     "co_yield",    "compl",
    "concept",       "const",       "const_cast",
    "consteval",     "constexpr",   "constinit",
    "continue",      "decltype",    "default",
    "delete",        "do",          "double",
    "dynamic_cast",  "else",        "enum",
    "explicit",      "export",      "extern",
    "false",         "float",       "for",
    "friend",        "goto",        "if",
    "inline",        "int",         "long",
    "mutable",       "namespace",   "new",
    "noexcept",      "not",         "not_eq",
    "nullptr",       "operator",    "or",
    "or_eq",         "private",     "protected",
    "public",        "register",    "reinterpret_cast",
    "requires",      "return",      "short",
    "signed",        "sizeof",      "static",
    "static_assert", "static_cast", "struct",
    "switch",        "template",    "this",
    "thread_local",  "throw",       "true",
    "try",           "typedef",     "typeid",
    "typename",      "union",       "unsigned",
    "using",         "virtual",     "void",
    "volatile",      "wchar_t",     "while",
    "xor",           "xor_eq",
};
static_assert(std::ranges::is_sorted(kKeywords));

// "foo.proto:12:3" for a descriptor with source information (protoc passes it), else "foo.proto".
template <typename Descriptor>
std::string where(const pb::FileDescriptor& file, const Descriptor& descriptor) {
  pb::SourceLocation location;
  if (!descriptor.GetSourceLocation(&location)) return file.name();
  return file.name() + ":" + std::to_string(location.start_line + 1) + ":" +
         std::to_string(location.start_column + 1);
}

std::string failure(const std::string& place, const std::string& what) {
  return "protoc-gen-tern: " + place + ": " + what;
}

// The members of one generated class and what put each there, to find two of the same name.
class MemberNames {
 public:
  explicit MemberNames(std::string class_name) : class_name_(std::move(class_name)) {}

  // A name no method may take: a member protoc-gen-tern always generates, or the class's own.
  void reserve(const std::string& name) { owners_.emplace(name, std::string()); }

  // Claims `name` for `method`; returns why it cannot, or an empty string.
  std::string claim(const std::string& name, const pb::MethodDescriptor& method) {
    const auto [it, inserted] = owners_.emplace(name, method.full_name());
    if (inserted) return {};
    const std::string member = class_name_ + "::" + name;
    if (name == class_name_) {
      return method.full_name() + " has the name of its generated class " + class_name_ +
             "; rename the method";
    }
    if (it->second.empty()) {
      return method.full_name() + " clashes with " + member +
             ", which protoc-gen-tern generates for every service; rename the method";
    }
    return method.full_name() + " clashes with " + it->second + ": both generate " + member +
           "; rename one of them";
  }

 private:
  std::string class_name_;
  std::map<std::string, std::string> owners_;  // name -> full name of the method, or "" (fixed)
};

// A generated class must not take the name of a message, enum, enum value or extension that
// protoc's C++ code declares in the same namespace.
std::string check_package_symbol(const pb::FileDescriptor& file,
                                 const pb::ServiceDescriptor& service,
                                 const std::string& class_name) {
  const std::string full = file.package().empty() ? class_name : file.package() + "." + class_name;
  const pb::DescriptorPool& pool = *file.pool();
  const char* kind = nullptr;
  if (pool.FindMessageTypeByName(full) != nullptr) {
    kind = "message";
  } else if (pool.FindEnumTypeByName(full) != nullptr) {
    kind = "enum";
  } else if (pool.FindEnumValueByName(full) != nullptr) {
    kind = "enum value";
  } else if (pool.FindExtensionByName(full) != nullptr) {
    kind = "extension";
  } else {
    return {};
  }
  return failure(where(file, service), "the class " + class_name + " generated for " +
                                           service.full_name() + " clashes with the " + kind + " " +
                                           full + "; rename one of them");
}

std::string check_service(const pb::FileDescriptor& file, const pb::ServiceDescriptor& service) {
  const std::string base = base_class_name(service);
  const std::string client = client_class_name(service);
  for (const std::string& class_name : {base, client}) {
    if (std::string error = check_package_symbol(file, service, class_name); !error.empty()) {
      return error;
    }
  }
  MemberNames base_members(base);
  for (const char* name : {"kServiceName", "service_name", "methods"}) base_members.reserve(name);
  base_members.reserve(base);  // a member named like its class would be a constructor
  MemberNames client_members(client);
  for (const char* name : {"channel", "channel_"}) client_members.reserve(name);
  client_members.reserve(client);

  for (int i = 0; i < service.method_count(); ++i) {
    const pb::MethodDescriptor& method = *service.method(i);
    if (is_cpp_keyword(method.name())) {
      return failure(where(file, method), method.full_name() + ": '" + method.name() +
                                              "' is a C++ keyword; rename the method");
    }
    std::string error = base_members.claim(method.name(), method);
    for (const char* suffix : {"", "Async", "OneWay"}) {
      if (!error.empty()) break;
      error = client_members.claim(method.name() + suffix, method);
    }
    if (!error.empty()) return failure(where(file, method), error);
  }
  return {};
}

}  // namespace

bool is_cpp_keyword(std::string_view word) noexcept {
  return std::ranges::binary_search(kKeywords, word);
}

std::string base_class_name(const pb::ServiceDescriptor& service) {
  return service.name() + "Base";
}

std::string client_class_name(const pb::ServiceDescriptor& service) {
  return service.name() + "Client";
}

std::string check_file(const pb::FileDescriptor& file) {
  std::string_view package = file.package();
  while (!package.empty()) {
    const std::size_t dot = package.find('.');
    const std::string_view part = package.substr(0, dot);
    if (is_cpp_keyword(part)) {
      return failure(file.name(), "package " + file.package() + ": '" + std::string(part) +
                                      "' is a C++ keyword and cannot name a namespace");
    }
    package = dot == std::string_view::npos ? std::string_view() : package.substr(dot + 1);
  }
  for (int i = 0; i < file.service_count(); ++i) {
    if (std::string error = check_service(file, *file.service(i)); !error.empty()) return error;
  }
  return {};
}

}  // namespace tern::protoc_gen
