// tern::prof's metrics registry: counters, gauges and histograms summed over threads, callbacks,
// the export of plain prof counters and timers, and the Prometheus text they render to.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tern/prof/counter.h"
#include "tern/prof/metrics.h"
#include "tern/prof/prometheus.h"

namespace {

using tern::prof::Family;
using tern::prof::MetricKind;
using tern::prof::MetricsRegistry;
using tern::prof::Series;

MetricsRegistry& registry() { return MetricsRegistry::global(); }

const Family* find(const std::vector<Family>& families, std::string_view name) {
  auto found = std::find_if(families.begin(), families.end(),
                            [&](const Family& f) { return f.name == name; });
  return found == families.end() ? nullptr : &*found;
}

// The family `name` as the registry reads it now (a copy), or nothing.
std::optional<Family> read_family(std::string_view name) {
  const std::vector<Family> families = registry().collect();
  const Family* family = find(families, name);
  if (family == nullptr) return std::nullopt;
  return *family;
}

const Series* find_series(const Family& family, std::string_view label, std::string_view value) {
  for (const Series& series : family.series)
    for (const tern::prof::Label& l : series.labels)
      if (l.name == label && l.value == value) return &series;
  return nullptr;
}

TEST(Gauge, SetAndAddFromManyThreads) {
  tern::prof::Gauge& gauge = registry().gauge("test_gauge_threads", "a test gauge");
  gauge.set(10);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&gauge] {
      for (int i = 0; i < 1000; ++i) gauge.add(1);
      for (int i = 0; i < 500; ++i) gauge.add(-1);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(gauge.value(), 10 + 4 * 500);
  const std::optional<Family> family = read_family("test_gauge_threads");
  ASSERT_TRUE(family.has_value());
  EXPECT_EQ(family->kind, MetricKind::gauge);
  EXPECT_EQ(family->help, "a test gauge");
  ASSERT_EQ(family->series.size(), 1u);
  EXPECT_EQ(family->series[0].value, 2010.0);
}

TEST(Registry, SameNameAndLabelsIsTheSameMetric) {
  tern::prof::Gauge& a = registry().gauge("test_gauge_same", "h", {{"k", "1"}});
  tern::prof::Gauge& b = registry().gauge("test_gauge_same", "h", {{"k", "1"}});
  tern::prof::Gauge& c = registry().gauge("test_gauge_same", "h", {{"k", "2"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  a.set(3);
  c.set(4);
  const std::optional<Family> family = read_family("test_gauge_same");
  ASSERT_TRUE(family.has_value());
  ASSERT_EQ(family->series.size(), 2u);
  EXPECT_EQ(find_series(*family, "k", "1")->value, 3.0);
  EXPECT_EQ(find_series(*family, "k", "2")->value, 4.0);
}

TEST(Registry, NameRules) {
  EXPECT_TRUE(tern::prof::valid_metric_name("tern_x:y_1"));
  EXPECT_FALSE(tern::prof::valid_metric_name("1x"));
  EXPECT_FALSE(tern::prof::valid_metric_name("a-b"));
  EXPECT_FALSE(tern::prof::valid_metric_name(""));
  EXPECT_TRUE(tern::prof::valid_label_name("worker_1"));
  EXPECT_FALSE(tern::prof::valid_label_name("__reserved"));
  EXPECT_FALSE(tern::prof::valid_label_name("a:b"));
}

TEST(Registry, CallbackGaugeIsReadEachTimeAndGoesAwayWithItsRegistration) {
  double value = 1.5;
  tern::prof::Registration registration = registry().gauge_callback(
      "test_callback_gauge", "computed when read", {{"side", "left"}}, [&value] { return value; });
  const Family* family = nullptr;
  std::vector<Family> first = registry().collect();
  family = find(first, "test_callback_gauge");
  ASSERT_NE(family, nullptr);
  EXPECT_EQ(family->series.at(0).value, 1.5);
  value = 7;
  std::vector<Family> second = registry().collect();
  EXPECT_EQ(find(second, "test_callback_gauge")->series.at(0).value, 7.0);
  registration.reset();
  EXPECT_FALSE(read_family("test_callback_gauge").has_value());
}

TEST(Registry, CollectorFamiliesWithOneNameAreMergedAndEqualSeriesSummed) {
  auto make = [](double v, std::string label) {
    return [v, label](std::vector<Family>& out) {
      out.push_back(Family{"test_merged",
                           "merged",
                           MetricKind::gauge,
                           {Series{.labels = {{"w", label}}, .value = v}}});
    };
  };
  tern::prof::Registration a = registry().collector(make(1, "0"));
  tern::prof::Registration b = registry().collector(make(2, "0"));
  tern::prof::Registration c = registry().collector(make(5, "1"));
  const std::vector<Family> families = registry().collect();
  EXPECT_EQ(std::count_if(families.begin(), families.end(),
                          [](const Family& f) { return f.name == "test_merged"; }),
            1);
  const Family* family = find(families, "test_merged");
  ASSERT_NE(family, nullptr);
  ASSERT_EQ(family->series.size(), 2u);
  EXPECT_EQ(find_series(*family, "w", "0")->value, 3.0);
  EXPECT_EQ(find_series(*family, "w", "1")->value, 5.0);
}

TEST(Registry, UnregisteringWaitsForACallInProgress) {
  std::atomic<bool> inside{false};
  std::atomic<bool> release{false};
  std::atomic<bool> finished{false};
  tern::prof::Registration registration =
      registry().gauge_callback("test_slow_callback", "slow", {}, [&] {
        inside = true;
        while (!release) std::this_thread::yield();
        finished = true;
        return 1.0;
      });
  std::thread reader([] { (void)registry().collect(); });
  while (!inside) std::this_thread::yield();
  std::thread remover([&] { registration.reset(); });
  release = true;
  remover.join();
  EXPECT_TRUE(finished);  // reset() returned only after the call had ended
  reader.join();
}

#if TERN_PROF_ENABLED

TEST(Registry, CountersSumOverLiveAndExitedThreads) {
  tern::prof::Counter& counter =
      registry().counter("test_requests_total", "requests", {{"code", "200"}});
  counter.add(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&counter] {
      for (int i = 0; i < 2500; ++i) counter.add();
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter.value(), 10002u);
  const std::optional<Family> family = read_family("test_requests_total");
  ASSERT_TRUE(family.has_value());
  EXPECT_EQ(family->kind, MetricKind::counter);
  EXPECT_EQ(find_series(*family, "code", "200")->value, 10002.0);
  // The registry's counters are not exported a second time as plain prof counters.
  for (const tern::prof::Sample& sample : tern::prof::snapshot())
    EXPECT_EQ(sample.name.find("test_requests_total"), std::string::npos);
}

TEST(Distribution, CombinesEveryThreadsBuckets) {
  tern::prof::Distribution& latency = registry().distribution(
      "test_latency_seconds", "latency", {1000, 10000, 100000}, 1e-9, {{"op", "read"}});
  // Bounds are inclusive: 1000 falls in the first bucket, 1001 in the second.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&latency] {
      for (int i = 0; i < 100; ++i) {
        latency.record(1000);     // bucket 0
        latency.record(1001);     // bucket 1
        latency.record(100000);   // bucket 2
        latency.record(5000000);  // +Inf
      }
    });
  for (std::thread& t : threads) t.join();
  latency.record(0);
  const tern::prof::Distribution::Reading reading = latency.read();
  ASSERT_EQ(reading.counts.size(), 4u);
  EXPECT_EQ(reading.counts[0], 401u);
  EXPECT_EQ(reading.counts[1], 400u);
  EXPECT_EQ(reading.counts[2], 400u);
  EXPECT_EQ(reading.counts[3], 400u);
  EXPECT_EQ(reading.count, 1601u);
  EXPECT_EQ(reading.sum, 400u * (1000 + 1001 + 100000 + 5000000));

  const std::optional<Family> family = read_family("test_latency_seconds");
  ASSERT_TRUE(family.has_value());
  EXPECT_EQ(family->kind, MetricKind::histogram);
  const Series& series = family->series.at(0);
  ASSERT_EQ(series.buckets.size(), 4u);
  EXPECT_DOUBLE_EQ(series.buckets[0].first, 1e-6);
  EXPECT_EQ(series.buckets[0].second, 401u);
  EXPECT_EQ(series.buckets[1].second, 801u);  // cumulative
  EXPECT_EQ(series.buckets[2].second, 1201u);
  EXPECT_TRUE(std::isinf(series.buckets[3].first));
  EXPECT_EQ(series.buckets[3].second, 1601u);
  EXPECT_EQ(series.count, 1601u);
  EXPECT_NEAR(series.sum, 400.0 * (1000 + 1001 + 100000 + 5000000) * 1e-9, 1e-12);
}

TEST(Bridge, PlainProfCountersAndTimersAreExported) {
  static tern::prof::Counter counter("test.bridge.events", "Events the bridge test counted");
  static tern::prof::Timer timer("test.bridge.step");
  counter.add(41);
  counter.add();
  timer.record(2'000'000);
  timer.record(6'000'000);
  const std::vector<Family> families = registry().collect();
  const Family* events = find(families, "tern_test_bridge_events_total");
  ASSERT_NE(events, nullptr);
  EXPECT_EQ(events->kind, MetricKind::counter);
  EXPECT_EQ(events->help, "Events the bridge test counted");
  EXPECT_EQ(events->series.at(0).value, 42.0);
  const Family* step = find(families, "tern_test_bridge_step_seconds");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->kind, MetricKind::summary);
  EXPECT_EQ(step->series.at(0).count, 2u);
  EXPECT_NEAR(step->series.at(0).sum, 0.008, 1e-12);
  const Family* max = find(families, "tern_test_bridge_step_max_seconds");
  ASSERT_NE(max, nullptr);
  EXPECT_NEAR(max->series.at(0).value, 0.006, 1e-12);
}

#else

TEST(Registry, CompiledOutCountersAreLeftOut) {
  registry().counter("test_off_total", "off").add(3);
  EXPECT_FALSE(read_family("test_off_total").has_value());
}

#endif

TEST(Prometheus, RendersEveryKindInTheTextFormat) {
  std::vector<Family> families;
  families.push_back(Family{"req_total",
                            "Requests.\nSecond line with \\ backslash",
                            MetricKind::counter,
                            {Series{.labels = {{"path", "/a\"b\\c\nd"}}, .value = 3}}});
  families.push_back(Family{"temp",
                            "Temperature",
                            MetricKind::gauge,
                            {Series{.value = -1.5}, Series{.labels = {{"x", "y"}}, .value = 0}}});
  families.push_back(Family{
      "lat_seconds",
      "Latency",
      MetricKind::histogram,
      {Series{.labels = {{"op", "r"}},
              .buckets = {{0.001, 2}, {0.25, 5}, {std::numeric_limits<double>::infinity(), 6}},
              .sum = 1.75,
              .count = 6}}});
  families.push_back(
      Family{"phase_seconds", "Phase", MetricKind::summary, {Series{.sum = 0.5, .count = 10}}});
  const std::string text = tern::prof::to_prometheus_text(families);
  EXPECT_EQ(text,
            "# HELP req_total Requests.\\nSecond line with \\\\ backslash\n"
            "# TYPE req_total counter\n"
            "req_total{path=\"/a\\\"b\\\\c\\nd\"} 3\n"
            "# HELP temp Temperature\n"
            "# TYPE temp gauge\n"
            "temp -1.5\n"
            "temp{x=\"y\"} 0\n"
            "# HELP lat_seconds Latency\n"
            "# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{op=\"r\",le=\"0.001\"} 2\n"
            "lat_seconds_bucket{op=\"r\",le=\"0.25\"} 5\n"
            "lat_seconds_bucket{op=\"r\",le=\"+Inf\"} 6\n"
            "lat_seconds_sum{op=\"r\"} 1.75\n"
            "lat_seconds_count{op=\"r\"} 6\n"
            "# HELP phase_seconds Phase\n"
            "# TYPE phase_seconds summary\n"
            "phase_seconds_sum 0.5\n"
            "phase_seconds_count 10\n");
  EXPECT_EQ(tern::prof::kPrometheusContentType, "text/plain; version=0.0.4; charset=utf-8");
}

TEST(Prometheus, NonFiniteValues) {
  std::vector<Family> families{Family{
      "odd",
      "odd values",
      MetricKind::gauge,
      {Series{.labels = {{"v", "nan"}}, .value = std::nan("")},
       Series{.labels = {{"v", "inf"}}, .value = -std::numeric_limits<double>::infinity()}}}};
  EXPECT_EQ(tern::prof::to_prometheus_text(families),
            "# HELP odd odd values\n# TYPE odd gauge\nodd{v=\"nan\"} NaN\nodd{v=\"inf\"} -Inf\n");
}

}  // namespace
