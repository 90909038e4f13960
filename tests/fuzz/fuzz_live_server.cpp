// The request path through the real server code: one proxy::Server (memory
// store, the qwen3 tokenizer, short deadlines) in front of a mock engine, both
// in this process. Each input is the bytes one client sends on one connection
// (pipelined requests included); its last byte also picks how the engine
// misbehaves for it (interim answers, bytes after the body, resets, malformed
// or huge headers) and whether the client half-closes after writing (which
// the proxy takes as the client leaving: the request is cancelled) or waits.
// Either way the client reads until the server closes; short deadlines (a
// 50 ms idle timeout after a response, 300 ms to read a request) bound the
// wait. Invariants: whatever comes back starts with an HTTP/1.1
// status line (100-599), the server closes the connection within its
// deadlines, and it keeps answering a well-formed request (probed every 64
// inputs). ASan/UBSan watch the server's I/O and worker threads.
// Structure: when the last byte has bit 0x40, the other bytes are a JSON
// body (deep-nesting markers expanded, fuzz_support.h ExpandNesting) sent as
// a well-framed POST to /v1/completions (bit 0x20) or else to one of the
// chat token path's endpoints (qwen3 renders its template in "completions"
// mode): chat, Messages, Responses, count_tokens and the three render
// endpoints, picked by the body's length so that mutations reach each.
// Stack depth: every thread of this process (the server's I/O and worker
// threads included) runs on a 1 MiB stack (2 MiB under ASan, whose frames
// are larger), an eighth of the default, so an
// input whose handling recurses with its nesting crashes here long before it
// could in production (issue 34: 50,000 levels overflowed an 8 MiB stack).
#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "fuzz_support.h"
#include "mock_engine.h"
#include "proxy/server.h"
#include "raw_socket.h"

namespace {

using toktier::test::MockEngine;
using toktier::test::MockMode;
using toktier::test::RawSocket;
using toktier::test::RawStatus;

void Check(bool ok, const char* what) { toktier::fuzz::Check(ok, "fuzz_live_server", what); }

struct Live {
  std::unique_ptr<MockEngine> engine;
  std::unique_ptr<toktier::proxy::Server> server;
  uint64_t inputs = 0;
};

Live* g_live = nullptr;

// Engine behaviours that answer at once (stalls and silence would only make
// every input wait for a deadline).
constexpr MockMode kModes[] = {MockMode::kOk,          MockMode::kOk,           MockMode::kStream,
                               MockMode::kFail,        MockMode::kCloseEarly,   MockMode::kInterim,
                               MockMode::kSwitching,   MockMode::kTrailingBytes, MockMode::kResetMidStream,
                               MockMode::kBadStatusLine, MockMode::kBadHeader,  MockMode::kHugeHeaders};

// Sends `bytes`, half-closes if asked, reads until the server closes.
// Returns false when the server kept the connection past `timeout_s`.
bool Exchange(uint16_t port, const std::string& bytes, bool half_close, std::string* answer, int timeout_s) {
  RawSocket s(port);
  Check(s.ok(), "connect to the proxy");
  s.SetSendTimeout(timeout_s * 1000);
  // The server may answer and close before reading everything (an early
  // 4xx): a failed send is fine, the answer is what counts.
  s.Send(bytes);
  if (half_close) s.ShutdownWrite();
  *answer = s.Read(timeout_s * 1000);
  return s.closed_by_peer();
}

// The first answer starts with an HTTP/1.1 status line and a code 100-599.
bool StatusLineOk(const std::string& s) {
  const int code = RawStatus(s);
  return s.compare(0, 9, "HTTP/1.1 ") == 0 && code >= 100 && code <= 599;
}

#ifndef FUZZ_PROBE_EVERY
#define FUZZ_PROBE_EVERY 64
#endif
constexpr uint64_t kProbeEvery = FUZZ_PROBE_EVERY;

void Probe() {
  g_live->engine->mode = MockMode::kOk;
  const std::string body = R"({"model":"qwen3","prompt":"fuzz probe: still serving?","max_tokens":1})";
  std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    "Connection: close\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
  std::string answer;
  Check(Exchange(g_live->server->port(), req, /*half_close=*/false, &answer, 10), "probe answered and closed");
  if (answer.compare(0, 12, "HTTP/1.1 200") != 0) {
    std::fprintf(stderr, "fuzz_live_server: probe answer:\n%s\n", answer.substr(0, 2000).c_str());
    Check(false, "probe gets 200 after the inputs so far");
  }
}

}  // namespace

// ASan's redzones make frames about twice as large: twice the stack there
// (g++ says so with __SANITIZE_*, clang with __has_feature).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FUZZ_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FUZZ_SANITIZED 1
#endif
#endif
#ifdef FUZZ_SANITIZED
constexpr size_t kThreadStackBytes = size_t{2} << 20;
#else
constexpr size_t kThreadStackBytes = size_t{1} << 20;
#endif

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Before any thread starts: the default stack of every later thread.
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  Check(pthread_attr_setstacksize(&attr, kThreadStackBytes) == 0 && pthread_setattr_default_np(&attr) == 0,
        "set the threads' stack size");
  pthread_attr_destroy(&attr);
  auto* live = new Live;  // lives for the process: the server's threads use it
  live->engine = std::make_unique<MockEngine>(0, /*record=*/false);
  live->engine->stream_events = 2;
  live->engine->stream_delay_ms = 0;
  live->engine->fault_delay_ms = 0;
  live->engine->fault_bytes = 80 * 1024;
  toktier::proxy::Config c;
  c.listen_address = "127.0.0.1";
  c.port = 0;
  c.io_threads = 2;
  c.workers = 1;
  c.backends = {live->engine->url()};
  c.data_dir = "";
  c.allow_memory_only_fallback = true;
  c.health_interval_ms = 200;
  c.guard_enabled = false;
  c.shadow_sample_rate = 0;
  c.read_timeout_ms = 300;
  c.idle_timeout_ms = 50;
  c.backend_connect_timeout_ms = 1000;
  c.backend_timeout_ms = 2000;
  c.drain_timeout_ms = 1000;
  c.max_body_bytes = 1 << 20;
  c.memory_budget_bytes = size_t{64} << 20;
  toktier::proxy::ModelConfig m;
  m.name = "qwen3";
  m.tokenizer = toktier::test::TokenizerPath("qwen3");
  m.chat_forward = toktier::api::ChatForward::kCompletions;
  m.tool_parser = toktier::api::ToolCallFormat::kHermes;
  m.reasoning = true;
  c.models.push_back(m);
  live->server = std::make_unique<toktier::proxy::Server>(c);
  if (const toktier::core::Status st = live->server->Start(); !st.ok()) {
    std::fprintf(stderr, "fuzz_live_server: proxy start: %s\n", st.message().c_str());
    std::abort();
  }
  g_live = live;
  // Stop the server's threads before static destructors run at exit: they
  // would otherwise go on using objects being destroyed (found by ASan: the
  // metrics' bucket list, in a CI smoke run that then hung in LSan).
  std::atexit([] {
    g_live->server->Shutdown();
    g_live->engine.reset();
  });
  return 0;
}

constexpr const char* kChatPathTargets[] = {"/v1/chat/completions",        "/v1/messages",
                                             "/v1/responses",               "/v1/chat/completions/render",
                                             "/v1/messages/render",         "/v1/responses/render",
                                             "/v1/messages/count_tokens",   "/v1/chat/completions"};

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (256u << 10)) return 0;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (size > 1 && (data[size - 1] & 0x40)) {
    const std::string body = toktier::fuzz::ExpandNesting(std::string_view(bytes).substr(0, size - 1));
    const char* target =
        (data[size - 1] & 0x20) ? "/v1/completions" : kChatPathTargets[body.size() % std::size(kChatPathTargets)];
    bytes = std::string("POST ") + target +
            " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  g_live->engine->mode = size ? kModes[data[size - 1] % std::size(kModes)] : MockMode::kOk;
  std::string answer;
  // Every deadline is at most 2 s; 10 s means the connection was forgotten.
  const bool half_close = size && (data[size - 1] & 0x80);
  Check(Exchange(g_live->server->port(), bytes, half_close, &answer, 10), "the server closes a finished connection");
  Check(answer.empty() || StatusLineOk(answer), "an answer starts with an HTTP/1.1 status line");
  if (++g_live->inputs % kProbeEvery == 0) Probe();
  return 0;
}
