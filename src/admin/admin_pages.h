// What the admin endpoint answers: the pages and the status codes of its routes.
#pragma once

#include <string>
#include <string_view>

namespace tern::admin::detail {

// One response of the admin endpoint, before it is framed as HTTP.
struct AdminPage {
  int status = 200;
  std::string content_type;
  std::string body;
  std::string extra_headers;  // whole "Name: value\r\n" lines
};

// The answer to `method` on `path` (the target without its query). Worker fibers (the status
// page reads the calling worker's runtime).
AdminPage admin_page(std::string_view method, std::string_view path);

// The page for a request that never got that far (400, 408, 431): a one-line text body.
AdminPage admin_error_page(int status);

// The /status document: the calling worker's runtime and the process's metrics as JSON.
// Worker fibers.
std::string status_json();

}  // namespace tern::admin::detail
