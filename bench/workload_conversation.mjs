#!/usr/bin/env node
// One long conversation from the shared workloads, for the chat benchmarks
// (bench/chat_repair.sh, bench/agent_turn.sh): the mini-swe-agent sessions'
// chatml renderings parsed back into messages and chained until there are
// more than 1.3M characters.
//   node bench/workload_conversation.mjs WORKLOAD_DIR OUT.json
import fs from "node:fs";
import path from "node:path";

const [dir, out] = process.argv.slice(2);
const messages = [];
let chars = 0;
for (const f of fs.readdirSync(dir).sort()) {
  let prompt = "";
  for (const line of fs.readFileSync(path.join(dir, f), "utf8").split("\n")) {
    if (!line) continue;
    const c = JSON.parse(line);
    prompt = Buffer.from(prompt, "utf8").subarray(0, c.keep).toString("utf8") + c.append;
  }
  const re = /<\|im_start\|>(\w+)\n([\s\S]*?)<\|im_end\|>\n/g;
  let m;
  while ((m = re.exec(prompt))) {
    // One system prompt at the start; later ones read as user turns.
    const role = m[1] === "system" && messages.length ? "user" : m[1];
    const last = messages.at(-1);
    if (last && last.role === role) last.content += "\n\n" + m[2];
    else messages.push({role, content: m[2]});
    chars += m[2].length;
  }
  if (chars > 1300000) break;
}
fs.writeFileSync(out, JSON.stringify(messages));
