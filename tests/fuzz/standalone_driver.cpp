// Runs a libFuzzer target without libFuzzer (g++ builds, CI): feeds seed
// inputs, then random and mutated inputs, for a bounded number of iterations
// or seconds. Usage: fuzz_x [--iterations N] [--seconds S] [--seed K] [FILE|DIR...]
// A directory (a committed libFuzzer corpus) contributes every file in it, so
// each CI run replays what the long campaigns found.
// With clang, the same targets link against libFuzzer instead (preset "fuzz").
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "test_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

// Interesting bytes for tokenizer inputs: ASCII classes, UTF-8 lead and
// continuation bytes, JSON punctuation.
const char kAlphabet[] = " \t\r\n'sSlLdD1a.,:{}[]\"<|>_\xC2\x85\xA0\xE2\x80\xA8\xCC\x81\xC3\xA9\xE6\x97\xA5\xF0\x9F\x98";

std::string Mutate(std::string s, std::mt19937& rng) {
  int edits = 1 + static_cast<int>(rng() % 8);
  for (int e = 0; e < edits; ++e) {
    size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 5) {
      case 0: s.insert(pos, 1, kAlphabet[rng() % (sizeof kAlphabet - 1)]); break;
      case 1: if (!s.empty() && pos < s.size()) s.erase(pos, 1 + rng() % 4); break;
      case 2: if (!s.empty() && pos < s.size()) s[pos] = static_cast<char>(rng()); break;
      case 3: if (!s.empty()) s.insert(pos, s.substr(rng() % s.size(), rng() % 16)); break;
      default: {
        // A deep-nesting marker (fuzz_support.h ExpandNesting), depth any
        // from 0 to 65,026 or exactly around a bound.
        const char marker[2] = {static_cast<char>(1 + rng() % 3), static_cast<char>(rng())};
        s.insert(pos, marker, 2);
        break;
      }
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = 2000;
  double seconds = 20;
  unsigned seed = 1;
  std::vector<std::string> seeds;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iterations") && i + 1 < argc) iterations = std::atol(argv[++i]);
    else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) seed = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (std::filesystem::is_directory(argv[i])) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) seeds.push_back(toktier::test::ReadFile(f.string()).value_or(""));
    } else {
      seeds.push_back(toktier::test::ReadFile(argv[i]).value_or(""));
    }
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  if (seeds.empty()) seeds.push_back("Hello, world! It's 12345 <|eot_id|>\n\n  x");
  std::mt19937 rng(seed);
  auto start = std::chrono::steady_clock::now();
  long n = 0;
  for (const auto& s : seeds) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    ++n;
  }
  for (; n < iterations; ++n) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) break;
    std::string in;
    if (rng() % 3 == 0) {
      size_t len = rng() % 256;
      for (size_t k = 0; k < len; ++k) in.push_back(kAlphabet[rng() % (sizeof kAlphabet - 1)]);
    } else {
      in = Mutate(seeds[rng() % seeds.size()], rng);
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
  }
  std::printf("fuzz: %ld inputs (%zu from seeds and corpus), no crash, no divergence\n", n, seeds.size());
  return 0;
}
