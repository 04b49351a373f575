#include "buffer_bio.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "tern/io/io.h"

namespace tern::tls::detail {

namespace {

// The BIO method, made once for the process (OpenSSL keeps a pointer to it in every BIO).
BIO_METHOD* method(int (*write)(BIO*, const char*, std::size_t, std::size_t*),
                   int (*read)(BIO*, char*, std::size_t, std::size_t*),
                   long (*control)(BIO*, int, long, void*)) {
  static BIO_METHOD* const made = [&] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tern buffers");
    if (m == nullptr) return m;
    BIO_meth_set_write_ex(m, write);
    BIO_meth_set_read_ex(m, read);
    BIO_meth_set_ctrl(m, control);
    BIO_meth_set_create(m, [](BIO* bio) {
      BIO_set_init(bio, 1);
      return 1;
    });
    return m;
  }();
  return made;
}

}  // namespace

void BufferBio::Buffer::append(const std::byte* bytes, std::size_t n) {
  if (capacity - size < n) {
    const std::size_t grown = std::max(size + n, 2 * capacity);
    auto bigger = std::make_unique_for_overwrite<std::byte[]>(grown);
    if (size > 0) std::memcpy(bigger.get(), data.get(), size);
    data = std::move(bigger);
    capacity = grown;
  }
  std::memcpy(data.get() + size, bytes, n);
  size += n;
}

BIO* BufferBio::make_bio() {
  BIO_METHOD* m = method(&BufferBio::write, &BufferBio::read, &BufferBio::control);
  if (m == nullptr) return nullptr;
  BIO* bio = BIO_new(m);
  if (bio != nullptr) BIO_set_data(bio, this);
  return bio;
}

std::span<std::byte> BufferBio::input_space(std::size_t at_least) {
  const std::size_t unread = input_end_ - input_begin_;
  if (input_begin_ > 0) {
    // What is left is part of one record: a short move.
    if (unread > 0) std::memmove(input_.get(), input_.get() + input_begin_, unread);
    input_begin_ = 0;
    input_end_ = unread;
  }
  if (input_capacity_ - input_end_ < at_least) {
    const std::size_t grown = input_end_ + at_least;
    auto bigger = std::make_unique_for_overwrite<std::byte[]>(grown);
    if (unread > 0) std::memcpy(bigger.get(), input_.get(), unread);
    input_ = std::move(bigger);
    input_capacity_ = grown;
  }
  return {input_.get() + input_end_, input_capacity_ - input_end_};
}

std::span<const std::byte> BufferBio::take_output() noexcept {
  sending_.size = 0;
  std::swap(pending_, sending_);
  return {sending_.data.get(), sending_.size};
}

int BufferBio::write(BIO* bio, const char* data, std::size_t length, std::size_t* written) {
  auto* self = static_cast<BufferBio*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  std::size_t sent = 0;
  if (self->direct_fd_ >= 0 && self->pending_.size == 0) {
    // A socket error leaves everything pending: the flush that sends it reports the error.
    Result<std::size_t> taken = io::try_send(self->direct_fd_, {bytes, length});
    if (taken) sent = *taken;
    // One send per window: if this SSL_write seals more records (a peer that asked for smaller
    // fragments, a key update first), they gather in the output for one socket write.
    self->direct_fd_ = -1;
  }
  if (sent < length) self->pending_.append(bytes + sent, length - sent);
  *written = length;
  return 1;
}

int BufferBio::read(BIO* bio, char* data, std::size_t length, std::size_t* got) {
  auto* self = static_cast<BufferBio*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const std::size_t available = self->input_end_ - self->input_begin_;
  if (available == 0) {
    *got = 0;
    if (!self->eof_) BIO_set_retry_read(bio);  // the stream fills the input and retries
    return 0;
  }
  const std::size_t n = std::min(length, available);
  std::memcpy(data, self->input_.get() + self->input_begin_, n);
  self->input_begin_ += n;
  *got = n;
  return 1;
}

long BufferBio::control(BIO* bio, int command, long, void*) {
  auto* self = static_cast<BufferBio*>(BIO_get_data(bio));
  switch (command) {
    case BIO_CTRL_PENDING:
      return static_cast<long>(self->input_pending());
    case BIO_CTRL_WPENDING:
      return static_cast<long>(self->output_pending());
    case BIO_CTRL_EOF:
      return self->eof_ && self->input_pending() == 0 ? 1 : 0;
    case BIO_CTRL_FLUSH:
      return 1;  // the stream sends the output when the SSL call returns
    default:
      return 0;
  }
}

}  // namespace tern::tls::detail
