// Helpers of the gpu tests: tokenizers found also when the binary runs on
// another machine (gpu/check.sh), comparison of two token states, corpora.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/core.h"

namespace toktier::gpu_test {

// test::LoadTokenizer's names ("llama3", "qwen3", "tiktoken:o200k_base",
// "deepseek_v3"), looked up in $TOKTIER_NODE_MODULES, then the build's
// tools/node_modules, then ./tools/node_modules. nullptr when absent.
std::shared_ptr<const core::Tokenizer> Tokenizer(const std::string& name);

// "" when equal, else where they first differ.
std::string Diff(const core::TokenState& a, const core::TokenState& b);

// Mixed test texts: code, prose, Unicode classes, special-token strings,
// long runs (pieces over the device bound), NFC hazards.
std::vector<std::string> SyntheticTexts();

// Texts of the shared agent workloads (each step's appended text), at most
// `max_files` files; empty when ../shared/workloads is absent.
std::vector<std::string> WorkloadTexts(size_t max_files);

}  // namespace toktier::gpu_test
