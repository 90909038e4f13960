#include "metrics/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <array>
#include <cassert>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

namespace toktier::metrics {
namespace {

constexpr MetricInfo kInfos[] = {
#define TOKTIER_METRIC_INFO(id, kind, name, labels, help) {Id::id, Kind::kind, name, labels, help},
    TOKTIER_METRICS(TOKTIER_METRIC_INFO)
#undef TOKTIER_METRIC_INFO
};
static_assert(sizeof(kInfos) / sizeof(kInfos[0]) == kMetricCount);

std::vector<std::string> SplitLabels(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    size_t c = s.find(',');
    out.emplace_back(s.substr(0, c));
    if (c == std::string_view::npos) break;
    s.remove_prefix(c + 1);
  }
  return out;
}

// Latency buckets: 25 us .. 10 s, roughly x2.5 per step. Never destroyed: a
// thread that records a first histogram series while the process exits must
// not read a freed list.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10};
  return *b;
}

}  // namespace

const MetricInfo& Info(Id id) {
  assert(static_cast<size_t>(id) < kMetricCount);
  return kInfos[static_cast<size_t>(id)];
}

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::array<void*, kMetricCount> families{};
  std::array<std::vector<std::string>, kMetricCount> label_names;
  std::mutex sync_mu;
  std::array<double, kMetricCount> synced{};

  prometheus::Labels MakeLabels(Id id, std::initializer_list<std::string_view> values) const {
    const auto& names = label_names[static_cast<size_t>(id)];
    assert(values.size() <= names.size());
    prometheus::Labels labels;
    size_t i = 0;
    for (auto v : values) {
      if (i >= names.size()) break;
      labels.emplace(names[i++], std::string(v));
    }
    for (; i < names.size(); ++i) labels.emplace(names[i], "");
    return labels;
  }
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {
  for (const MetricInfo& m : kInfos) {
    size_t i = static_cast<size_t>(m.id);
    impl_->label_names[i] = SplitLabels(m.labels);
    switch (m.kind) {
      case Kind::Counter:
        impl_->families[i] = &prometheus::BuildCounter().Name(std::string(m.name)).Help(std::string(m.help)).Register(
            *impl_->registry);
        break;
      case Kind::Gauge:
        impl_->families[i] =
            &prometheus::BuildGauge().Name(std::string(m.name)).Help(std::string(m.help)).Register(*impl_->registry);
        break;
      case Kind::Histogram:
        impl_->families[i] = &prometheus::BuildHistogram()
                                  .Name(std::string(m.name))
                                  .Help(std::string(m.help))
                                  .Register(*impl_->registry);
        break;
    }
  }
  // Series without labels exist from the start at 0: a counter born at its
  // first event would hide that event from rate()/increase() (they need two
  // samples), so alerts on e.g. store write failures would miss the first.
  for (const MetricInfo& m : kInfos) {
    if (!m.labels.empty()) continue;
    switch (m.kind) {
      case Kind::Counter: counter(m.id); break;
      case Kind::Gauge: gauge(m.id); break;
      case Kind::Histogram: histogram(m.id); break;
    }
  }
}

Metrics::~Metrics() = default;

Counter Metrics::counter(Id id, std::initializer_list<std::string_view> values) {
  assert(Info(id).kind == Kind::Counter);
  auto* fam = static_cast<prometheus::Family<prometheus::Counter>*>(impl_->families[static_cast<size_t>(id)]);
  return Counter(&fam->Add(impl_->MakeLabels(id, values)));
}

Gauge Metrics::gauge(Id id, std::initializer_list<std::string_view> values) {
  assert(Info(id).kind == Kind::Gauge);
  auto* fam = static_cast<prometheus::Family<prometheus::Gauge>*>(impl_->families[static_cast<size_t>(id)]);
  return Gauge(&fam->Add(impl_->MakeLabels(id, values)));
}

Histogram Metrics::histogram(Id id, std::initializer_list<std::string_view> values) {
  assert(Info(id).kind == Kind::Histogram);
  auto* fam = static_cast<prometheus::Family<prometheus::Histogram>*>(impl_->families[static_cast<size_t>(id)]);
  return Histogram(&fam->Add(impl_->MakeLabels(id, values), LatencyBuckets()));
}

void Metrics::SyncCounter(Id id, double absolute_value) {
  std::lock_guard<std::mutex> lock(impl_->sync_mu);
  double& last = impl_->synced[static_cast<size_t>(id)];
  if (absolute_value > last) {
    counter(id).Inc(absolute_value - last);
    last = absolute_value;
  }
}

std::string Metrics::Serialize() const {
  prometheus::TextSerializer ser;
  std::ostringstream out;
  ser.Serialize(out, impl_->registry->Collect());
  return out.str();
}

void Counter::Inc(double v) const {
  if (c_) c_->Increment(v);
}
double Counter::Value() const { return c_ ? c_->Value() : 0.0; }
void Gauge::Set(double v) const {
  if (g_) g_->Set(v);
}
void Gauge::Inc(double v) const {
  if (g_) g_->Increment(v);
}
double Gauge::Value() const { return g_ ? g_->Value() : 0.0; }
void Histogram::Observe(double v) const {
  if (h_) h_->Observe(v);
}
uint64_t Histogram::Count() const { return h_ ? h_->Collect().histogram.sample_count : 0; }
double Histogram::Sum() const { return h_ ? h_->Collect().histogram.sample_sum : 0.0; }

}  // namespace toktier::metrics
