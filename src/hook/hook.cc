// tern::hook's public queries.
#include "tern/hook/hook.h"

#include "tern/io/poll.h"

namespace tern::hook {

bool parks_fibers() noexcept { return io::on_reactor_worker(); }

}  // namespace tern::hook
