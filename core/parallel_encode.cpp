// Full tokenization on several threads: EncodePool (fork-join, the caller
// takes part, workers woken together before the caller plans) and
// TokenizerImpl::EncodeFull, which cuts a long text into work items
// (PlanWork: added tokens, then chunks cut at content boundaries) and
// encodes contiguous groups of them in parallel. Each group's output is what
// the one-thread loop would append for those items, so appending the groups
// in order gives the one-thread result exactly.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "core/tokenizer_impl.h"

namespace toktier::core {
namespace {

// Work items (chunks) per pool thread, for texts under kChunkBytes per item:
// the last groups are single items, so an item's time bounds how unevenly
// the threads finish (8 KiB items at 1 MB on 2 threads: 1.62-1.70x paired
// speedup where 32 KiB items gave 1.55-1.61x, with a slower worker core).
// Under a normalizer cuts cost more to test (the windows' forms are checked,
// on the caller, before the threads start), so items stay at kChunkBytes
// there: with 8 KiB items Qwen3 planned 1 MB of code in 0.095 ms against
// 0.063 and ran 1.83-1.84x against 1.85-1.87x.
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

// How long a worker woken for a run spins for its tasks while the caller
// plans them (about 0.1 ms per MB) before it sleeps: woken before planning,
// the workers are running when the tasks appear (woken after, they started
// 0.09 ms late at 1 MB, half an item's worth of work).
constexpr auto kWorkerSpin = std::chrono::milliseconds(1);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() holds or `limit` has passed (checking the clock every
// 256 pauses), for a wait expected to be far shorter than a wake-up.
template <typename Done>
void SpinUntil(std::chrono::steady_clock::duration limit, Done done) {
  const auto spin_end = std::chrono::steady_clock::now() + limit;
  for (unsigned k = 1; !done(); ++k) {
    CpuRelax();
    if (k % 256 == 0 && std::chrono::steady_clock::now() > spin_end) return;
  }
}

// The output of one group encoded into a buffer of its own (not straight
// into the result). A cache line of its own: threads fill neighbouring parts
// at once.
struct alignas(64) Part {
  std::vector<uint32_t> ids, ends;
  std::vector<TextSpan> added;
};

// The pool keeps its group buffers between runs up to this many bytes of
// capacity (fresh vectors cost regrowth, and page faults whenever the
// allocator has returned the pages): 32 MiB covers texts of about 25M
// characters with token ends. Runs do not overlap, so a pool holds one set,
// not one per calling thread (every proxy thread that ever had a long miss).
constexpr size_t kKeptPartBytes = size_t{32} << 20;

}  // namespace

struct EncodePool::Impl {
  std::mutex run_mu;  // one Run at a time
  std::mutex mu;
  std::condition_variable wake, done;
  uint64_t generation = 0;  // bumped when a run starts (before its planning)
  // Equals generation once the run's tasks are set; atomic so that a woken
  // worker can spin on it unlocked.
  std::atomic<uint64_t> published{0};
  const std::function<void(size_t)>* task = nullptr;  // null between runs
  size_t tasks = 0;
  size_t next = 0;  // next task index to claim
  // Written under mu; atomic so that the caller can spin on them unlocked.
  std::atomic<size_t> finished{0};  // tasks completed
  std::atomic<int> participants{0};  // workers inside the current run
  bool stopping = false;
  std::vector<std::thread> workers;
  // Encoding scratch of the current run (EncodeOnPool): the group buffers,
  // and the tokens per byte of the last text (code 0.25, prose 0.22, single
  // digits 0.45), which sizes their fill.
  std::vector<Part> parts;
  double tokens_per_byte = 1.0 / 3;

  int threads() const { return static_cast<int>(workers.size()) + 1; }

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

  // Run's body, for a caller that holds run_mu.
  void RunLocked(const std::function<size_t()>& plan, const std::function<void(size_t)>& task);

  void WorkerLoop() {
    std::unique_lock<std::mutex> lock(mu);
    uint64_t seen = 0;
    for (;;) {
      wake.wait(lock, [&] { return stopping || generation != seen; });
      if (stopping) return;
      seen = generation;
      if (published.load(std::memory_order_acquire) != seen) {
        // The caller is planning the tasks: spin for them, then sleep.
        lock.unlock();
        SpinUntil(kWorkerSpin, [&] { return published.load(std::memory_order_acquire) == seen; });
        lock.lock();
        wake.wait(lock, [&] { return stopping || generation != seen || published.load() == seen; });
        if (stopping) return;
      }
      // Joins only the run it was woken for, and only while it lasts.
      if (generation != seen || task == nullptr) continue;
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

int EncodePool::threads() const { return impl_->threads(); }

bool EncodePool::Run(size_t n, const std::function<void(size_t)>& task) {
  return Run([n] { return n; }, task);
}

bool EncodePool::Run(const std::function<size_t()>& plan, const std::function<void(size_t)>& task) {
  std::unique_lock<std::mutex> run(impl_->run_mu, std::try_to_lock);
  if (!run.owns_lock()) return false;
  impl_->RunLocked(plan, task);
  return true;
}

void EncodePool::Impl::RunLocked(const std::function<size_t()>& plan, const std::function<void(size_t)>& task) {
  Impl& p = *this;
  std::unique_lock<std::mutex> lock(p.mu);
  ++p.generation;
  lock.unlock();
  p.wake.notify_all();
  const size_t n = plan();
  lock.lock();
  p.task = &task;
  p.tasks = n;
  p.next = 0;
  p.finished = 0;
  p.published.store(p.generation, std::memory_order_release);
  lock.unlock();
  p.wake.notify_all();  // workers that slept through a long plan
  lock.lock();
  p.Drain(lock, &task, n);
  // Workers still inside the run hold `task`: wait until they have left.
  auto all_done = [&] { return p.finished.load() == n && p.participants.load() == 0; };
  if (!all_done()) {
    lock.unlock();
    SpinUntil(kCallerSpin, all_done);
    lock.lock();
  }
  p.done.wait(lock, all_done);
  p.task = nullptr;
}

namespace {

// The parallel branch of EncodeFull: plans the items and groups while the
// pool's workers wake, encodes the groups on the pool, and appends each to
// `out` in order. The caller appends finished groups between its own, and
// encodes straight into `out` a group whose predecessors are all appended,
// so little is left to copy when the last group finishes.
void EncodeOnPool(const TokenizerImpl& tok, std::string_view text, bool add_special_tokens,
                  TokenizerImpl::Path path, const TokenizerImpl::Sink& out, const EncodeOptions& options,
                  EncodePool::Impl& pool, EncodeOutcome& oc) {
  using WorkItem = TokenizerImpl::WorkItem;
  // The pool's scratch is this run's alone while run_mu is held: the plan,
  // the groups and the appends after them all run inside it.
  std::unique_lock<std::mutex> exclusive(pool.run_mu, std::try_to_lock);
  if (!exclusive.owns_lock()) {
    oc.pool_busy = true;
    tok.EncodeFrom(text, 0, /*continue_segment=*/false, tok.MatchesAddedTokens(add_special_tokens), path, out);
    return;
  }
  std::vector<Part>& parts = pool.parts;
  double& tokens_per_byte = pool.tokens_per_byte;
  const int threads = pool.threads();
  // Chunks small enough to balance the threads, large enough that each
  // costs far more than claiming it.
  size_t chunk = options.chunk_bytes;
  if (chunk == 0) {
    chunk = TokenizerImpl::kChunkBytes;
    if (tok.normalizer().identity()) {
      chunk = std::clamp<size_t>(text.size() / (static_cast<size_t>(threads) * kItemsPerThread), size_t{4} << 10,
                                 TokenizerImpl::kChunkBytes);
    }
  }
  const double fill_per_byte = std::max(tokens_per_byte, 0.1) * 1.25;
  std::vector<WorkItem> items;
  std::vector<size_t> group_begin;
  std::unique_ptr<std::atomic<bool>[]> ready;  // per group: its part is complete
  size_t groups = 0;
  auto plan = [&]() -> size_t {
    bool uncut = false;
    tok.PlanWork(text, 0, false, tok.MatchesAddedTokens(add_special_tokens), path, chunk, items, &uncut);
    oc.uncut = uncut;
    oc.chunks = 0;
    for (const WorkItem& w : items) oc.chunks += !w.is_added;
    GuidedGroups(items, static_cast<size_t>(threads), group_begin);
    groups = group_begin.size() - 1;
    if (groups < 2) return 0;  // uncut: encoded below on this thread
    if (parts.size() < groups) parts.resize(groups);
    ready = std::make_unique<std::atomic<bool>[]>(groups);
    return groups;
  };
  // Threads that took part: each counts itself once per run.
  static std::atomic<uint64_t> run_ids{0};
  const uint64_t run_id = run_ids.fetch_add(1) + 1;
  std::atomic<int> used{0};
  const std::thread::id caller = std::this_thread::get_id();
  const size_t out_before = out.ids.size();
  size_t appended = 0;  // groups in `out`, in order; the caller's alone
  auto append_ready = [&] {
    for (; appended < groups && ready[appended].load(std::memory_order_acquire); ++appended) {
      const Part& part = parts[appended];
      out.ids.insert(out.ids.end(), part.ids.begin(), part.ids.end());
      if (out.ends) out.ends->insert(out.ends->end(), part.ends.begin(), part.ends.end());
      if (out.added) out.added->insert(out.added->end(), part.added.begin(), part.added.end());
    }
  };
  auto run_group = [&](size_t g) {
    thread_local uint64_t last_run = 0;
    if (last_run != run_id) {
      last_run = run_id;
      used.fetch_add(1, std::memory_order_relaxed);
    }
    const WorkItem* first = items.data() + group_begin[g];
    const WorkItem* last = items.data() + group_begin[g + 1];
    const bool on_caller = std::this_thread::get_id() == caller;
    if (on_caller && g == appended) {
      tok.EncodeWork(text, first, last, path, out);
      ++appended;
      append_ready();
      return;
    }
    // Prepared by the thread that claimed the group, so the caller wakes
    // the workers without this delay. The buffer is zero-filled up to the
    // expected size before encoding: the caller read it in the last run,
    // and every line a thread writes must first be taken back from the
    // other core's cache. A fill takes the lines back many at a time; the
    // encoding loop's push_back took them one at a time, which made the
    // writing thread 25-40% slower (2T speedup at 1M 1.55-1.62x before,
    // 1.73-1.86x after, all four families). The fill follows the last
    // text's density: a fixed third of a token per byte left digits (0.45)
    // short by a quarter, and them at 1.73x against 1.78x.
    Part& part = parts[g];
    part.added.clear();
    const size_t expected_tokens = static_cast<size_t>(static_cast<double>(last[-1].end - first->begin) * fill_per_byte) + 64;
    auto fill_then_clear = [expected_tokens](std::vector<uint32_t>& v) {
      v.assign(expected_tokens, 0);
      v.clear();
    };
    fill_then_clear(part.ids);
    part.ends.clear();
    if (out.ends) fill_then_clear(part.ends);
    tok.EncodeWork(text, first, last, path,
                   TokenizerImpl::Sink{part.ids, out.ends ? &part.ends : nullptr, out.added ? &part.added : nullptr});
    ready[g].store(true, std::memory_order_release);
    if (on_caller) append_ready();
  };
  pool.RunLocked(plan, run_group);
  if (groups < 2) {
    tok.EncodeWork(text, items.data(), items.data() + items.size(), path, out);
    return;
  }
  oc.threads = used.load();
  append_ready();  // the groups that finished after the caller's last
  tokens_per_byte = static_cast<double>(out.ids.size() - out_before) / static_cast<double>(text.size());
  // A pool that once encoded a huge text does not keep its buffers.
  size_t kept = 0;
  for (const Part& part : parts) {
    kept += (part.ids.capacity() + part.ends.capacity()) * sizeof(uint32_t) + part.added.capacity() * sizeof(TextSpan);
  }
  if (kept > kKeptPartBytes) std::vector<Part>().swap(parts);
}

}  // namespace

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
    EncodeOnPool(*this, text, add_special_tokens, path, out, *options, *pool->impl_, oc);
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
