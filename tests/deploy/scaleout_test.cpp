// issue 12: scale-out behind a real balancer. nginx (Debian's, unprivileged:
// its own prefix, config, pid and logs in a temp dir, loopback only, one
// process that dies with this test) hashes the session headers consistently
// (the Helm chart's key: every header toktier reads a session from,
// concatenated) over 3 real `toktier serve`
// replicas, each with its own RocksDB directory, in front of the mock engine.
// The sessions name themselves as the agents do, by X-Session-Id, Claude
// Code's X-Claude-Code-Session-Id or Codex's session-id.
// Agent sessions are replayed through it in three phases:
//   1. 3 replicas: each session stays on one replica; per-replica hit rates
//      from each replica's /metrics (misses = the sessions' first calls only);
//   2. the busiest replica is killed (SIGKILL) mid-run: only its sessions
//      move, each to one survivor, and lose exactly one hit there;
//   3. a fourth replica is added: sessions move only onto it, a bounded share.
// Every prompt the engine received is checked against a full tokenization
// (the IDs stay exact whichever replica served it). Key movement is also
// measured on 600 probe keys (GET /healthz through the same upstream).
// Exit 77 when nginx or the tokenizer files are missing.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "http_client.h"
#include "mock_engine.h"
#include "cli/cli.h"
#include "proxy/server.h"
#include "test_support.h"

namespace fs = std::filesystem;
using toktier::test::HttpClient;
using toktier::test::HttpResponse;
using toktier::test::MockEngine;

namespace {

std::string g_nginx;

std::string FindNginx() {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/local/sbin";
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::string p = dir + "/nginx";
    if (!dir.empty() && access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

bool PortOpen(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

// A child process whose stdout and stderr go to `log`, killed by the kernel
// when this test process dies (PR_SET_PDEATHSIG), so nothing outlives it.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

void Stop(pid_t pid, int sig = SIGTERM) {
  if (pid <= 0) return;
  kill(pid, sig);
  waitpid(pid, nullptr, 0);
}

std::string Slurp(const std::string& path) { return toktier::test::ReadFile(path).value_or(""); }

struct Replica {
  std::string name;
  std::string dir;
  pid_t pid = -1;
  uint16_t port = 0;
  bool alive = false;
};

// Starts `toktier serve` on an ephemeral port and reads the port from its log.
void StartReplica(Replica& r, const std::string& engine_url, const std::string& tokenizer) {
  fs::create_directories(r.dir);
  nlohmann::json cfg = {
      {"port", 0},
      {"io_threads", 1},
      {"workers", 1},
      {"backends", {engine_url}},
      {"models", {{{"name", "llama3"}, {"tokenizer", tokenizer}}}},
      {"health", {{"interval_ms", 500}}},
      {"store", {{"data_dir", r.dir + "/data"}, {"memory_budget_bytes", 256 << 20}}},
  };
  std::ofstream(r.dir + "/config.json") << cfg.dump();
  r.pid = Spawn({TOKTIER_BINARY, "serve", "--config", r.dir + "/config.json"}, r.dir + "/toktier.log");
  for (int i = 0; i < 600 && !r.port; ++i) {
    std::string log = Slurp(r.dir + "/toktier.log");
    auto at = log.find("listening on http://127.0.0.1:");
    if (at != std::string::npos) r.port = static_cast<uint16_t>(std::atoi(log.c_str() + at + 30));
    if (!r.port) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE_MESSAGE(r.port != 0, r.name << " did not start: " << Slurp(r.dir + "/toktier.log"));
  // Ready = an engine is healthy (the first health check has passed). On a
  // loaded machine that can take seconds; a replica that is not ready would
  // answer the first calls 503 and fail the phase for the wrong reason.
  HttpClient c(r.port);
  int ready = 0;
  for (int i = 0; i < 1200 && (ready = c.Request("GET", "/readyz", "").status) != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  REQUIRE_MESSAGE(ready == 200, r.name << " not ready after 30 s: " << Slurp(r.dir + "/toktier.log"));
  r.alive = true;
}

struct Nginx {
  std::string dir;
  uint16_t port = 0;
  pid_t pid = -1;
};

// The balancer's hash key: what the Helm chart's ingress-nginx annotation
// hashes by default (deploy/helm/toktier/templates/_helpers.tpl).
constexpr const char* kHashKey = "$http_x_session_id$http_x_claude_code_session_id$http_session_id$http_conversation_id$http_x_session_affinity";
// How each agent names its session (session s uses kSessionHeaders[s % 3]).
constexpr const char* kSessionHeaders[] = {"X-Session-Id", "X-Claude-Code-Session-Id", "session-id"};

// nginx in front of `replicas`, hashing the session headers consistently.
// `master_process off`: one process, so the kernel's parent-death signal
// reaches all of it; nothing is written outside `dir`.
void StartNginx(Nginx& n, const std::vector<const Replica*>& replicas) {
  fs::create_directories(n.dir + "/tmp");
  n.port = FreePort();
  std::ostringstream conf;
  conf << "daemon off;\nmaster_process off;\nworker_processes 1;\n"
       << "pid " << n.dir << "/nginx.pid;\nerror_log " << n.dir << "/error.log warn;\n"
       << "events { worker_connections 512; }\n"
       << "http {\n"
       << "  access_log " << n.dir << "/access.log;\n"
       << "  client_body_temp_path " << n.dir << "/tmp/body;\n  proxy_temp_path " << n.dir << "/tmp/proxy;\n"
       << "  fastcgi_temp_path " << n.dir << "/tmp/fastcgi;\n  uwsgi_temp_path " << n.dir << "/tmp/uwsgi;\n"
       << "  scgi_temp_path " << n.dir << "/tmp/scgi;\n"
       << "  upstream toktier {\n    hash " << kHashKey << " consistent;\n";
  for (const Replica* r : replicas) conf << "    server 127.0.0.1:" << r->port << " max_fails=1 fail_timeout=30s;\n";
  conf << "    keepalive 16;\n  }\n"
       << "  server {\n    listen 127.0.0.1:" << n.port << ";\n"
       << "    client_max_body_size 64m;\n    client_body_buffer_size 1m;\n"
       << "    location / {\n      proxy_pass http://toktier;\n      proxy_http_version 1.1;\n"
       << "      proxy_set_header Connection \"\";\n      proxy_buffering off;\n      proxy_read_timeout 60s;\n"
       << "      proxy_next_upstream error timeout;\n"
       << "      add_header X-Toktier-Upstream $upstream_addr always;\n    }\n  }\n}\n";
  std::ofstream(n.dir + "/nginx.conf") << conf.str();
  n.pid = Spawn({g_nginx, "-p", n.dir, "-c", n.dir + "/nginx.conf", "-e", n.dir + "/error.log"}, n.dir + "/stderr.log");
  for (int i = 0; i < 200 && !PortOpen(n.port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  REQUIRE_MESSAGE(PortOpen(n.port), "nginx did not start: " << Slurp(n.dir + "/stderr.log") << Slurp(n.dir + "/error.log"));
}

// The replica that finally answered ($upstream_addr lists every one tried).
uint16_t UpstreamPort(const HttpResponse& r) {
  auto it = r.headers.find("x-toktier-upstream");
  if (it == r.headers.end()) return 0;
  auto colon = it->second.rfind(':');
  return colon == std::string::npos ? 0 : static_cast<uint16_t>(std::atoi(it->second.c_str() + colon + 1));
}

struct Lookups {
  double hit = 0, miss = 0;
};
Lookups Scrape(uint16_t port) {
  HttpClient c(port);
  auto r = c.Request("GET", "/metrics", "");
  Lookups l;
  std::istringstream in(r.body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("toktier_state_lookups_total{", 0) != 0) continue;
    double v = std::atof(line.c_str() + line.rfind(' ') + 1);
    (line.find("result=\"hit\"") != std::string::npos ? l.hit : l.miss) += v;
  }
  return l;
}

struct Session {
  std::string id;
  std::vector<std::string> prompts;
};

// Shared agent workloads (llama3 format), else generated agent-like sessions.
std::vector<Session> LoadSessions(size_t count, size_t steps, std::string* source) {
  std::vector<Session> out;
  std::string dir = toktier::test::SharedWorkloadsDir();
  std::vector<std::string> files;
  if (!dir.empty()) {
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.path().extension() == ".jsonl" && e.path().parent_path().filename() == "llama3") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
  }
  for (const auto& f : files) {
    if (out.size() == count) break;
    Session s;
    if (!toktier::cli::ReadSessionPrompts(f, &s.prompts).ok() || s.prompts.size() < steps) continue;
    s.prompts.resize(steps);
    if (s.prompts.back().size() > 200000) continue;  // keep the run short
    s.id = "sess-" + std::to_string(out.size()) + "-" + fs::path(f).stem().string();
    out.push_back(std::move(s));
  }
  if (out.size() == count) {
    *source = "shared workloads (" + std::to_string(count) + " llama3 sessions, first " + std::to_string(steps) + " calls)";
    return out;
  }
  out.clear();
  std::mt19937 rng(12);
  const char* words[] = {"def", "return", "self", "value", "the", "agent", "file", "error", "test", "import",
                         "print", "result", "class", "for", "in", "if", "None", "path", "diff", "patch"};
  for (size_t i = 0; i < count; ++i) {
    Session s;
    s.id = "gen-" + std::to_string(i);
    std::string text = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are agent " +
                       std::to_string(i) + ". ";
    for (size_t k = 0; k < steps; ++k) {
      for (int w = 0; w < 300; ++w) text += std::string(words[rng() % 20]) + ((rng() % 9) ? " " : "\n");
      text += "<|eot_id|>";
      s.prompts.push_back(text);
    }
    out.push_back(std::move(s));
  }
  *source = "generated sessions (" + std::to_string(count) + " x " + std::to_string(steps) + " calls)";
  return out;
}

struct Call {
  size_t session;
  size_t step;
  uint16_t port;  // replica that answered
  int status;
  int retries;
};

class Harness {
 public:
  std::vector<Session> sessions;
  Nginx nginx;
  std::mutex mu;
  std::vector<Call> calls;
  std::atomic<int> done{0};

  // Replays steps [begin, end) of every session, 4 client threads.
  void Phase(size_t begin, size_t end) {
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t s; (s = next++) < sessions.size();) {
        for (size_t k = begin; k < end; ++k) Send(s, k);
      }
    };
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
  }

  // Which replica each probe key hashes to (a cheap GET /healthz through the upstream).
  std::map<std::string, uint16_t> Probe(int keys) {
    std::map<std::string, uint16_t> out;
    HttpClient c(nginx.port);
    for (int i = 0; i < keys; ++i) {
      std::string key = "probe-" + std::to_string(i);
      auto r = c.Request("GET", "/healthz", "", {{"X-Session-Id", key}});
      if (r.status != 200) r = HttpClient(nginx.port).Request("GET", "/healthz", "", {{"X-Session-Id", key}});
      out[key] = r.status == 200 ? UpstreamPort(r) : 0;
    }
    return out;
  }

 private:
  void Send(size_t s, size_t k) {
    const Session& ses = sessions[s];
    nlohmann::json body = {{"model", "llama3"}, {"prompt", ses.prompts[k]}, {"max_tokens", 1}};
    std::map<std::string, std::string> headers = {{kSessionHeaders[s % 3], ses.id},
                                                  {"X-Test-Call", ses.id + "#" + std::to_string(k)}};
    HttpResponse r;
    int retries = 0;
    // A request in flight on a replica that dies gets a 502 (nginx does not
    // resend a POST it has sent): the client retries, as agents do.
    for (;; ++retries) {
      r = HttpClient(nginx.port).Request("POST", "/v1/completions", body.dump(), headers);
      if ((r.status == 200) || retries == 3) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back({s, k, UpstreamPort(r), r.status, retries});
    ++done;
  }
};

}  // namespace

TEST_CASE("nginx consistent hashing over toktier replicas: kill and add keep IDs exact, lose only hits") {
  const std::string tokenizer = toktier::test::TokenizerPath("llama3");
  const fs::path root = fs::temp_directory_path() / ("toktier-scaleout-" + std::to_string(getpid()));
  fs::create_directories(root);
  MockEngine engine(0, /*record=*/true);

  Harness h;
  std::string source;
  const size_t kSessions = 24, kSteps = 15;
  h.sessions = LoadSessions(kSessions, kSteps, &source);
  MESSAGE("sessions: " << source);

  std::vector<Replica> reps(4);
  for (int i = 0; i < 4; ++i) {
    reps[i].name = "r" + std::to_string(i);
    reps[i].dir = (root / reps[i].name).string();
  }
  for (int i = 0; i < 3; ++i) StartReplica(reps[i], engine.url(), tokenizer);
  auto replica_of = [&](uint16_t port) -> int {
    for (int i = 0; i < 4; ++i)
      if (reps[i].port == port) return i;
    return -1;
  };
  h.nginx.dir = (root / "nginx").string();
  StartNginx(h.nginx, {&reps[0], &reps[1], &reps[2]});

  auto calls_between = [&](size_t from, size_t to) {
    std::lock_guard<std::mutex> lock(h.mu);
    return std::vector<Call>(h.calls.begin() + from, h.calls.begin() + to);
  };
  // The replica each session used in a set of calls (-1: several).
  auto placement = [&](const std::vector<Call>& cs) {
    std::map<size_t, int> at;
    for (const auto& c : cs) {
      int r = replica_of(c.port);
      auto [it, fresh] = at.emplace(c.session, r);
      if (!fresh && it->second != r) it->second = -1;
    }
    return at;
  };
  std::array<Lookups, 4> before{};
  auto delta = [&](int i) {
    Lookups now = Scrape(reps[i].port), d{now.hit - before[i].hit, now.miss - before[i].miss};
    before[i] = now;
    return d;
  };
  auto rate = [](const Lookups& l) { return l.hit + l.miss > 0 ? l.hit / (l.hit + l.miss) : 0.0; };

  // ---- Phase 1: three replicas. ----
  const size_t p1 = 5, p2 = 10;
  auto probe1 = h.Probe(600);
  h.Phase(0, p1);
  auto c1 = calls_between(0, h.calls.size());
  for (const auto& c : c1) {
    REQUIRE_MESSAGE(c.status == 200, "phase 1 call failed: " << c.status << " (session " << c.session << ", after "
                                                              << c.retries << " retries)");
  }
  auto at1 = placement(c1);
  std::array<int, 4> sessions_on{};
  for (auto [s, r] : at1) {
    CHECK_MESSAGE(r >= 0, "session " << s << " was served by several replicas");
    if (r >= 0) sessions_on[r]++;
  }
  std::ostringstream report;
  report << "phase 1 (3 replicas, " << c1.size() << " calls):";
  for (int i = 0; i < 3; ++i) {
    Lookups d = delta(i);
    size_t n = std::count_if(c1.begin(), c1.end(), [&](const Call& c) { return replica_of(c.port) == i; });
    report << " " << reps[i].name << " " << sessions_on[i] << " sessions, hit rate " << rate(d) << " (" << d.hit << "/"
           << d.hit + d.miss << ")";
    // The first call of each session is its only miss.
    CHECK(d.miss == sessions_on[i]);
    CHECK(d.hit == n - sessions_on[i]);
  }
  MESSAGE(report.str());

  // ---- Phase 2: the busiest replica dies mid-run. ----
  const int victim = static_cast<int>(std::max_element(sessions_on.begin(), sessions_on.begin() + 3) - sessions_on.begin());
  const size_t phase2_start = h.calls.size();
  const int phase2_calls = static_cast<int>(kSessions * (p2 - p1));
  Lookups victim_at_kill;
  size_t kill_index = 0;
  std::thread killer([&] {
    while (h.done.load() < static_cast<int>(phase2_start) + phase2_calls * 3 / 10) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    victim_at_kill = delta(victim);
    Stop(reps[victim].pid, SIGKILL);
    reps[victim].alive = false;
    // Calls recorded from here on completed after the kill (a few recorded
    // just after may still have been answered by the victim: they are told
    // apart by the replica that answered).
    std::lock_guard<std::mutex> lock(h.mu);
    kill_index = h.calls.size();
  });
  h.Phase(p1, p2);
  killer.join();
  auto c2 = calls_between(phase2_start, h.calls.size());
  int retried = 0;
  for (const auto& c : c2) {
    REQUIRE_MESSAGE(c.status == 200, "phase 2 call failed after retries: " << c.status);
    retried += c.retries > 0;
  }
  // After the kill: sessions of the survivors stayed; the victim's moved, each to one survivor.
  auto after_kill_calls = calls_between(kill_index, h.calls.size());
  std::erase_if(after_kill_calls, [&](const Call& c) { return replica_of(c.port) == victim; });
  auto after_kill = placement(after_kill_calls);
  std::set<size_t> moved_by_kill;
  for (auto [s, r] : after_kill) {
    REQUIRE(r >= 0);
    CHECK(r != victim);
    if (at1[s] == victim) {
      moved_by_kill.insert(s);
    } else {
      CHECK_MESSAGE(r == at1[s], "session " << s << " of a live replica moved");
    }
  }
  report.str("");
  report << "phase 2 (" << reps[victim].name << " killed after " << kill_index - phase2_start << " of " << c2.size()
         << " calls; " << retried << " calls retried): " << reps[victim].name << " hit rate before the kill "
         << rate(victim_at_kill) << ";";
  double survivor_misses = 0;
  for (int i = 0; i < 3; ++i) {
    if (i == victim) continue;
    Lookups d = delta(i);
    survivor_misses += d.miss;
    report << " " << reps[i].name << " hit rate " << rate(d) << " (" << d.hit << "/" << d.hit + d.miss << ")";
  }
  report << "; " << moved_by_kill.size() << " sessions moved, " << survivor_misses << " misses";
  MESSAGE(report.str());
  // Only hits are lost: one miss per moved session, at its new replica.
  CHECK(survivor_misses == static_cast<double>(moved_by_kill.size()));
  auto probe2 = h.Probe(600);
  int probe_moved = 0, probe_victim = 0;
  for (auto& [k, port] : probe1) {
    if (replica_of(port) == victim) {
      ++probe_victim;
      CHECK(replica_of(probe2[k]) != victim);
      CHECK(probe2[k] != 0);
    } else {
      probe_moved += probe2[k] != port;
    }
  }
  CHECK(probe_moved == 0);
  MESSAGE("probe keys: " << probe_victim << "/600 were on " << reps[victim].name << " and moved; 0 others moved");

  // ---- Phase 3: a fourth replica joins (nginx restarted with the new set). ----
  StartReplica(reps[3], engine.url(), tokenizer);
  Stop(h.nginx.pid, SIGQUIT);
  std::vector<const Replica*> live;
  for (const auto& r : reps)
    if (r.alive) live.push_back(&r);
  StartNginx(h.nginx, live);
  before[3] = Scrape(reps[3].port);
  auto probe3 = h.Probe(600);
  int probe_to_new = 0, probe_elsewhere = 0;
  for (auto& [k, port] : probe2) {
    if (probe3[k] == port) continue;
    (replica_of(probe3[k]) == 3 ? probe_to_new : probe_elsewhere)++;
  }
  const size_t phase3_start = h.calls.size();
  h.Phase(p2, kSteps);
  auto c3 = calls_between(phase3_start, h.calls.size());
  for (const auto& c : c3) REQUIRE_MESSAGE(c.status == 200, "phase 3 call failed: " << c.status);
  // Where each session was last served before the add (a session of the
  // victim that had no call after the kill is placed for the first time now).
  auto at3 = placement(c3);
  int moved_to_new = 0, moved_elsewhere = 0;
  std::array<double, 4> expected_misses{};
  for (auto [s, r] : at3) {
    REQUIRE(r >= 0);
    int prev = after_kill.count(s) ? after_kill[s] : at1[s];
    if (r != prev) expected_misses[r]++;
    if (prev == victim) continue;
    if (r != prev) (r == 3 ? moved_to_new : moved_elsewhere)++;
  }
  report.str("");
  report << "phase 3 (r3 added, " << c3.size() << " calls):";
  for (int i = 0; i < 4; ++i) {
    if (!reps[i].alive) continue;
    Lookups d = delta(i);
    report << " " << reps[i].name << " hit rate " << rate(d) << " (" << d.hit << "/" << d.hit + d.miss << ")";
    // Only hits are lost: a miss exactly where a session arrived.
    CHECK(d.miss == expected_misses[i]);
  }
  report << "; sessions moved to r3: " << moved_to_new << "/" << kSessions << ", elsewhere: " << moved_elsewhere
         << "; probe keys moved to r3: " << probe_to_new << "/600, elsewhere: " << probe_elsewhere;
  MESSAGE(report.str());
  CHECK(moved_elsewhere == 0);
  CHECK(probe_elsewhere == 0);
  // Consistent hashing moves about 1/3 of the keys (2 -> 3 live replicas);
  // modulo hashing would move about 2/3.
  CHECK(probe_to_new > 600 / 6);
  CHECK(probe_to_new < 600 / 2);

  // ---- Exactness: every prompt the engine received equals a full tokenization. ----
  std::map<std::string, const std::string*> text_of;
  for (const auto& s : h.sessions)
    for (size_t k = 0; k < s.prompts.size(); ++k) text_of[s.id + "#" + std::to_string(k)] = &s.prompts[k];
  std::shared_ptr<const toktier::core::Tokenizer> tok;
  REQUIRE(toktier::proxy::LoadTokenizerFile(tokenizer, "", &tok).ok());
  size_t checked = 0, mismatched = 0;
  std::vector<uint32_t> ids;
  for (const auto& req : engine.Requests()) {
    if (req.target != "/v1/completions") continue;
    auto it = text_of.find(req.headers.count("x-test-call") ? req.headers.at("x-test-call") : "");
    REQUIRE_MESSAGE(it != text_of.end(), "engine request without a known X-Test-Call");
    auto body = nlohmann::json::parse(req.body, nullptr, false);
    REQUIRE(body.is_object());
    REQUIRE_MESSAGE(body["prompt"].is_array(), "the prompt reached the engine as text");
    tok->Encode(*it->second, /*add_special_tokens=*/true, ids);
    mismatched += body["prompt"].get<std::vector<uint32_t>>() != ids;
    ++checked;
  }
  MESSAGE("engine received " << checked << " prompts as IDs; " << mismatched << " differ from a full tokenization");
  CHECK(mismatched == 0);
  CHECK(checked >= h.calls.size());

  Stop(h.nginx.pid, SIGQUIT);
  for (auto& r : reps)
    if (r.alive) Stop(r.pid);
  std::error_code ec;
  fs::remove_all(root, ec);
}

int main(int argc, char** argv) {
  g_nginx = FindNginx();
  if (g_nginx.empty()) {
    std::printf("SKIP: nginx not installed (tools/dev.sh setup installs it)\n");
    return 77;
  }
  if (!fs::exists(toktier::test::TokenizerPath("llama3"))) {
    std::printf("SKIP: tokenizer files missing (npm ci in tools/)\n");
    return 77;
  }
  signal(SIGPIPE, SIG_IGN);
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
