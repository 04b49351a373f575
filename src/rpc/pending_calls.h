#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tern::rpc::detail {

struct PendingCall;

// The calls of one client connection waiting for their replies, by correlation id: an open-
// addressing table with linear probing. A connection numbers its calls 1, 2, 3..., so an id is
// its own hash and the calls in flight sit in neighbouring slots; a call costs no allocation
// once the table has grown to the connection's largest number of calls in flight. Ids must not
// be 0. Fibers of the connection's worker only.
class PendingCalls {
 public:
  // Adds call under id, which must not be in the table.
  void insert(std::uint64_t id, PendingCall* call) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    place({id, call});
    ++size_;
  }

  // The call under id, or nullptr.
  PendingCall* find(std::uint64_t id) const noexcept {
    const std::size_t at = locate(id);
    return at == kMissing ? nullptr : slots_[at].call;
  }

  // Removes and returns the call under id, or nullptr if there is none.
  PendingCall* take(std::uint64_t id) noexcept {
    std::size_t at = locate(id);
    if (at == kMissing) return nullptr;
    PendingCall* call = slots_[at].call;
    // Backward-shift deletion: every later entry of the run that may live in the hole moves
    // into it, so a lookup never stops early at a slot a removal emptied.
    for (std::size_t next = (at + 1) & mask(); slots_[next].id != 0; next = (next + 1) & mask()) {
      const std::size_t home = slots_[next].id & mask();
      // The entry at `next` may move back to `at` unless its home lies after `at` (cyclically)
      // and no later than `next`.
      const bool stays = at <= next ? (home > at && home <= next) : (home > at || home <= next);
      if (stays) continue;
      slots_[at] = slots_[next];
      at = next;
    }
    slots_[at] = {};
    --size_;
    return call;
  }

  // Calls in the table.
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  // Empties the table and returns its calls (in no particular order).
  std::vector<PendingCall*> take_all() {
    std::vector<PendingCall*> calls;
    calls.reserve(size_);
    for (Slot& slot : slots_) {
      if (slot.id != 0) calls.push_back(slot.call);
      slot = {};
    }
    size_ = 0;
    return calls;
  }

 private:
  struct Slot {
    std::uint64_t id = 0;  // 0: empty
    PendingCall* call = nullptr;
  };
  static constexpr std::size_t kMissing = ~std::size_t{0};
  static constexpr std::size_t kInitialSlots = 8;

  std::size_t mask() const noexcept { return slots_.size() - 1; }

  std::size_t locate(std::uint64_t id) const noexcept {
    if (size_ == 0 || id == 0) return kMissing;
    for (std::size_t at = id & mask();; at = (at + 1) & mask()) {
      if (slots_[at].id == id) return at;
      if (slots_[at].id == 0) return kMissing;
    }
  }

  void grow() {
    std::vector<Slot> old(slots_.empty() ? kInitialSlots : slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& slot : old) {
      if (slot.id != 0) place(slot);
    }
  }

  // Puts slot in the first free slot from its id's home on (the table has room).
  void place(const Slot& slot) noexcept {
    std::size_t at = slot.id & mask();
    while (slots_[at].id != 0) at = (at + 1) & mask();
    slots_[at] = slot;
  }

  std::vector<Slot> slots_;  // a power of two in size, at most half full
  std::size_t size_ = 0;
};

}  // namespace tern::rpc::detail
