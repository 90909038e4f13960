// Full tokenization on several threads: EncodePool (fork-join, the caller
// takes part, workers woken together) and TokenizerImpl::EncodeFull, which
// cuts a long text into work items (PlanWork: added tokens, then chunks cut
// at content boundaries) and encodes contiguous groups of them in parallel.
// Each group's output is what the one-thread loop would append for those
// items, so concatenating the groups gives the one-thread result exactly.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/tokenizer_impl.h"

namespace toktier::core {
namespace {

// Work items (chunks) per pool thread, for texts under kChunkBytes per item:
// the last groups are single items, so an item's time bounds how unevenly
// the threads finish (8 KiB items at 1 MB on 2 threads: 1.62-1.70x paired
// speedup where 32 KiB items gave 1.55-1.61x, with a slower worker core).
// Under a normalizer each cut is tested on a normalized window (about 1 us
// on the caller, before the threads start), so items stay at kChunkBytes
// there: 8 KiB items cost Qwen3 0.12 ms more planning at 1 MB than they won.
constexpr size_t kItemsPerThread = 64;

// Contiguous groups of items, claimed in order by whichever thread is free,
// whose sizes shrink as the text is used up: each takes 1/(kGuide * threads)
// of the bytes still left (at least one item). The first groups are large
// (few claims, few output vectors to concatenate); the last are single
// items, so the threads finish within about an item of each other (equal
// groups left one thread idle for up to a whole group at the end).
constexpr size_t kGuide = 2;

void GuidedGroups(const std::vector<TokenizerImpl::WorkItem>& items, size_t threads,
                  std::vector<size_t>& group_begin) {
  group_begin.assign(1, 0);
  size_t left = 0;
  for (const TokenizerImpl::WorkItem& w : items) left += w.end - w.begin;
  size_t bytes = 0;
  size_t target = left / (kGuide * threads);
  for (size_t i = 0; i + 1 < items.size(); ++i) {
    bytes += items[i].end - items[i].begin;
    if (bytes >= target) {
      group_begin.push_back(i + 1);
      left -= bytes;
      bytes = 0;
      target = left / (kGuide * threads);
    }
  }
  group_begin.push_back(items.size());
}

// How long the caller, out of tasks, spins for the last groups in flight
// before it sleeps: the tail is about one item, far shorter than a sleeping
// thread takes to be woken on a VM (0.1-0.3 ms measured, as long as the whole
// tail); past this a descheduled worker is waited for on the condition.
constexpr auto kCallerSpin = std::chrono::microseconds(500);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

struct EncodePool::Impl {
  std::mutex run_mu;  // one Run at a time
  std::mutex mu;
  std::condition_variable wake, done;
  uint64_t generation = 0;
  const std::function<void(size_t)>* task = nullptr;  // null between runs
  size_t tasks = 0;
  size_t next = 0;  // next task index to claim
  // Written under mu; atomic so that the caller can spin on them unlocked.
  std::atomic<size_t> finished{0};  // tasks completed
  std::atomic<int> participants{0};  // workers inside the current run
  bool stopping = false;
  std::vector<std::thread> workers;

  // Claims and runs tasks of the current run until none is left.
  void Drain(std::unique_lock<std::mutex>& lock, const std::function<void(size_t)>* fn, size_t n) {
    while (next < n) {
      const size_t i = next++;
      lock.unlock();
      (*fn)(i);
      lock.lock();
      ++finished;
    }
  }

  void WorkerLoop() {
    std::unique_lock<std::mutex> lock(mu);
    uint64_t seen = 0;
    for (;;) {
      wake.wait(lock, [&] { return stopping || generation != seen; });
      if (stopping) return;
      seen = generation;
      if (task == nullptr) continue;  // woke after the run ended
      const std::function<void(size_t)>* fn = task;
      const size_t n = tasks;
      ++participants;
      Drain(lock, fn, n);
      --participants;
      if (finished == n && participants == 0) done.notify_all();
    }
  }
};

EncodePool::EncodePool(int threads) : impl_(std::make_unique<Impl>()) {
  for (int i = 1; i < threads; ++i) impl_->workers.emplace_back([this] { impl_->WorkerLoop(); });
}

EncodePool::~EncodePool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  for (auto& t : impl_->workers) t.join();
}

int EncodePool::threads() const { return static_cast<int>(impl_->workers.size()) + 1; }

bool EncodePool::Run(size_t n, const std::function<void(size_t)>& task) {
  std::unique_lock<std::mutex> run(impl_->run_mu, std::try_to_lock);
  if (!run.owns_lock()) return false;
  Impl& p = *impl_;
  std::unique_lock<std::mutex> lock(p.mu);
  p.task = &task;
  p.tasks = n;
  p.next = 0;
  p.finished = 0;
  ++p.generation;
  lock.unlock();
  p.wake.notify_all();
  lock.lock();
  p.Drain(lock, &task, n);
  // Workers still inside the run hold `task`: wait until they have left.
  auto all_done = [&] { return p.finished.load() == n && p.participants.load() == 0; };
  if (!all_done()) {
    lock.unlock();
    const auto spin_end = std::chrono::steady_clock::now() + kCallerSpin;
    for (unsigned k = 1; !all_done(); ++k) {
      CpuRelax();
      if (k % 256 == 0 && std::chrono::steady_clock::now() > spin_end) break;
    }
    lock.lock();
  }
  p.done.wait(lock, all_done);
  p.task = nullptr;
  return true;
}

void TokenizerImpl::EncodeFull(std::string_view text, bool add_special_tokens, Path path, const Sink& out,
                               const EncodeOptions* options, EncodeOutcome* outcome) const {
  out.ids.clear();
  if (out.ends) out.ends->clear();
  if (out.added) out.added->clear();
  EncodeOutcome local;
  EncodeOutcome& oc = outcome ? *outcome : local;
  oc = EncodeOutcome{};
  const bool specials = add_special_tokens && !tiktoken_;
  if (specials) {
    out.ids.insert(out.ids.end(), prefix_ids_.begin(), prefix_ids_.end());
    if (out.ends) out.ends->insert(out.ends->end(), prefix_ids_.size(), 0);
  }
  EncodePool* pool = options ? options->pool : nullptr;
  const bool parallel = pool != nullptr && pool->threads() > 1 && path == Path::kFast &&
                        text.size() >= std::max<size_t>(options->parallel_min_bytes, 2);
  if (!parallel) {
    EncodeFrom(text, 0, /*continue_segment=*/false, MatchesAddedTokens(add_special_tokens), path, out);
  } else {
    // Chunks small enough to balance the threads, large enough that each
    // costs far more than claiming it.
    const int threads = pool->threads();
    size_t chunk = options->chunk_bytes;
    if (chunk == 0) {
      chunk = normalizer_.identity() ? std::clamp<size_t>(text.size() / (static_cast<size_t>(threads) * kItemsPerThread),
                                                          size_t{4} << 10, kChunkBytes)
                                     : kChunkBytes;
    }
    bool uncut = false;
    std::vector<WorkItem> items;
    PlanWork(text, 0, false, MatchesAddedTokens(add_special_tokens), path, chunk, items, &uncut);
    oc.uncut = uncut;
    oc.chunks = 0;
    for (const WorkItem& w : items) oc.chunks += !w.is_added;
    std::vector<size_t> group_begin;
    GuidedGroups(items, static_cast<size_t>(threads), group_begin);
    const size_t groups = group_begin.size() - 1;
    // The groups' outputs live in the calling thread's buffers, kept
    // between runs: fresh vectors cost page faults and regrowth on every
    // long miss. Each is filled to a token per 3 bytes of its group by the
    // thread that claims the group (run_group).
    // A cache line of its own: threads fill neighbouring parts at once.
    struct alignas(64) Part {
      std::vector<uint32_t> ids, ends;
      std::vector<TextSpan> added;
    };
    thread_local std::vector<Part> caller_parts;
    // A lambda naming a thread_local would see the worker's; this reference
    // is the caller's.
    std::vector<Part>& parts = caller_parts;
    if (parts.size() < groups) parts.resize(groups);
    // Threads that took part: each counts itself once per run.
    static std::atomic<uint64_t> run_ids{0};
    const uint64_t run_id = run_ids.fetch_add(1) + 1;
    std::atomic<int> used{0};
    auto run_group = [&](size_t g) {
      thread_local uint64_t last_run = 0;
      if (last_run != run_id) {
        last_run = run_id;
        used.fetch_add(1, std::memory_order_relaxed);
      }
      const WorkItem* first = items.data() + group_begin[g];
      const WorkItem* last = items.data() + group_begin[g + 1];
      if (g == 0) {
        EncodeWork(text, first, last, path, out);
        return;
      }
      // Prepared by the thread that claimed the group, so the caller wakes
      // the workers without this delay. The buffer is zero-filled up to the
      // expected size before encoding: the caller read it in the last run's
      // concatenation, and every line a thread writes must first be taken
      // back from the other core's cache. A fill takes the lines back many
      // at a time; the encoding loop's push_back took them one at a time,
      // which made the writing thread 25-40% slower (2T speedup at 1M
      // 1.55-1.62x before, 1.73-1.86x after, all four families).
      Part& part = parts[g];
      part.added.clear();
      const size_t expected_tokens = (last[-1].end - first->begin) / 3 + 64;
      auto fill_then_clear = [expected_tokens](std::vector<uint32_t>& v) {
        v.assign(expected_tokens, 0);
        v.clear();
      };
      fill_then_clear(part.ids);
      part.ends.clear();
      if (out.ends) fill_then_clear(part.ends);
      EncodeWork(text, first, last, path, Sink{part.ids, out.ends ? &part.ends : nullptr, out.added ? &part.added : nullptr});
    };
    if (groups > 1 && pool->Run(groups, run_group)) {
      oc.threads = used.load();
      size_t total = out.ids.size();
      for (size_t g = 1; g < groups; ++g) total += parts[g].ids.size();
      out.ids.reserve(total + suffix_ids_.size());
      if (out.ends) out.ends->reserve(total + suffix_ids_.size());
      for (size_t g = 1; g < groups; ++g) {
        out.ids.insert(out.ids.end(), parts[g].ids.begin(), parts[g].ids.end());
        if (out.ends) out.ends->insert(out.ends->end(), parts[g].ends.begin(), parts[g].ends.end());
        if (out.added) out.added->insert(out.added->end(), parts[g].added.begin(), parts[g].added.end());
      }
    } else {
      oc.pool_busy = groups > 1;
      EncodeWork(text, items.data(), items.data() + items.size(), path, out);
    }
    // A thread that once encoded a huge text does not keep its buffers.
    size_t kept = 0;
    for (const Part& part : parts) kept += part.ids.capacity() + part.ends.capacity();
    if (kept > (size_t{2} << 20)) std::vector<Part>().swap(parts);
  }
  if (specials) {
    out.ids.insert(out.ids.end(), suffix_ids_.begin(), suffix_ids_.end());
    if (out.ends) out.ends->insert(out.ends->end(), suffix_ids_.size(), static_cast<uint32_t>(text.size()));
  }
}

void Tokenizer::Encode(std::string_view text, bool add_special_tokens, std::vector<uint32_t>& ids,
                       const EncodeOptions& options, EncodeOutcome* outcome) const {
  impl_->EncodeFull(text, add_special_tokens, TokenizerImpl::Path::kFast, {ids}, &options, outcome);
}

void Tokenizer::EncodeWithEnds(std::string_view text, bool add_special_tokens, std::vector<uint32_t>& ids,
                               std::vector<uint32_t>& ends, const EncodeOptions& options,
                               EncodeOutcome* outcome) const {
  impl_->EncodeFull(text, add_special_tokens, TokenizerImpl::Path::kFast, {ids, &ends}, &options, outcome);
}

}  // namespace toktier::core
