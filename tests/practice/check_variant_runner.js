// Runs the static practice page's checkVariant (templates/practice/practice.js) under node:
// node check_variant_runner.js PARSE_JS PRACTICE_JS < [{variant, readings}, ...] -> [[part result, ...], ...]
// The page's DOM is a stand-in that answers every lookup; only the checking functions are used.
const fs = require("fs");
const stub = () => new Proxy(function () {}, {
  get: (t, k) => (k === "dataset" ? { mode: "server" } : k === Symbol.toPrimitive ? () => "" : stub()),
  apply: () => stub(),
});
global.fetch = () => new Promise(() => {});
global.window = { localStorage: { getItem: () => null, setItem: () => {} } };
global.document = stub();
window.qkvquizParse = require(require("path").resolve(process.argv[2]));
eval(fs.readFileSync(process.argv[3], "utf8"));
const input = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(input.map((c) => window.qkvquizPractice.checkVariant(c.variant, c.readings))));
