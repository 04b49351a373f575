// tern::prof::Histogram: bucket layout, statistics, percentiles and merging.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tern/prof/histogram.h"

namespace {

using tern::prof::Histogram;

TEST(Histogram, SmallValuesHaveTheirOwnBucket) {
  for (std::uint64_t v = 0; v < Histogram::kSubBuckets; ++v) {
    EXPECT_EQ(Histogram::bucket_index(v), v);
    EXPECT_EQ(Histogram::bucket_lower(v), v);
    EXPECT_EQ(Histogram::bucket_upper(v), v);
  }
}

TEST(Histogram, BucketsTileTheWholeRangeWithoutGaps) {
  for (std::size_t i = 1; i < Histogram::kBucketCount; ++i) {
    ASSERT_EQ(Histogram::bucket_lower(i), Histogram::bucket_upper(i - 1) + 1) << "bucket " << i;
  }
  EXPECT_EQ(Histogram::bucket_upper(Histogram::kBucketCount - 1), UINT64_MAX);
  EXPECT_EQ(Histogram::bucket_index(UINT64_MAX), Histogram::kBucketCount - 1);
}

TEST(Histogram, EveryValueFallsInsideItsBucketWithinThreePercent) {
  std::mt19937_64 random(42);
  for (int i = 0; i < 200000; ++i) {
    const std::uint64_t value = random() >> (random() % 64);
    const std::size_t index = Histogram::bucket_index(value);
    ASSERT_LE(Histogram::bucket_lower(index), value);
    ASSERT_GE(Histogram::bucket_upper(index), value);
    const double width =
        static_cast<double>(Histogram::bucket_upper(index) - Histogram::bucket_lower(index));
    ASSERT_LE(width, static_cast<double>(value) / 32.0) << value;
  }
}

TEST(Histogram, CountsSumMinMaxMean) {
  Histogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.percentile(50), 0u);
  h.record(10);
  h.record(1000, 3);
  h.record(7);
  EXPECT_EQ(h.count(), 5u);
  EXPECT_EQ(h.sum(), 3017u);
  EXPECT_EQ(h.min(), 7u);
  EXPECT_EQ(h.max(), 1000u);
  EXPECT_DOUBLE_EQ(h.mean(), 3017.0 / 5.0);
  EXPECT_EQ(h.percentile(0), 7u);
  EXPECT_EQ(h.percentile(100), 1000u);
}

TEST(Histogram, PercentilesMatchSortedDataWithinBucketError) {
  std::mt19937_64 random(7);
  std::lognormal_distribution<double> latency(9.0, 1.2);  // ~8 us median, long tail
  std::vector<std::uint64_t> values;
  Histogram h;
  for (int i = 0; i < 100000; ++i) {
    const auto v = static_cast<std::uint64_t>(latency(random));
    values.push_back(v);
    h.record(v);
  }
  std::sort(values.begin(), values.end());
  for (double p : {1.0, 50.0, 90.0, 99.0, 99.9}) {
    const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * values.size())) - 1;
    const double exact = static_cast<double>(values[rank]);
    const double estimate = static_cast<double>(h.percentile(p));
    EXPECT_GE(estimate, exact) << "p" << p;
    EXPECT_LE(estimate, exact * 1.032 + 1) << "p" << p;
  }
  EXPECT_EQ(h.percentile(100), values.back());
}

TEST(Histogram, MergeEqualsRecordingEverythingInOne) {
  Histogram a, b, all;
  for (std::uint64_t v = 1; v < 5000; v += 3) {
    (v % 2 ? a : b).record(v * 17);
    all.record(v * 17);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.sum(), all.sum());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  for (std::size_t i = 0; i < Histogram::kBucketCount; ++i) ASSERT_EQ(a.bucket(i), all.bucket(i));
  a.reset();
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(a.max(), 0u);
  EXPECT_EQ(a.percentile(99), 0u);
}

}  // namespace
