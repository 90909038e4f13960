// Full tokenization on several threads: EncodePool (fork-join, the caller
// takes part, workers woken together) and TokenizerImpl::EncodeFull, which
// cuts a long text into regions at region splits (points where the text's
// encoding is the encodings of both sides, proven from the bytes around the
// point alone) and encodes the regions in parallel, each as the one-thread
// path would from its start. Appending the regions' outputs in order gives
// the one-thread result exactly.
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

// Regions per pool thread at the smallest region size: the last regions
// are the smallest, so a region's time bounds how unevenly the threads
// finish (8 KiB at 1 MB on 2 threads: 1.62-1.70x paired speedup where 32 KiB
// gave 1.55-1.61x, with a slower worker core).
constexpr size_t kRegionsPerThread = 64;

// Regions are claimed in order by whichever thread is free, and their sizes
// shrink as the text is used up: each takes 1/(kGuide * threads) of the
// bytes still left (at least the smallest size). The first regions are
// large (few claims, few output vectors to concatenate); the last are
// small, so the threads finish within about one of each other (equal
// regions left one thread idle for up to a whole region at the end).
constexpr size_t kGuide = 2;

// The nominal starts of the regions of an n-byte text (starts[0] = 0, a
// last entry n); each real start is the first region split at or after its
// nominal one.
void GuidedRegions(size_t n, size_t threads, size_t min_bytes, std::vector<size_t>& starts) {
  starts.assign(1, 0);
  size_t at = 0;
  while (n - at >= 2 * min_bytes) {
    at += std::max(min_bytes, (n - at) / (kGuide * threads));
    starts.push_back(at);
  }
  starts.push_back(n);
}

// How long the caller, out of tasks, spins for the last regions in flight
// before it sleeps: the tail is about one region, far shorter than a sleeping
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

// The output of one region encoded into a buffer of its own (not straight
// into the result). A cache line of its own: threads fill neighbouring parts
// at once.
struct alignas(64) Part {
  std::vector<uint32_t> ids, ends;
  std::vector<TextSpan> added;
};

// The pool keeps its region buffers between runs up to this many bytes of
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
  uint64_t generation = 0;  // bumped when a run starts, its tasks set
  const std::function<void(size_t)>* task = nullptr;  // null between runs
  size_t tasks = 0;
  size_t next = 0;  // next task index to claim
  // Written under mu; atomic so that the caller can spin on them unlocked.
  std::atomic<size_t> finished{0};  // tasks completed
  std::atomic<int> participants{0};  // workers inside the current run
  bool stopping = false;
  std::vector<std::thread> workers;
  // Encoding scratch of the current run (EncodeOnPool): the region buffers,
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

  // Run's body, for a caller that holds run_mu. The tasks are set before
  // the workers are woken, so the caller notifies once (each notify of a
  // sleeping worker costs the caller tens of microseconds on a VM) and a
  // worker starts on a task as soon as it runs.
  void RunLocked(size_t n, const std::function<void(size_t)>& task);

  void WorkerLoop() {
    std::unique_lock<std::mutex> lock(mu);
    uint64_t seen = 0;
    for (;;) {
      wake.wait(lock, [&] { return stopping || generation != seen; });
      if (stopping) return;
      seen = generation;
      // Joins only while the run lasts (it may have ended before this
      // worker got to run).
      if (task == nullptr) continue;
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
  std::unique_lock<std::mutex> run(impl_->run_mu, std::try_to_lock);
  if (!run.owns_lock()) return false;
  impl_->RunLocked(n, task);
  return true;
}

void EncodePool::Impl::RunLocked(size_t n, const std::function<void(size_t)>& task) {
  Impl& p = *this;
  std::unique_lock<std::mutex> lock(p.mu);
  ++p.generation;
  p.task = &task;
  p.tasks = n;
  p.next = 0;
  p.finished = 0;
  lock.unlock();
  p.wake.notify_all();
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

// The parallel branch of EncodeFull. The text is cut into regions at region
// splits (TokenizerImpl::IsRegionSplit) found near nominal offsets; each
// region is encoded as the one-thread path encodes the text from its start,
// by whichever thread claims it, so there is no plan before the threads
// start: the caller publishes the regions at once and the threads find
// their own splits (each a pure function of the text, so two threads that
// look for the same one agree; the first to find it shares it). A nominal
// split with no region split near it merges its region into the previous
// one. The caller appends finished regions between its own, and encodes
// straight into `out` a region whose predecessors are all appended, so
// little is left to copy when the last region finishes.
void EncodeOnPool(const TokenizerImpl& tok, std::string_view text, bool add_special_tokens,
                  TokenizerImpl::Path path, const TokenizerImpl::Sink& out, const EncodeOptions& options,
                  EncodePool::Impl& pool, EncodeOutcome& oc) {
  const bool match_added = tok.MatchesAddedTokens(add_special_tokens);
  auto encode_alone = [&] { tok.EncodeFrom(text, 0, /*continue_segment=*/false, match_added, path, out); };
  const int threads = pool.threads();
  const size_t n = text.size();
  // Regions small enough to balance the threads, large enough that each
  // costs far more than claiming it and finding its split.
  const size_t min_bytes =
      options.chunk_bytes != 0
          ? options.chunk_bytes
          : std::clamp<size_t>(n / (static_cast<size_t>(threads) * kRegionsPerThread), size_t{4} << 10,
                               TokenizerImpl::kChunkBytes);
  std::vector<size_t> starts;
  GuidedRegions(n, static_cast<size_t>(threads), min_bytes, starts);
  const size_t regions = starts.size() - 1;
  if (regions < 2 || !tok.CanCutSegments()) {
    // Too short to cut, or the tokenizer allows no cut: no thread woken.
    oc.uncut = true;
    oc.chunks = 1;
    encode_alone();
    return;
  }
  // The pool's scratch is this run's alone while run_mu is held: the
  // regions and the appends after them all run inside it.
  std::unique_lock<std::mutex> exclusive(pool.run_mu, std::try_to_lock);
  if (!exclusive.owns_lock()) {
    oc.pool_busy = true;
    encode_alone();
    return;
  }
  std::vector<Part>& parts = pool.parts;
  if (parts.size() < regions) parts.resize(regions);
  const double fill_per_byte = std::max(pool.tokens_per_byte, 0.1) * 1.25;
  // A split is looked for in a short stretch after its nominal offset (text
  // has one every few bytes); a stretch without one (a long piece, added
  // tokens all around) merges the region into the previous one.
  const size_t search = std::clamp<size_t>(min_bytes / 8, 64, 1024);
  // Region k's split, shared once found: kUnknown, kNone or the offset.
  constexpr int64_t kUnknown = -2, kNone = -1;
  std::unique_ptr<std::atomic<int64_t>[]> split(new std::atomic<int64_t>[regions]);
  for (size_t k = 0; k < regions; ++k) split[k].store(k == 0 ? 0 : kUnknown, std::memory_order_relaxed);
  auto split_of = [&](size_t k) -> int64_t {
    int64_t s = split[k].load(std::memory_order_relaxed);
    if (s == kUnknown) {
      const size_t p = tok.FindRegionSplit(text, starts[k], search, match_added);
      s = p == std::string_view::npos ? kNone : static_cast<int64_t>(p);
      split[k].store(s, std::memory_order_relaxed);
    }
    return s;
  };
  std::unique_ptr<std::atomic<bool>[]> ready(new std::atomic<bool>[regions]);  // its part is complete
  for (size_t k = 0; k < regions; ++k) ready[k].store(false, std::memory_order_relaxed);
  // Threads that took part: each counts itself once per run.
  static std::atomic<uint64_t> run_ids{0};
  const uint64_t run_id = run_ids.fetch_add(1) + 1;
  std::atomic<int> used{0};
  std::atomic<size_t> nonempty{0};
  const std::thread::id caller = std::this_thread::get_id();
  const size_t out_before = out.ids.size();
  size_t appended = 0;  // regions in `out`, in order; the caller's alone
  auto append_ready = [&] {
    for (; appended < regions && ready[appended].load(std::memory_order_acquire); ++appended) {
      const Part& part = parts[appended];
      out.ids.insert(out.ids.end(), part.ids.begin(), part.ids.end());
      if (out.ends) out.ends->insert(out.ends->end(), part.ends.begin(), part.ends.end());
      if (out.added) out.added->insert(out.added->end(), part.added.begin(), part.added.end());
    }
  };
  auto run_region = [&](size_t g) {
    thread_local uint64_t last_run = 0;
    if (last_run != run_id) {
      last_run = run_id;
      used.fetch_add(1, std::memory_order_relaxed);
    }
    // [begin, end): from this region's split to the next one found (none:
    // the region is empty, merged into the previous one). Splits do not
    // decrease: a region's split past the next nominal offset is the next
    // region's split too, which leaves that region empty.
    const int64_t s = split_of(g);
    size_t begin = n, end = n;
    if (s != kNone) {
      begin = static_cast<size_t>(s);
      for (size_t j = g + 1; j < regions; ++j) {
        const int64_t t = split_of(j);
        if (t != kNone) {
          end = static_cast<size_t>(t);
          break;
        }
      }
    }
    if (begin < end) nonempty.fetch_add(1, std::memory_order_relaxed);
    const std::string_view upto = text.substr(0, end);
    const bool on_caller = std::this_thread::get_id() == caller;
    if (on_caller && g == appended) {
      if (begin < end) tok.EncodeFrom(upto, begin, /*continue_segment=*/begin > 0, match_added, path, out);
      ++appended;
      append_ready();
      return;
    }
    // Prepared by the thread that claimed the region, so the caller wakes
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
    part.ids.clear();
    part.ends.clear();
    part.added.clear();
    if (begin < end) {
      const size_t expected_tokens = static_cast<size_t>(static_cast<double>(end - begin) * fill_per_byte) + 64;
      auto fill_then_clear = [expected_tokens](std::vector<uint32_t>& v) {
        v.assign(expected_tokens, 0);
        v.clear();
      };
      fill_then_clear(part.ids);
      if (out.ends) fill_then_clear(part.ends);
      tok.EncodeFrom(upto, begin, /*continue_segment=*/begin > 0, match_added, path,
                     TokenizerImpl::Sink{part.ids, out.ends ? &part.ends : nullptr, out.added ? &part.added : nullptr});
    }
    ready[g].store(true, std::memory_order_release);
    if (on_caller) append_ready();
  };
  pool.RunLocked(regions, run_region);
  oc.threads = used.load();
  oc.chunks = nonempty.load();
  oc.uncut = oc.chunks < 2;
  append_ready();  // the regions that finished after the caller's last
  pool.tokens_per_byte = static_cast<double>(out.ids.size() - out_before) / static_cast<double>(n);
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
