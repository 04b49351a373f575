#include "tern/prof/status_sections.h"

#include <algorithm>
#include <memory>
#include <mutex>

namespace tern::prof {

namespace {

struct Section {
  std::uint64_t id;
  std::string name;
  std::shared_ptr<StatusSectionFn> fn;
};

struct Sections {
  std::mutex mutex;
  std::vector<Section> list;
  std::uint64_t next_id = 1;
};

Sections& sections() {
  static Sections* all = new Sections;  // never destroyed: sections may be read during exit
  return *all;
}

}  // namespace

std::uint64_t add_status_section(std::string name, StatusSectionFn fn) {
  Sections& all = sections();
  std::lock_guard lock(all.mutex);
  const std::uint64_t id = all.next_id++;
  all.list.push_back({id, std::move(name), std::make_shared<StatusSectionFn>(std::move(fn))});
  return id;
}

void remove_status_section(std::uint64_t id) {
  Sections& all = sections();
  std::lock_guard lock(all.mutex);
  std::erase_if(all.list, [id](const Section& s) { return s.id == id; });
}

std::vector<std::pair<std::string, std::string>> collect_status_sections() {
  std::vector<Section> copy;
  {
    Sections& all = sections();
    std::lock_guard lock(all.mutex);
    copy = all.list;
  }
  // Called without the lock: a section may take locks of its own.
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(copy.size());
  for (const Section& section : copy) out.emplace_back(section.name, (*section.fn)());
  return out;
}

}  // namespace tern::prof
