#include <tern/prof/histogram.h>

#include <algorithm>
#include <bit>
#include <cmath>

namespace tern::prof {

Histogram::Histogram() : buckets_(kBucketCount, 0) {}

std::size_t Histogram::bucket_index(std::uint64_t value) noexcept {
  if (value < kSubBuckets) return static_cast<std::size_t>(value);
  // Values in [2^m, 2^(m+1)), m >= kSubBucketBits, share 32 buckets of width 2^(m - 5).
  const unsigned m = 63 - static_cast<unsigned>(std::countl_zero(value));
  const unsigned shift = m - kSubBucketBits;
  const std::size_t sub = static_cast<std::size_t>(value >> shift) - kSubBuckets;
  return (m - kSubBucketBits + 1) * kSubBuckets + sub;
}

std::uint64_t Histogram::bucket_lower(std::size_t index) noexcept {
  if (index < kSubBuckets) return index;
  const std::size_t octave = index / kSubBuckets;  // m - kSubBucketBits + 1
  const std::size_t sub = index % kSubBuckets;
  return static_cast<std::uint64_t>(kSubBuckets + sub) << (octave - 1);
}

std::uint64_t Histogram::bucket_upper(std::size_t index) noexcept {
  if (index < kSubBuckets) return index;
  const std::size_t octave = index / kSubBuckets;
  return bucket_lower(index) + ((std::uint64_t{1} << (octave - 1)) - 1);
}

void Histogram::record(std::uint64_t value, std::uint64_t times) noexcept {
  if (times == 0) return;
  buckets_[bucket_index(value)] += times;
  count_ += times;
  sum_ += value * times;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
}

void Histogram::merge(const Histogram& other) noexcept {
  if (other.count_ == 0) return;
  for (std::size_t i = 0; i < kBucketCount; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

void Histogram::reset() noexcept {
  std::fill(buckets_.begin(), buckets_.end(), 0);
  count_ = 0;
  sum_ = 0;
  min_ = UINT64_MAX;
  max_ = 0;
}

double Histogram::mean() const noexcept {
  return count_ == 0 ? 0.0 : static_cast<double>(sum_) / static_cast<double>(count_);
}

std::uint64_t Histogram::percentile(double p) const noexcept {
  if (count_ == 0) return 0;
  const double clamped = std::clamp(p, 0.0, 100.0);
  auto rank = static_cast<std::uint64_t>(std::ceil(clamped / 100.0 * static_cast<double>(count_)));
  rank = std::clamp<std::uint64_t>(rank, 1, count_);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBucketCount; ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::clamp(bucket_upper(i), min(), max_);
  }
  return max_;
}

}  // namespace tern::prof
