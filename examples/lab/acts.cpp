// acts.cpp — the four acts for the lab: examples/attention_from_scratch.cpp itself, compiled once more
// with its main() renamed, so the page prints what the program prints because it runs the program.
#define main attention_from_scratch_main
#include "examples/attention_from_scratch.cpp"
#undef main
