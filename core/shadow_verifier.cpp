// The shadow verifier: sampled full re-tokenization on the generic path,
// compared with what the fast path produced.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include <xxhash.h>

#include "core/core.h"
#include "core/tokenizer_impl.h"

namespace toktier::core {

struct ShadowVerifier::Impl {
  struct Sample {
    std::shared_ptr<const Tokenizer> tokenizer;
    std::string text;
    bool add_special = false;
    std::vector<uint32_t> ids;
  };

  ShadowOptions options;
  Sink sink;
  mutable std::mutex mu;
  std::condition_variable cv, idle_cv;
  std::deque<Sample> queue;
  size_t busy = 0;
  bool stopping = false;
  std::vector<std::thread> threads;
  std::set<std::string, std::less<>> quarantined;
  std::atomic<bool> any_quarantined{false};
  std::atomic<uint64_t> sequence{0};
  std::atomic<uint64_t> submitted{0}, dropped{0}, checked{0}, mismatches{0};

  void Run() {
    for (;;) {
      Sample s;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (stopping) return;
        s = std::move(queue.front());
        queue.pop_front();
        ++busy;
      }
      Check(s);
      {
        std::lock_guard<std::mutex> lock(mu);
        --busy;
      }
      idle_cv.notify_all();
    }
  }

  void Check(const Sample& s) {
    std::vector<uint32_t> want;
    ShadowEvent ev;
    try {
      s.tokenizer->impl().EncodeFull(s.text, s.add_special, TokenizerImpl::Path::kGeneric, {want});
    } catch (const std::exception&) {
      // The regex engine gave up (resource limits): no verdict either way.
      ev.version_hash = s.tokenizer->version_hash();
      ev.text_bytes = s.text.size();
      ev.error = true;
      checked.fetch_add(1);
      if (sink) sink(ev);
      return;
    }
    ev.version_hash = s.tokenizer->version_hash();
    ev.text_hash = XXH3_64bits(s.text.data(), s.text.size());
    ev.text_bytes = s.text.size();
    ev.ids_compared = want.size();
    ev.match = want == s.ids;
    if (!ev.match) {
      size_t i = 0;
      while (i < want.size() && i < s.ids.size() && want[i] == s.ids[i]) ++i;
      ev.first_difference = i;
      mismatches.fetch_add(1);
      std::lock_guard<std::mutex> lock(mu);
      ev.quarantined_now = quarantined.insert(ev.version_hash).second;
      any_quarantined.store(true);
    }
    checked.fetch_add(1);
    if (sink) sink(ev);
  }
};

ShadowVerifier::ShadowVerifier(ShadowOptions options, Sink sink) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->sink = std::move(sink);
  int n = std::max(1, options.threads);
  for (int i = 0; i < n; ++i) impl_->threads.emplace_back([this] { impl_->Run(); });
}

ShadowVerifier::~ShadowVerifier() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  for (auto& t : impl_->threads) t.join();
}

ShadowSubmit ShadowVerifier::MaybeSubmit(const std::shared_ptr<const Tokenizer>& tokenizer, std::string_view text,
                                         bool add_special_tokens, const std::vector<uint32_t>& ids) {
  double rate = impl_->options.sample_rate;
  if (rate <= 0) return ShadowSubmit::kNotSampled;
  if (rate < 1) {
    // A hashed sequence number: evenly spread, no shared RNG state.
    uint64_t n = impl_->sequence.fetch_add(1, std::memory_order_relaxed);
    uint64_t h = XXH3_64bits(&n, sizeof n);
    if (static_cast<double>(h >> 11) * 0x1.0p-53 >= rate) return ShadowSubmit::kNotSampled;
  }
  return Submit(tokenizer, text, add_special_tokens, ids);
}

ShadowSubmit ShadowVerifier::Submit(const std::shared_ptr<const Tokenizer>& tokenizer, std::string_view text,
                                    bool add_special_tokens, const std::vector<uint32_t>& ids) {
  if (IsQuarantined(tokenizer->version_hash())) return ShadowSubmit::kQuarantined;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->queue.size() >= impl_->options.queue_capacity) {
      impl_->dropped.fetch_add(1);
      return ShadowSubmit::kDropped;
    }
    impl_->queue.push_back(Impl::Sample{tokenizer, std::string(text), add_special_tokens, ids});
  }
  impl_->submitted.fetch_add(1);
  impl_->cv.notify_one();
  return ShadowSubmit::kQueued;
}

bool ShadowVerifier::IsQuarantined(std::string_view version_hash) const {
  if (!impl_->any_quarantined.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->quarantined.find(version_hash) != impl_->quarantined.end();
}

void ShadowVerifier::Drain() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->idle_cv.wait(lock, [&] { return impl_->queue.empty() && impl_->busy == 0; });
}

ShadowVerifier::Counters ShadowVerifier::counters() const {
  return Counters{impl_->submitted.load(), impl_->dropped.load(), impl_->checked.load(), impl_->mismatches.load()};
}

}  // namespace toktier::core
