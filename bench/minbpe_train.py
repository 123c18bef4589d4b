#!/usr/bin/env python3
"""minbpe's training algorithm, written plainly in Python, as the yardstick for nn/tokenizer/train.cpp.

Each merge recounts every adjacent pair in every chunk, picks the most frequent, and rewrites all chunks:
the algorithm of Karpathy's minbpe (RegexTokenizer.train), with no deduplication and no incremental counts.
A tie goes to the pair with the smallest ids, as in scratchgrad, so both make the same merges.

  python3 bench/minbpe_train.py TEXT VOCAB_SIZE [--compare FILE.bpe]

--compare checks the merges against a tokenizer saved by `scratchgrad bpe --pattern gpt4 --save`.
Needs the `regex` module for GPT-4's split pattern (pip install regex).
"""
import sys
import time

import regex

GPT4_SPLIT = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""


def pair_counts(chunks):
    counts = {}
    for ids in chunks:
        for pair in zip(ids, ids[1:]):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


def merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def train(text, vocab_size):
    chunks = [list(chunk.encode("utf-8")) for chunk in regex.findall(GPT4_SPLIT, text)]
    merges = []
    for k in range(vocab_size - 256):
        counts = pair_counts(chunks)
        if not counts:
            break
        best = max(counts, key=lambda p: (counts[p], -p[0], -p[1]))
        chunks = [merge(ids, best, 256 + k) for ids in chunks]
        merges.append(best)
    return merges


def main():
    path, vocab_size = sys.argv[1], int(sys.argv[2])
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = time.perf_counter()
    merges = train(text, vocab_size)
    seconds = time.perf_counter() - start
    print(f"python minbpe: {len(merges)} merges on {len(text.encode('utf-8'))} bytes in {seconds:.2f} s")
    if "--compare" in sys.argv:
        with open(sys.argv[sys.argv.index("--compare") + 1], encoding="utf-8") as f:
            theirs = [tuple(map(int, line.split()[1:3])) for line in f if line.startswith("merge ")]
        same = theirs == merges
        print("merges identical to scratchgrad's" if same else f"merges DIFFER from scratchgrad's ({len(theirs)} there)")
        sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
