#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tern::prof {

// A log-linear histogram of unsigned values (latencies in ns, sizes in bytes): each power of two
// is split into 32 equal buckets, so a bucket is at most 1/32 (3.1%) of its values wide, over the
// whole uint64 range, in 1920 buckets. One writer at a time: use one per thread and merge() them.
class Histogram {
 public:
  static constexpr unsigned kSubBucketBits = 5;
  static constexpr std::size_t kSubBuckets = std::size_t{1} << kSubBucketBits;
  static constexpr std::size_t kBucketCount = (64 - kSubBucketBits + 1) * kSubBuckets;

  // An empty histogram. Any thread.
  Histogram();

  // Counts `value` once (or `times` times). The owning thread.
  void record(std::uint64_t value) noexcept { record(value, 1); }
  void record(std::uint64_t value, std::uint64_t times) noexcept;
  // Adds every count of `other` into this one. The owning thread; `other` must not be written
  // meanwhile.
  void merge(const Histogram& other) noexcept;
  // Forgets every value. The owning thread.
  void reset() noexcept;

  // Number of values recorded, their sum, smallest and largest (0 when empty).
  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t sum() const noexcept { return sum_; }
  std::uint64_t min() const noexcept { return count_ == 0 ? 0 : min_; }
  std::uint64_t max() const noexcept { return max_; }
  // The mean value (0 when empty).
  double mean() const noexcept;
  // The value at percentile `p` (0..100): the upper bound of the bucket holding that rank,
  // clamped to [min(), max()], so p=100 is max() exactly and the error is under 3.2%.
  std::uint64_t percentile(double p) const noexcept;

  // How many values fell into bucket `index` (< kBucketCount).
  std::uint64_t bucket(std::size_t index) const noexcept { return buckets_[index]; }
  // The bucket a value falls into, and the smallest and largest value of a bucket.
  static std::size_t bucket_index(std::uint64_t value) noexcept;
  static std::uint64_t bucket_lower(std::size_t index) noexcept;
  static std::uint64_t bucket_upper(std::size_t index) noexcept;

 private:
  std::vector<std::uint64_t> buckets_;
  std::uint64_t count_ = 0;
  std::uint64_t sum_ = 0;
  std::uint64_t min_ = UINT64_MAX;
  std::uint64_t max_ = 0;
};

}  // namespace tern::prof
