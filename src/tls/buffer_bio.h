#pragma once

#include <openssl/bio.h>

#include <cstddef>
#include <memory>
#include <span>

namespace tern::tls::detail {

// The ciphertext between an SSL object and its socket, in buffers the stream reads from and
// writes to the socket in place: OpenSSL copies records in and out of them once, and nothing
// is zeroed (a memory BIO copies twice and clears what it grows into). Never waits: when the
// input runs dry OpenSSL sees a retryable read. Owner worker only; must outlive its BIO.
class BufferBio {
 public:
  BufferBio() = default;
  BufferBio(const BufferBio&) = delete;
  BufferBio& operator=(const BufferBio&) = delete;

  // A new BIO over this object, to hand to SSL_set_bio (which owns it); null if out of memory.
  BIO* make_bio();

  // Free space at the end of the input, at least `at_least` bytes, for a socket read; the
  // unread bytes are moved to the front first.
  std::span<std::byte> input_space(std::size_t at_least);
  // Appends the first n bytes of the last input_space() to the input.
  void input_added(std::size_t n) noexcept { input_end_ += n; }
  // The socket reached end of stream: OpenSSL reads EOF once the input is used up.
  void set_eof() noexcept { eof_ = true; }
  // Ciphertext received and not yet read by OpenSSL.
  std::size_t input_pending() const noexcept { return input_end_ - input_begin_; }

  // Ciphertext OpenSSL wrote and no one took yet.
  std::size_t output_pending() const noexcept { return pending_.size; }
  // Takes the pending output to send; OpenSSL may write more meanwhile (into another buffer).
  // Valid until the next take_output().
  std::span<const std::byte> take_output() noexcept;
  // Until the next write OpenSSL makes, if no output is pending, it goes straight from OpenSSL's
  // buffer to the socket fd (one send that never waits), and only what the socket did not take
  // (or all of it, after a socket error the next flush reports) is kept as pending output; later
  // writes are kept as usual (-1: no direct send). The caller holds the stream's write turn, so
  // no other send of fd is in flight.
  void send_directly(int fd) noexcept { direct_fd_ = fd; }

 private:
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    std::size_t capacity = 0;
    std::size_t size = 0;
    void append(const std::byte* bytes, std::size_t n);
  };
  static int write(BIO* bio, const char* data, std::size_t length, std::size_t* written);
  static int read(BIO* bio, char* data, std::size_t length, std::size_t* got);
  static long control(BIO* bio, int command, long number, void* pointer);

  std::unique_ptr<std::byte[]> input_;
  std::size_t input_capacity_ = 0;
  std::size_t input_begin_ = 0;
  std::size_t input_end_ = 0;
  bool eof_ = false;
  int direct_fd_ = -1;  // send_directly()
  Buffer pending_;      // written by OpenSSL
  Buffer sending_;      // handed to the socket by take_output()
};

}  // namespace tern::tls::detail
