#!/usr/bin/env python3
"""Writes tests/tokenizer/split_fixture.json: how GPT-2's and GPT-4's split patterns cut some texts, as the
`regex` module (the one OpenAI's encoder.py and tiktoken's reference use) cuts them. A reference only:
`pip install regex`, then run from the repository root. tests/test_tokenizer.cpp compares split_chunks with it."""
import json
import regex

PATTERNS = {
    "gpt2": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "gpt4": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""",
}
TEXTS = [
    "Hello world",
    "It's 2024! We'll see: they're here, I'm sure, you've won, he'd go. IT'S LOUD'LL",
    "  leading spaces and   runs   \n\n\t tabs \r\n\r\n  end  ",
    "def f(x):\n    return x**2 + 1_000_000\n",
    "int main() { return a->b[3] != 0 ? -1 : 0x7f; }\n\n",
    "日本語のテキストと中文。한국어 텍스트",
    "emoji 🎉👍🏽 and é vs e\u0301 (combining) café",
    "numbers 3.14159 and 1234567890 and ½ Ⅻ ٣٤٥",
    "a \u0085b a\ufeff\ufeffb \u3000\u3000x \u00a0y",
    "'''quoted''' and 'single' ''s ?!... ---\n\n--",
    "trailing space ",
    " ",
    "\n",
    "x  \n  y",
    "<|endoftext|>The next document",
]
cases = []
for name, pattern in PATTERNS.items():
    for text in TEXTS:
        cases.append({"pattern": name, "text": text, "chunks": regex.findall(pattern, text)})
with open("tests/tokenizer/split_fixture.json", "w", encoding="utf-8") as f:
    json.dump({"regex_version": regex.__version__, "cases": cases}, f, ensure_ascii=False, indent=0)
