// The api room's one simdjson on-demand parser per thread (private to api/:
// only completions.cpp and json_tree.cpp include it, both built with the
// same kernel flags). Reused across requests: its buffers stay allocated at
// the size of the largest body the thread has read, so one parser, not one
// per reader, keeps that memory. A document it returned is valid until the
// thread's next iterate().
#pragma once

#include <simdjson.h>

namespace toktier::api {

simdjson::ondemand::parser& ThreadJsonParser();

}  // namespace toktier::api
