#include "generator.h"

#include <google/protobuf/compiler/cpp/names.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/printer.h>
#include <google/protobuf/io/zero_copy_stream.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "checks.h"

namespace tern::protoc_gen {

namespace pb = google::protobuf;

namespace {

using Vars = std::map<std::string, std::string>;

// "a.b" -> "a::b".
std::string cpp_namespace(const std::string& package) {
  std::string result;
  for (char c : package) {
    if (c == '.') {
      result += "::";
    } else {
      result += c;
    }
  }
  return result;
}

// What a method streams.
enum class Kind { unary, server_streaming, client_streaming, bidi_streaming };

Kind kind_of(const pb::MethodDescriptor& method) {
  if (method.client_streaming() && method.server_streaming()) return Kind::bidi_streaming;
  if (method.client_streaming()) return Kind::client_streaming;
  if (method.server_streaming()) return Kind::server_streaming;
  return Kind::unary;
}

// The variables of one method for the templates below.
Vars method_vars(const pb::ServiceDescriptor& service, const pb::MethodDescriptor& method) {
  return {
      {"base", base_class_name(service)},
      {"client", client_class_name(service)},
      {"method", method.name()},
      {"request", pb::compiler::cpp::QualifiedClassName(method.input_type())},
      {"reply", pb::compiler::cpp::QualifiedClassName(method.output_type())},
      {"proto_request", method.input_type()->full_name()},
      {"proto_reply", method.output_type()->full_name()},
      {"stream_request", method.client_streaming() ? "stream " : ""},
      {"stream_reply", method.server_streaming() ? "stream " : ""},
  };
}

// The handler's parameters after the context, for a method of `kind` (its .cc definition and
// the declaration share them).
const char* handler_parameters(Kind kind) {
  switch (kind) {
    case Kind::unary:
      return "const $request$& request, $reply$& reply";
    case Kind::server_streaming:
      return "const $request$& request, ::tern::rpc::ServerWriter<$reply$>& writer";
    case Kind::client_streaming:
      return "::tern::rpc::ServerReader<$request$>& reader, $reply$& reply";
    case Kind::bidi_streaming:
      return "::tern::rpc::ServerReaderWriter<$request$, $reply$>& stream";
  }
  return "";
}

// The same parameters without names (the default definitions do not use them).
const char* unnamed_handler_parameters(Kind kind) {
  switch (kind) {
    case Kind::unary:
      return "const $request$&, $reply$&";
    case Kind::server_streaming:
      return "const $request$&, ::tern::rpc::ServerWriter<$reply$>&";
    case Kind::client_streaming:
      return "::tern::rpc::ServerReader<$request$>&, $reply$&";
    case Kind::bidi_streaming:
      return "::tern::rpc::ServerReaderWriter<$request$, $reply$>&";
  }
  return "";
}

// The entry of kMethods for a method of `kind`.
const char* method_entry(Kind kind) {
  switch (kind) {
    case Kind::unary:
      return "      {\"$method$\",\n"
             "       &::tern::rpc::invoke_unary<$base$, $request$, $reply$, &$base$::$method$>,\n"
             "       nullptr},\n";
    case Kind::server_streaming:
      return "      {\"$method$\", nullptr,\n"
             "       &::tern::rpc::invoke_server_streaming<$base$, $request$, $reply$,\n"
             "           &$base$::$method$>},\n";
    case Kind::client_streaming:
      return "      {\"$method$\", nullptr,\n"
             "       &::tern::rpc::invoke_client_streaming<$base$, $request$, $reply$,\n"
             "           &$base$::$method$>},\n";
    case Kind::bidi_streaming:
      return "      {\"$method$\", nullptr,\n"
             "       &::tern::rpc::invoke_bidi_streaming<$base$, $request$, $reply$,\n"
             "           &$base$::$method$>},\n";
  }
  return "";
}

// The leading comment of a service or method in the .proto as `//` lines after `indent`, if
// any. PrintRaw: a comment may hold the printer's `$`.
template <typename Descriptor>
void print_leading_comment(pb::io::Printer& out, const Descriptor& descriptor,
                           const std::string& indent) {
  pb::SourceLocation location;
  if (!descriptor.GetSourceLocation(&location)) return;
  std::string_view text = location.leading_comments;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string line(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.pop_back();
    }
    // A trailing backslash would continue the comment onto the next generated line.
    if (!line.empty() && line.back() == '\\') line += '.';
    out.PrintRaw(indent + "//" + line + "\n");
  }
}

void print_preamble(pb::io::Printer& out, const pb::FileDescriptor& file) {
  out.Print(
      "// Generated by protoc-gen-tern from $file$: the tern::rpc server base class and client\n"
      "// of each service in it. Do not edit.\n",
      "file", file.name());
}

void print_base_class(pb::io::Printer& out, const pb::ServiceDescriptor& service) {
  out.Print(
      "// Server side of $service$: override the methods the service implements; the others\n"
      "// answer unimplemented. Handlers run on the server's handler fibers, several at once.\n",
      "service", service.full_name());
  print_leading_comment(out, service, "");
  out.Print(
      "class $base$ : public ::tern::rpc::Service {\n"
      " public:\n"
      "  // The full name calls address the service by.\n"
      "  static constexpr ::std::string_view kServiceName = \"$service$\";\n"
      "\n"
      "  // Returns kServiceName; any thread.\n"
      "  ::std::string_view service_name() const noexcept final { return kServiceName; }\n"
      "  // The methods in .proto order, each bound to its virtual function below; any thread.\n"
      "  ::std::span<const ::tern::rpc::Method> methods() const noexcept final;\n",
      "service", service.full_name(), "base", base_class_name(service));
  for (int i = 0; i < service.method_count(); ++i) {
    const pb::MethodDescriptor& method = *service.method(i);
    const Vars vars = method_vars(service, method);
    out.Print(vars,
              "\n  // rpc $method$($stream_request$$proto_request$) returns "
              "($stream_reply$$proto_reply$)\n");
    print_leading_comment(out, method, "  ");
    out.Print(vars,
              "  virtual ::tern::rpc::Status $method$(::tern::rpc::ServerContext& context,\n");
    out.Print(vars, (std::string("      ") + handler_parameters(kind_of(method)) + ");\n").c_str());
  }
  out.Print("};\n\n");
}

void print_client_class(pb::io::Printer& out, const pb::ServiceDescriptor& service) {
  out.Print(
      "// Client side of $service$ over a tern::rpc::Channel; call it from fibers of the\n"
      "// channel's worker.\n",
      "service", service.full_name());
  print_leading_comment(out, service, "");
  out.Print(
      "class $client$ {\n"
      " public:\n"
      "  // A client whose calls go through `channel`, which must outlive it.\n"
      "  explicit $client$(::tern::rpc::Channel& channel) noexcept : channel_(&channel) {}\n"
      "\n"
      "  // The channel the calls go through.\n"
      "  ::tern::rpc::Channel& channel() const noexcept { return *channel_; }\n",
      "service", service.full_name(), "client", client_class_name(service));
  for (int i = 0; i < service.method_count(); ++i) {
    const pb::MethodDescriptor& method = *service.method(i);
    const Vars vars = method_vars(service, method);
    out.Print(vars,
              "\n  // rpc $method$($stream_request$$proto_request$) returns "
              "($stream_reply$$proto_reply$)\n");
    print_leading_comment(out, method, "  ");
    switch (kind_of(method)) {
      case Kind::unary:
        break;
      case Kind::server_streaming:
        out.Print(vars,
                  "  // Opens $method$ with `request`; read the replies, then finish().\n"
                  "  [[nodiscard]] ::tern::rpc::ClientReader<$reply$> $method$(\n"
                  "      ::tern::rpc::ClientContext& context, const $request$& request);\n");
        continue;
      case Kind::client_streaming:
        out.Print(vars,
                  "  // Opens $method$: write the requests, then finish(reply).\n"
                  "  [[nodiscard]] ::tern::rpc::ClientWriter<$request$, $reply$> $method$(\n"
                  "      ::tern::rpc::ClientContext& context);\n");
        continue;
      case Kind::bidi_streaming:
        out.Print(vars,
                  "  // Opens $method$: write requests and read replies, then finish().\n"
                  "  [[nodiscard]] ::tern::rpc::ClientReaderWriter<$request$, $reply$> $method$(\n"
                  "      ::tern::rpc::ClientContext& context);\n");
        continue;
    }
    out.Print(
        vars,
        "  // Calls $method$ and waits for the reply, or the status that says why there is none.\n"
        "  [[nodiscard]] ::tern::rpc::Result<$reply$> $method$(\n"
        "      ::tern::rpc::ClientContext& context, const $request$& request);\n"
        "  // Calls $method$ with a default context (the channel's default timeout).\n"
        "  [[nodiscard]] ::tern::rpc::Result<$reply$> $method$(const $request$& request);\n"
        "  // Calls $method$ and parses the reply into `reply`.\n"
        "  [[nodiscard]] ::tern::rpc::Status $method$(::tern::rpc::ClientContext& context,\n"
        "      const $request$& request, $reply$& reply);\n"
        "  // Starts $method$ in its own fiber; the future holds the reply.\n"
        "  [[nodiscard]] ::tern::rpc::Future<$reply$> $method$Async(\n"
        "      const ::tern::rpc::ClientContext& context, const $request$& request);\n"
        "  // Starts $method$ in its own fiber and runs `done` with the outcome there.\n"
        "  void $method$Async(const ::tern::rpc::ClientContext& context,\n"
        "      const $request$& request,\n"
        "      ::std::function<void(::tern::rpc::Result<$reply$>)> done);\n"
        "  // Sends $method$ as a one-way call (no reply); returns once it is queued.\n"
        "  [[nodiscard]] ::tern::rpc::Status $method$OneWay(::tern::rpc::ClientContext& context,\n"
        "      const $request$& request);\n");
  }
  out.Print(
      "\n"
      " private:\n"
      "  ::tern::rpc::Channel* channel_;\n"
      "};\n");
}

void print_base_definitions(pb::io::Printer& out, const pb::ServiceDescriptor& service) {
  const std::string base = base_class_name(service);
  if (service.method_count() == 0) {
    out.Print(
        "::std::span<const ::tern::rpc::Method> $base$::methods() const noexcept {\n"
        "  return {};\n"
        "}\n",
        "base", base);
    return;
  }
  out.Print(
      "::std::span<const ::tern::rpc::Method> $base$::methods() const noexcept {\n"
      "  static constexpr ::tern::rpc::Method kMethods[] = {\n",
      "base", base);
  for (int i = 0; i < service.method_count(); ++i) {
    const pb::MethodDescriptor& method = *service.method(i);
    out.Print(method_vars(service, method), method_entry(kind_of(method)));
  }
  out.Print(
      "  };\n"
      "  return kMethods;\n"
      "}\n");
  for (int i = 0; i < service.method_count(); ++i) {
    const pb::MethodDescriptor& method = *service.method(i);
    const Vars vars = method_vars(service, method);
    out.Print(vars, "\n::tern::rpc::Status $base$::$method$(::tern::rpc::ServerContext&,\n");
    out.Print(
        vars,
        (std::string("    ") + unnamed_handler_parameters(kind_of(method)) + ") {\n").c_str());
    out.Print(vars,
              "  return ::tern::rpc::unimplemented_method(kServiceName, \"$method$\");\n"
              "}\n");
  }
}

// The client's definition of a streaming method.
void print_stream_client_definition(pb::io::Printer& out, const pb::MethodDescriptor& method,
                                    const Vars& vars) {
  switch (kind_of(method)) {
    case Kind::unary:
      return;
    case Kind::server_streaming:
      out.Print(vars,
                "\n"
                "::tern::rpc::ClientReader<$reply$> $client$::$method$(\n"
                "    ::tern::rpc::ClientContext& context, const $request$& request) {\n"
                "  ::tern::rpc::StreamCall call =\n"
                "      channel_->open_stream(context, $base$::kServiceName, \"$method$\");\n"
                "  // A failure shows in the first read.\n"
                "  if (call.write(request).ok()) (void)call.close_send();\n"
                "  return ::tern::rpc::ClientReader<$reply$>(::std::move(call));\n"
                "}\n");
      return;
    case Kind::client_streaming:
      out.Print(vars,
                "\n"
                "::tern::rpc::ClientWriter<$request$, $reply$> $client$::$method$(\n"
                "    ::tern::rpc::ClientContext& context) {\n"
                "  return ::tern::rpc::ClientWriter<$request$, $reply$>(\n"
                "      channel_->open_stream(context, $base$::kServiceName, \"$method$\"));\n"
                "}\n");
      return;
    case Kind::bidi_streaming:
      out.Print(vars,
                "\n"
                "::tern::rpc::ClientReaderWriter<$request$, $reply$> $client$::$method$(\n"
                "    ::tern::rpc::ClientContext& context) {\n"
                "  return ::tern::rpc::ClientReaderWriter<$request$, $reply$>(\n"
                "      channel_->open_stream(context, $base$::kServiceName, \"$method$\"));\n"
                "}\n");
      return;
  }
}

void print_client_definitions(pb::io::Printer& out, const pb::ServiceDescriptor& service) {
  for (int i = 0; i < service.method_count(); ++i) {
    if (kind_of(*service.method(i)) != Kind::unary) {
      print_stream_client_definition(out, *service.method(i),
                                     method_vars(service, *service.method(i)));
      continue;
    }
    out.Print(
        method_vars(service, *service.method(i)),
        "\n"
        "::tern::rpc::Result<$reply$> $client$::$method$(::tern::rpc::ClientContext& context,\n"
        "    const $request$& request) {\n"
        "  $reply$ reply;\n"
        "  ::tern::rpc::Status status = this->$method$(context, request, reply);\n"
        "  if (!status.ok()) return ::std::unexpected(::std::move(status));\n"
        "  return ::tern::rpc::Result<$reply$>(::std::move(reply));\n"
        "}\n"
        "\n"
        "::tern::rpc::Result<$reply$> $client$::$method$(const $request$& request) {\n"
        "  ::tern::rpc::ClientContext context;\n"
        "  return this->$method$(context, request);\n"
        "}\n"
        "\n"
        "::tern::rpc::Status $client$::$method$(::tern::rpc::ClientContext& context,\n"
        "    const $request$& request, $reply$& reply) {\n"
        "  return channel_->call(context, $base$::kServiceName, \"$method$\", request, reply);\n"
        "}\n"
        "\n"
        "::tern::rpc::Future<$reply$> $client$::$method$Async(\n"
        "    const ::tern::rpc::ClientContext& context, const $request$& request) {\n"
        "  return channel_->call_async<$reply$>(context, $base$::kServiceName, \"$method$\",\n"
        "      request);\n"
        "}\n"
        "\n"
        "void $client$::$method$Async(const ::tern::rpc::ClientContext& context,\n"
        "    const $request$& request,\n"
        "    ::std::function<void(::tern::rpc::Result<$reply$>)> done) {\n"
        "  channel_->call_async<$reply$>(context, $base$::kServiceName, \"$method$\", request,\n"
        "      ::std::move(done));\n"
        "}\n"
        "\n"
        "::tern::rpc::Status $client$::$method$OneWay(::tern::rpc::ClientContext& context,\n"
        "    const $request$& request) {\n"
        "  return channel_->notify(context, $base$::kServiceName, \"$method$\", request);\n"
        "}\n");
  }
}

void print_namespace_open(pb::io::Printer& out, const pb::FileDescriptor& file) {
  if (!file.package().empty()) {
    out.Print("namespace $ns$ {\n\n", "ns", cpp_namespace(file.package()));
  }
}

void print_namespace_close(pb::io::Printer& out, const pb::FileDescriptor& file) {
  if (!file.package().empty()) {
    out.Print("\n}  // namespace $ns$\n", "ns", cpp_namespace(file.package()));
  }
}

void write_header(pb::io::ZeroCopyOutputStream* stream, const pb::FileDescriptor& file,
                  const std::string& stem) {
  pb::io::Printer out(stream, '$');
  print_preamble(out, file);
  out.Print("#pragma once\n\n#include \"$stem$.pb.h\"\n", "stem", stem);
  if (file.service_count() == 0) {
    out.Print("\n// $file$ declares no service.\n", "file", file.name());
    return;
  }
  out.Print(
      "\n"
      "#include <tern/rpc/channel.h>\n"
      "#include <tern/rpc/future.h>\n"
      "#include <tern/rpc/service.h>\n"
      "#include <tern/rpc/status.h>\n"
      "#include <tern/rpc/stream.h>\n"
      "\n"
      "#include <functional>\n"
      "#include <span>\n"
      "#include <string_view>\n"
      "\n");
  print_namespace_open(out, file);
  for (int i = 0; i < file.service_count(); ++i) {
    if (i > 0) out.Print("\n");
    print_base_class(out, *file.service(i));
    print_client_class(out, *file.service(i));
  }
  print_namespace_close(out, file);
}

void write_source(pb::io::ZeroCopyOutputStream* stream, const pb::FileDescriptor& file,
                  const std::string& stem) {
  pb::io::Printer out(stream, '$');
  print_preamble(out, file);
  out.Print("#include \"$stem$.tern.h\"\n", "stem", stem);
  if (file.service_count() == 0) return;
  out.Print("\n#include <expected>\n#include <utility>\n\n");
  print_namespace_open(out, file);
  for (int i = 0; i < file.service_count(); ++i) {
    if (i > 0) out.Print("\n");
    print_base_definitions(out, *file.service(i));
    print_client_definitions(out, *file.service(i));
  }
  print_namespace_close(out, file);
}

}  // namespace

bool Generator::Generate(const pb::FileDescriptor* file, const std::string& parameter,
                         pb::compiler::GeneratorContext* context, std::string* error) const {
  if (!parameter.empty()) {
    *error = "protoc-gen-tern: unknown option '" + parameter + "' (it takes none)";
    return false;
  }
  if (std::string problem = check_file(*file); !problem.empty()) {
    *error = std::move(problem);
    return false;
  }
  const std::string stem = pb::compiler::cpp::StripProto(file->name());
  write_header(std::unique_ptr<pb::io::ZeroCopyOutputStream>(context->Open(stem + ".tern.h")).get(),
               *file, stem);
  write_source(
      std::unique_ptr<pb::io::ZeroCopyOutputStream>(context->Open(stem + ".tern.cc")).get(), *file,
      stem);
  return true;
}

}  // namespace tern::protoc_gen
