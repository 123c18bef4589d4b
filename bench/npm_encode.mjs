// npm_encode.mjs — GPT-2 encoding throughput of the npm package gpt-3-encoder, beside bench_tokenizer's.
//   node bench/npm_encode.mjs TEXT   (with gpt-3-encoder installed: cd tests/tokenizer && npm ci)
import { createRequire } from "node:module";
import fs from "node:fs";
const require = createRequire(new URL("../tests/tokenizer/package.json", import.meta.url));
const { encode } = require("gpt-3-encoder");
const text = fs.readFileSync(process.argv[2], "utf-8");
const bytes = Buffer.byteLength(text);
for (const pass of ["first pass", "second pass"]) {
  const start = process.hrtime.bigint();
  const ids = encode(text);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(`npm gpt-3-encoder ${pass}: ${ids.length} tokens, ${(bytes / 1e6 / seconds).toFixed(2)} MB/s`);
}
