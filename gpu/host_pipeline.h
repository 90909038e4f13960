// gpu/ internal: the tokenizer's tables in the device layout (built on the
// host from core's device export, uploaded as they are), and the host driver
// that runs the device pipeline's grid serially (HostReset, tests).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/core.h"
#include "gpu/device_logic.h"

namespace toktier::gpu {

struct HostTables {
  core::DeviceTables export_;  // what core exported (tokens, merges, specials, ...)
  std::vector<uint16_t> block_of, blocks;
  std::vector<logic::MergeSlot> merge_slots;
  std::vector<logic::VocabSlot> vocab_slots;
  std::vector<uint8_t> arena;
  uint32_t max_whole_len = 0;
  uint32_t byte_ids[256] = {};

  static HostTables Build(const core::Tokenizer& tok);
  // Host pointers into the vectors above.
  [[nodiscard]] logic::Tables View() const;
  [[nodiscard]] bool supported() const { return export_.supported; }
};

// The segments of text as the device reads them.
std::vector<logic::Segment> PackSegments(const std::vector<core::DeviceSegment>& segs);

// Runs the pipeline on the host: ids and ends (relative to text) of the
// content tokens, long pieces still marked logic::kLongPiece (their end is the
// piece end). Returns the number of long pieces.
size_t RunHostPipeline(const HostTables& t, std::string_view text, const std::vector<logic::Segment>& segs,
                       std::vector<uint32_t>& ids, std::vector<uint32_t>& ends);

// Piece starts of one text segment by the device pipeline's pre-tokenization
// (hard-boundary spans, then the family matcher per span): for tests.
void HostPieceStarts(const HostTables& t, std::string_view segment, std::vector<uint32_t>& starts);
// Span starts only (positions where the hard-boundary rule cuts): for tests.
void HostSpanStarts(const HostTables& t, std::string_view segment, std::vector<uint32_t>& starts);

}  // namespace toktier::gpu
