#!/usr/bin/env node
// Reference chat-template renderer for toktier's differential tests:
// @huggingface/jinja (the renderer transformers.js's apply_chat_template
// uses). Reads JSONL lines {"template": "...", "inputs": {...}} on stdin and
// writes one line per input: the rendered string as JSON, or
// {"error": "..."} when the reference fails.
//
// strftime_now() reads the clock in the reference: TOKTIER_NOW (unix
// seconds) fixes it, and the time zone is UTC, so both sides format the
// same instant.
process.env.TZ = "UTC";
const fixedNow = process.env.TOKTIER_NOW ? Number(process.env.TOKTIER_NOW) * 1000 : null;
if (fixedNow !== null) {
  const RealDate = Date;
  globalThis.Date = class extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(fixedNow);
      else super(...args);
    }
    static now() {
      return fixedNow;
    }
  };
}

// Month names (%b, %B) come from Intl with the default locale in the
// reference; pin English, which is what Python's strftime writes in the C
// locale that servers run with.
const RealDateTimeFormat = Intl.DateTimeFormat;
Intl.DateTimeFormat = function (locale, options) {
  return new RealDateTimeFormat(locale ?? "en-US", options);
};

const { Template } = require("@huggingface/jinja");
const readline = require("readline");

const compiled = new Map();
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  if (!line.trim()) return;
  let out;
  try {
    const { template, inputs } = JSON.parse(line);
    let t = compiled.get(template);
    if (!t) {
      t = new Template(template);
      compiled.set(template, t);
    }
    out = JSON.stringify(t.render(inputs));
  } catch (e) {
    out = JSON.stringify({ error: String(e && e.message ? e.message : e) });
  }
  process.stdout.write(out + "\n");
});
