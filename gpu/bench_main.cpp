// toktier_gpu_bench: gpu/check.sh's timing and comparison binary.
//   toktier_gpu_bench --tokenizer PATH --text FILE [--sizes 100000,...] [--runs N] [--add-special-tokens]
// For each size (characters, the text file repeated and cut at a character),
// checks the device route and HostReset against core::Repairer::Reset, then
// times (warm, median of --runs) the device route (wall clock and the
// graph's CUDA events, ids+ends delivered to host arrays), HostReset, the CPU
// path on one thread and the CPU path on every core (one text per thread: the
// throughput). One JSON object per line. Exit 1 on a mismatch.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/core.h"
#include "gpu/gpu.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace core = toktier::core;
namespace gpu = toktier::gpu;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The first `chars` code points of text repeated.
std::string TextOfChars(const std::string& text, size_t chars) {
  std::string out;
  size_t count = 0, i = 0;
  while (count < chars && !text.empty()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    out.append(text, i, len);
    ++count;
    i += len;
    if (i >= text.size()) i = 0;
  }
  return out;
}

template <typename F>
double MedianMs(int runs, F&& f) {
  std::vector<double> v;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    f();
    v.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool Same(const core::TokenState& a, const core::TokenState& b) {
  return a.ids() == b.ids() && a.ends() == b.ends() && a.added_spans() == b.added_spans() &&
         a.version_hash() == b.version_hash() && a.text() == b.text();
}

}  // namespace

int main(int argc, char** argv) {
  std::string tok_path, text_path, sizes_arg = "100000,1000000,2000000,4400000";
  int runs = 21;
  bool add_special = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--tokenizer") tok_path = next();
    else if (a == "--text") text_path = next();
    else if (a == "--sizes") sizes_arg = next();
    else if (a == "--runs") runs = std::max(1, std::stoi(next()));
    else if (a == "--add-special-tokens") add_special = true;
    else {
      std::cerr << "unknown argument " << a << "\n";
      return 2;
    }
  }
  core::Status st;
  auto tok = core::Tokenizer::FromBytes(ReadAll(tok_path), "", &st);
  if (!tok) {
    std::cerr << "tokenizer: " << st.message() << "\n";
    return 2;
  }
  const std::string base = ReadAll(text_path);
  if (base.empty() || core::FindInvalidUtf8(base) != std::string::npos) {
    std::cerr << "text: empty or invalid UTF-8\n";
    return 2;
  }
  gpu::GpuOptions opt;
  opt.min_bytes = 0;
  opt.max_bytes = size_t{32} << 20;
  auto enc = gpu::GpuEncoder::Create(tok, opt);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::cout << nlohmann::json{{"event", "setup"}, {"tokenizer", tok_path}, {"cuda_compiled", gpu::CudaCompiled()},
                              {"device_present", gpu::DevicePresent()}, {"supported", enc->supported()},
                              {"cpu_threads", threads}}
                   .dump()
            << std::endl;
  int rc = 0;
  std::stringstream ss(sizes_arg);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t chars = std::stoull(item);
    const std::string text = TextOfChars(base, chars);
    core::TokenState ref, host, dev;
    core::Repairer::Reset(*tok, ref, text, add_special);
    gpu::Route why = gpu::Route::kDevice;
    const bool host_ok = enc->HostReset(text, add_special, host, &why) && Same(host, ref);
    const gpu::Route route = enc->TryReset(text, add_special, dev);
    const bool dev_ok = route == gpu::Route::kDevice && Same(dev, ref);
    if (!host_ok || (route == gpu::Route::kDevice && !dev_ok)) rc = 1;
    nlohmann::json j{{"event", "size"}, {"chars", chars}, {"bytes", text.size()}, {"tokens", ref.ids().size()},
                     {"route", std::string(gpu::RouteName(route))}, {"host_reset_equal", host_ok},
                     {"device_equal", dev_ok}, {"runs", runs}};
    if (route == gpu::Route::kDevice) {
      std::vector<double> ev;
      j["device_wall_ms"] = MedianMs(runs, [&] {
        core::TokenState s;
        (void)enc->TryReset(text, add_special, s);
        ev.push_back(enc->last_device_ms());
      });
      std::sort(ev.begin(), ev.end());
      j["device_graph_ms"] = ev[ev.size() / 2];
    }
    const int cpu_runs = std::max(3, runs / 4);
    j["cpu_1thread_ms"] = MedianMs(cpu_runs, [&] {
      core::TokenState s;
      core::Repairer::Reset(*tok, s, text, add_special);
    });
    // One text on every core through the encode pool (issue 13): the CPU
    // path a long miss takes in the proxy, what the device must beat 5x.
    {
      core::EncodePool encode_pool(static_cast<int>(threads));
      core::EncodeOptions eo;
      eo.pool = &encode_pool;
      j["cpu_pool_ms"] = MedianMs(cpu_runs, [&] {
        core::TokenState s;
        core::Repairer::Reset(*tok, s, text, add_special, /*generic_path=*/false, eo);
      });
    }
    // Every core busy, one text each (threads warmed first: the CPU path's
    // piece cache is per thread): the machine's CPU throughput.
    const int all_runs = std::max(1, cpu_runs / 2);
    std::barrier sync(static_cast<std::ptrdiff_t>(threads) + 1);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        core::TokenState s;
        core::Repairer::Reset(*tok, s, text, add_special);
        for (int r = 0; r < all_runs; ++r) {
          sync.arrive_and_wait();
          core::Repairer::Reset(*tok, s, text, add_special);
          sync.arrive_and_wait();
        }
      });
    }
    std::vector<double> walls;
    for (int r = 0; r < all_runs; ++r) {
      sync.arrive_and_wait();
      const auto t0 = Clock::now();
      sync.arrive_and_wait();
      walls.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    for (auto& th : pool) th.join();
    std::sort(walls.begin(), walls.end());
    const double all_ms = walls[walls.size() / 2];
    j["cpu_allcore_ms_per_text"] = all_ms / threads;
    j["cpu_allcore_wall_ms"] = all_ms;
    j["host_reset_ms"] = MedianMs(1, [&] {
      core::TokenState s;
      (void)enc->HostReset(text, add_special, s, nullptr);
    });
    std::cout << j.dump() << std::endl;
  }
  const auto stats = enc->stats();
  nlohmann::json routes;
  for (size_t r = 0; r < gpu::kRouteCount; ++r) routes[std::string(gpu::RouteName(static_cast<gpu::Route>(r)))] = stats.routes[r];
  std::cout << nlohmann::json{{"event", "stats"}, {"routes", routes}, {"long_pieces", stats.long_pieces}}.dump()
            << std::endl;
  return rc;
}
