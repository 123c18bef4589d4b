// compare.mjs — scratchgrad's GPT-2 tokenizer against the npm package gpt-3-encoder (a JavaScript port of
// OpenAI's encoder.py) on a varied corpus. Run by run-npm-test.sh:
//   node compare.mjs <scratchgrad binary> <folder of encoder.json and vocab.bpe> <source dir> <scratch dir>
// Our `tokenize --ids` must print exactly the npm encoder's ids, with <|endoftext|> as 50256 (the npm encoder
// knows no special tokens: each piece between them is encoded on its own).
//
// Two characters are kept out of the corpus because that package and encoder.py disagree on them, and we
// follow encoder.py: JavaScript's \s matches U+FEFF (the byte-order mark) and not U+0085 (next line), while
// encoder.py's `regex` module uses Unicode's White_Space property, which has U+0085 and not U+FEFF.
// tests/tokenizer/split_fixture.json holds encoder.py's cuts of texts with both.
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(import.meta.url);
const { encode } = require("gpt-3-encoder");
const [scratchgrad, vocabDir, sourceDir, scratchDir] = process.argv.slice(2);

const corpus = {};
for (const name of fs.readdirSync("/usr/share/common-licenses").sort()) {
  const file = path.join("/usr/share/common-licenses", name);
  if (fs.statSync(file).isFile()) corpus[`licence ${name}`] = fs.readFileSync(file, "utf-8");
}
for (const rel of ["nn/tokenizer/split.cpp", "nn/tokenizer/train.cpp", "examples/cli/tokenize.cpp",
                   "nn/tokenizer/make_unicode_classes.py", "tests/tokenizer/make_split_fixture.py", "bench/minbpe_train.py"]) {
  const file = path.join(sourceDir, rel);
  if (fs.existsSync(file)) corpus[rel] = fs.readFileSync(file, "utf-8");
}
Object.assign(corpus, {
  cjk: "日本語のテキストと中文，还有한국어 텍스트。東京は晴れ、气温25度。",
  emoji: "emoji 🎉👍🏽👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 and ❤️ hearts, 🙂🙂🙂 in a row",
  combining: "é vs e\u0301, ñ vs n\u0303, Å vs A\u030a, Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇",
  whitespace: "a  b   c\t\td \n\n\n e\r\n\r\nf   \n  \t \u00a0\u3000 g\u2028h    ",
  numbers: "3.14159 2,718 1e-10 0x7fff 1234567890123 ½ ¾ Ⅻ ٣٤٥ ४२ 12:30 2024-05-01 -42 +7",
  contractions: "It's I'm you're we've they'll he'd can't won't IT'S 'tis o'clock rock'n'roll ''s '''",
  endoftext: "first document<|endoftext|>second document\n<|endoftext|><|endoftext|> third <|endoftext",
  mixed: "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم. שלום עולם. नमस्ते दुनिया.",
});

let failures = 0, tokens = 0;
for (const [name, text] of Object.entries(corpus)) {
  if (/[\u0085\ufeff]/.test(text)) throw new Error(`${name}: holds U+0085 or U+FEFF, where the npm encoder differs from encoder.py`);
  const want = [];
  text.split("<|endoftext|>").forEach((piece, i) => {
    if (i > 0) want.push(50256);
    want.push(...encode(piece));
  });
  const file = path.join(scratchDir, "corpus.txt");
  fs.writeFileSync(file, text);
  const got = execFileSync(scratchgrad, ["tokenize", "--tokenizer", "gpt2", "--tokenizer-file", vocabDir, "--ids", "--text", file],
                           { encoding: "utf-8", maxBuffer: 1 << 28 }).trim().split(" ").map(Number);
  tokens += want.length;
  const first = want.findIndex((id, i) => got[i] !== id);
  if (first >= 0 || got.length !== want.length) {
    const at = first >= 0 ? first : Math.min(got.length, want.length);
    console.log(`MISMATCH ${name}: at token ${at}: ours ${JSON.stringify(got.slice(at, at + 8))}, npm ${JSON.stringify(want.slice(at, at + 8))}`);
    failures++;
  }
}
console.log(`${Object.keys(corpus).length} texts, ${tokens} tokens: ${failures ? failures + " differ" : "all ids equal the npm encoder's"}`);
process.exit(failures ? 1 : 0);
