// Fails (exit 1) when the running Node does not satisfy the engines.node range
// of a package in tools/package-lock.json, or is older than the agent CLIs'
// floor. tools/dev.sh runs it after `npm ci`; ctest runs it as
// tools/node_engines, so a run on a machine whose own Node happens to be new
// enough still checks the Node that tools/dev.sh chose.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const tools = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(tools, "package.json"));
const semver = require("semver");
const lock = JSON.parse(readFileSync(join(tools, "package-lock.json"), "utf8"));
// @anthropic-ai/claude-code declares >=22; the other CLIs and node-llama-cpp less.
const floor = process.env.TOKTIER_NODE_MIN_MAJOR ?? "22";
const version = process.versions.node;

const failures = [];
if (semver.major(version) < Number(floor)) failures.push(`node ${version} is older than ${floor} (tools/dev.sh NODE_MIN_MAJOR)`);
let checked = 0;
for (const [path, pkg] of Object.entries(lock.packages ?? {})) {
  const range = pkg.engines?.node;
  if (!path || !range) continue;
  checked++;
  if (!semver.satisfies(version, range, { includePrerelease: true })) {
    failures.push(`${path.replace(/^node_modules\//, "")}@${pkg.version} needs node ${range}`);
  }
}
if (failures.length) {
  console.error(`node ${version} (${process.execPath}) does not fit tools/package-lock.json:`);
  for (const f of failures) console.error(`  ${f}`);
  process.exit(1);
}
console.log(`node ${version} (${process.execPath}) satisfies the engines.node of all ${checked} lockfile packages that declare one`);
