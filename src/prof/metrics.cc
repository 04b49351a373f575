// The metrics registry: registered families, read-time callbacks, and the bridge that exports
// every listed tern::prof counter and timer.
#include "tern/prof/metrics.h"

#include <chrono>
#include <limits>
#include <mutex>

#include "tern/base/assert.h"

namespace tern::prof {

namespace {

const std::chrono::steady_clock::time_point process_start = std::chrono::steady_clock::now();

// A read-time callback; `mutex` is held while it runs, so unregistering waits for the call.
struct Callback {
  std::mutex mutex;
  bool alive = true;
  std::function<void(std::vector<Family>&)> collect;
};

// One labelled series of a registered family.
struct Child {
  Labels labels;
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Gauge> gauge;
  std::unique_ptr<Distribution> distribution;
};

struct FamilyEntry {
  std::string name;
  std::string help;
  MetricKind kind;
  double unit = 1.0;
  std::vector<std::unique_ptr<Child>> children;
};

std::string series_key(std::string_view name, const Labels& labels) {
  std::string key(name);
  for (const Label& label : labels) {
    key += '\x1f';
    key += label.name;
    key += '=';
    key += label.value;
  }
  return key;
}

bool name_char(char c, bool first, bool colon) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  if (colon && c == ':') return true;
  return !first && c >= '0' && c <= '9';
}

// "log.written" -> "tern_log_written".
std::string bridged_name(std::string_view name) {
  std::string out = "tern_";
  for (char c : name) out += name_char(c, false, true) ? c : '_';
  return out;
}

Series histogram_series(const Labels& labels, const Distribution& distribution, double unit) {
  const Distribution::Reading reading = distribution.read();
  Series series;
  series.labels = labels;
  std::uint64_t cumulative = 0;
  const std::vector<std::uint64_t>& bounds = distribution.bounds();
  for (std::size_t i = 0; i < reading.counts.size(); ++i) {
    cumulative += reading.counts[i];
    const double upper = i < bounds.size() ? static_cast<double>(bounds[i]) * unit
                                           : std::numeric_limits<double>::infinity();
    series.buckets.emplace_back(upper, cumulative);
  }
  series.sum = static_cast<double>(reading.sum) * unit;
  series.count = cumulative;
  return series;
}

void add_series(Family& into, Series series) {
  for (Series& existing : into.series) {
    if (existing.labels != series.labels) continue;
    existing.value += series.value;
    existing.sum += series.sum;
    existing.count += series.count;
    if (existing.buckets.size() == series.buckets.size()) {
      for (std::size_t i = 0; i < series.buckets.size(); ++i)
        existing.buckets[i].second += series.buckets[i].second;
    }
    return;
  }
  into.series.push_back(std::move(series));
}

// Merges families of the same name (the first kind wins) and drops empty ones.
std::vector<Family> merge(std::vector<Family> families) {
  std::vector<Family> merged;
  for (Family& family : families) {
    auto same = std::find_if(merged.begin(), merged.end(),
                             [&](const Family& f) { return f.name == family.name; });
    if (same == merged.end()) {
      merged.push_back(Family{family.name, family.help, family.kind, {}});
      same = merged.end() - 1;
    }
    if (same->kind != family.kind) continue;
    for (Series& series : family.series) add_series(*same, std::move(series));
  }
  std::erase_if(merged, [](const Family& f) { return f.series.empty(); });
  return merged;
}

void bridge_prof(std::vector<Family>& out) {
  for (const Sample& sample : snapshot()) {
    const std::string base = bridged_name(sample.name);
    if (!sample.is_timer) {
      Family family;
      family.name = base.ends_with("_total") ? base : base + "_total";
      family.help = sample.help.empty() ? "tern::prof counter " + sample.name : sample.help;
      family.kind = MetricKind::counter;
      family.series.push_back(Series{.value = static_cast<double>(sample.value)});
      out.push_back(std::move(family));
      continue;
    }
    Family summary;
    summary.name = base + "_seconds";
    summary.help = sample.help.empty() ? "tern::prof timer " + sample.name : sample.help;
    summary.kind = MetricKind::summary;
    summary.series.push_back(Series{.sum = static_cast<double>(sample.timer.total_ns) * 1e-9,
                                    .count = sample.timer.count});
    out.push_back(std::move(summary));
    Family max;
    max.name = base + "_max_seconds";
    max.help = "Longest single duration of tern::prof timer " + sample.name;
    max.kind = MetricKind::gauge;
    max.series.push_back(Series{.value = static_cast<double>(sample.timer.max_ns) * 1e-9});
    out.push_back(std::move(max));
  }
}

}  // namespace

struct MetricsRegistry::State {
  mutable std::mutex mutex;
  std::vector<std::unique_ptr<FamilyEntry>> families;
  std::uint64_t next_id = 1;
  std::vector<std::pair<std::uint64_t, std::shared_ptr<Callback>>> callbacks;

  // The child of family `name` with `labels`, created (with its family) if new.
  Child& child(std::string_view name, std::string_view help, MetricKind kind, double unit,
               Labels& labels) {
    TERN_ASSERT(valid_metric_name(name), "tern::prof::MetricsRegistry: invalid metric name");
    TERN_ASSERT(kind != MetricKind::counter || name.ends_with("_total"),
                "tern::prof::MetricsRegistry: a counter's name must end in _total");
    for (const Label& label : labels)
      TERN_ASSERT(valid_label_name(label.name), "tern::prof::MetricsRegistry: invalid label");
    auto found = std::find_if(families.begin(), families.end(),
                              [&](const auto& f) { return f->name == name; });
    if (found == families.end()) {
      auto entry = std::make_unique<FamilyEntry>();
      entry->name = std::string(name);
      entry->help = std::string(help);
      entry->kind = kind;
      entry->unit = unit;
      families.push_back(std::move(entry));
      found = families.end() - 1;
    }
    FamilyEntry& family = **found;
    TERN_ASSERT(family.kind == kind,
                "tern::prof::MetricsRegistry: a metric name registered with two kinds");
    for (auto& existing : family.children)
      if (existing->labels == labels) return *existing;
    family.children.push_back(std::make_unique<Child>());
    family.children.back()->labels = std::move(labels);
    return *family.children.back();
  }
};

MetricsRegistry::MetricsRegistry() : state_(std::make_unique<State>()) {}
MetricsRegistry::~MetricsRegistry() = default;

MetricsRegistry& MetricsRegistry::global() {
  static MetricsRegistry* instance = new MetricsRegistry;  // never destroyed: used at exit
  return *instance;
}

Counter& MetricsRegistry::counter(std::string_view name, std::string_view help, Labels labels) {
  std::lock_guard lock(state_->mutex);
  Child& child = state_->child(name, help, MetricKind::counter, 1.0, labels);
  if (!child.counter)
    child.counter = std::make_unique<Counter>(detail::Unlisted{}, series_key(name, labels));
  return *child.counter;
}

Gauge& MetricsRegistry::gauge(std::string_view name, std::string_view help, Labels labels) {
  std::lock_guard lock(state_->mutex);
  Child& child = state_->child(name, help, MetricKind::gauge, 1.0, labels);
  if (!child.gauge) child.gauge = std::make_unique<Gauge>();
  return *child.gauge;
}

Distribution& MetricsRegistry::distribution(std::string_view name, std::string_view help,
                                            std::vector<std::uint64_t> bounds, double unit,
                                            Labels labels) {
  std::lock_guard lock(state_->mutex);
  Child& child = state_->child(name, help, MetricKind::histogram, unit, labels);
  if (!child.distribution) child.distribution = std::make_unique<Distribution>(std::move(bounds));
  return *child.distribution;
}

Registration MetricsRegistry::gauge_callback(std::string_view name, std::string_view help,
                                             Labels labels, std::function<double()> read) {
  TERN_ASSERT(valid_metric_name(name), "tern::prof::MetricsRegistry: invalid metric name");
  for (const Label& label : labels)
    TERN_ASSERT(valid_label_name(label.name), "tern::prof::MetricsRegistry: invalid label");
  return collector([name = std::string(name), help = std::string(help), labels = std::move(labels),
                    read = std::move(read)](std::vector<Family>& out) {
    out.push_back(
        Family{name, help, MetricKind::gauge, {Series{.labels = labels, .value = read()}}});
  });
}

Registration MetricsRegistry::collector(std::function<void(std::vector<Family>&)> collect) {
  auto callback = std::make_shared<Callback>();
  callback->collect = std::move(collect);
  std::lock_guard lock(state_->mutex);
  const std::uint64_t id = state_->next_id++;
  state_->callbacks.emplace_back(id, std::move(callback));
  return Registration(id);
}

void MetricsRegistry::unregister(std::uint64_t id) noexcept {
  std::shared_ptr<Callback> callback;
  {
    std::lock_guard lock(state_->mutex);
    auto found = std::find_if(state_->callbacks.begin(), state_->callbacks.end(),
                              [id](const auto& entry) { return entry.first == id; });
    if (found == state_->callbacks.end()) return;
    callback = std::move(found->second);
    state_->callbacks.erase(found);
  }
  std::lock_guard lock(callback->mutex);  // waits for a call in progress
  callback->alive = false;
}

std::vector<Family> MetricsRegistry::collect() const {
  std::vector<Family> out;
  std::vector<std::shared_ptr<Callback>> callbacks;
  {
    std::lock_guard lock(state_->mutex);
    for (const auto& entry : state_->families) {
      // Counters and histograms record nothing when tern::prof is compiled out: leave them out
      // rather than show zeros.
      if (!TERN_PROF_ENABLED && entry->kind != MetricKind::gauge) continue;
      Family family{entry->name, entry->help, entry->kind, {}};
      for (const auto& child : entry->children) {
        if (child->counter) {
          family.series.push_back(Series{.labels = child->labels,
                                         .value = static_cast<double>(child->counter->value())});
        } else if (child->gauge) {
          family.series.push_back(
              Series{.labels = child->labels, .value = static_cast<double>(child->gauge->value())});
        } else if (child->distribution) {
          family.series.push_back(
              histogram_series(child->labels, *child->distribution, entry->unit));
        }
      }
      out.push_back(std::move(family));
    }
    for (const auto& [id, callback] : state_->callbacks) callbacks.push_back(callback);
  }
  for (const std::shared_ptr<Callback>& callback : callbacks) {
    std::lock_guard lock(callback->mutex);
    if (callback->alive) callback->collect(out);
  }
  bridge_prof(out);
  return merge(std::move(out));
}

Registration& Registration::operator=(Registration&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void Registration::reset() noexcept {
  if (id_ != 0) MetricsRegistry::global().unregister(std::exchange(id_, 0));
}

Distribution::Distribution(std::vector<std::uint64_t> bounds) : bounds_(std::move(bounds)) {
  for (std::size_t i = 1; i < bounds_.size(); ++i)
    TERN_ASSERT(bounds_[i - 1] < bounds_[i],
                "tern::prof::Distribution: bounds must be strictly increasing");
#if TERN_PROF_ENABLED
  slot_ = detail::register_cells(bounds_.size() + 2);
#endif
}

Distribution::Reading Distribution::read() const {
  Reading reading;
  reading.counts.assign(bounds_.size() + 1, 0);
#if TERN_PROF_ENABLED
  std::vector<std::uint64_t> cells(bounds_.size() + 2);
  detail::read_cells(slot_, cells);
  std::copy(cells.begin(), cells.end() - 1, reading.counts.begin());
  reading.sum = cells.back();
#endif
  for (std::uint64_t n : reading.counts) reading.count += n;
  return reading;
}

bool valid_metric_name(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, true)) return false;
  return true;
}

bool valid_label_name(std::string_view name) noexcept {
  if (name.empty() || name.starts_with("__")) return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, false)) return false;
  return true;
}

double uptime_seconds() noexcept {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - process_start).count();
}

}  // namespace tern::prof
