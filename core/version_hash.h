// The version hash of a loaded tokenizer: a content hash of the file that
// defines it and of toktier's own encoding algorithm version, so that a
// change to either invalidates stored token state.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <xxhash.h>

namespace toktier::core {

// Bump when a change to core/ can change the IDs produced for some input.
inline constexpr std::string_view kAlgorithmVersion = "toktier-encode-2";

inline std::string VersionHash(std::string_view format, std::string_view encoding_name, std::string_view content) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, kAlgorithmVersion.data(), kAlgorithmVersion.size());
  XXH3_64bits_update(st, format.data(), format.size());
  XXH3_64bits_update(st, "\0", 1);
  XXH3_64bits_update(st, encoding_name.data(), encoding_name.size());
  XXH3_64bits_update(st, "\0", 1);
  XXH3_64bits_update(st, content.data(), content.size());
  uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace toktier::core
