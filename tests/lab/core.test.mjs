// core.test.mjs — the WebAssembly build's core tests, under node's test runner (ctest: lab.wasm_core):
// the four acts byte for byte against the native program and PyTorch's committed output, every lab
// function's answer byte for byte against the native build of the same code (lab_json), gradcheck of
// the page's ops, the trainer's numbers, and Python's float repr against V8's shortest digits.
//
//   LAB_JS=build-wasm/lab/lab.js NATIVE_BIN=build/bin node --test tests/lab/core.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const source = path.resolve(here, '../..');
const labJs = path.resolve(process.env.LAB_JS || path.join(source, 'build-wasm/lab/lab.js'));
const nativeBin = path.resolve(process.env.NATIVE_BIN || path.join(source, 'build/bin'));

const createLab = createRequire(import.meta.url)(labJs);
const engine = await createLab();
const wasm = (fn, request = {}) => engine.call(fn, JSON.stringify(request));
// WebAssembly cannot flush subnormal floats to zero; the native build does by default (docs/parity.md), so
// lab_json runs with SCRATCHGRAD_DENORMALS=keep. Only the d_k slider meets one: for large d_k (2048 and 4096
// among the slider's stops) a weight of the unscaled softmax is subnormal, 1e-45 say (0 when flushed).
const keepDenormals = { ...process.env, SCRATCHGRAD_DENORMALS: 'keep' };
const native = (fn, request = {}) => {
  try {
    return execFileSync(path.join(nativeBin, 'lab_json'), [fn, JSON.stringify(request)], { encoding: 'utf8', env: keepDenormals }).trimEnd();
  } catch (e) {  // exit status 1: an {"error": ...} answer, still on stdout
    if (e.status === 1) return e.stdout.trimEnd();
    throw e;
  }
};
const run = (program, args = [], env = {}) =>
  execFileSync(path.join(nativeBin, program), args, { encoding: 'utf8', env: { ...process.env, ...env } });

test('the four acts print the native program\'s bytes, which are PyTorch\'s', () => {
  const acts = JSON.parse(wasm('acts')).text;
  assert.equal(acts, run('attention_from_scratch'));
  const expected = readFileSync(path.join(source, 'tests/reference/seed_programs/attention_from_scratch.expected'), 'utf8');
  assert.equal(acts, expected);
  assert.match(acts, /== Act 4: multi-head attention ==/);
});

// Every function the page calls, on the inputs the page offers (and bad ones), answered by both builds.
const requests = [];
for (const source of ['act1', 'act2'])
  for (const mask of [false, true])
    for (const temperature of [0.25, 0.5, 1, 2.5]) {
      requests.push(['attention', { source, mask, temperature }]);
      requests.push(['cell', { source, mask, temperature, query: 1, key: 2 }]);
      requests.push(['cell', { source, mask, temperature, query: 5, key: 0 }]);
    }
for (const d_k of [1, 2, 8, 32, 128, 512, 2048, 4096]) requests.push(['key_dimension', { d_k }]);
for (const loss of ['sum', 'mean_squares', 'norm', 'row'])
  for (const mask of [false, true]) requests.push(['backward', { loss, mask, token: 3 }]);
requests.push(['attention', { temperature: 0 }], ['attention', { temperature: -1 }], ['attention', { source: 'act5' }],
              ['key_dimension', { d_k: 0 }], ['key_dimension', { d_k: 4097 }], ['key_dimension', { d_k: 2.5 }],
              ['cell', { query: 6 }], ['backward', { loss: 'max' }], ['train_steps', {}], ['no_such_function', {}],
              ['gradcheck', {}], ['train_start', {}], ['train_start', { text: 'hello world, hello wasm', steps: 40 }],
              ['train_start', { steps: 0 }], ['train_start', { text: 'short' }]);

test('every lab answer is byte for byte the native build\'s', () => {
  for (const [fn, request] of requests) {
    if (fn === 'train_steps') {  // "no training run" needs a fresh process on both sides: checked below
      continue;
    }
    assert.equal(wasm(fn, request), native(fn, request), `${fn} ${JSON.stringify(request)}`);
  }
  assert.ok(requests.length > 70);
});

test('bad input answers the engine\'s message, never throws', () => {
  const error = (fn, request) => JSON.parse(wasm(fn, request)).error;
  assert.match(error('attention', { temperature: 0 }), /temperature T must be a positive number, got 0/);
  assert.match(error('key_dimension', { d_k: 0 }), /d_k must be a whole number from 1 to 4096, got 0/);
  assert.match(error('key_dimension', { d_k: 4097 }), /got 4097/);
  assert.match(error('cell', { query: 6 }), /query 6 is out of range for 6 tokens/);
  assert.match(error('no_such_function', {}), /no function named/);
  assert.match(engine.call('attention', '{not json'), /"error"/);
  // and the engine still answers afterwards
  assert.equal(JSON.parse(wasm('attention', { temperature: 1 })).tokens.length, 6);
});

test('gradcheck of every op the page uses passes in WebAssembly, and a wrong backward is caught', () => {
  const { checks } = JSON.parse(wasm('gradcheck'));
  assert.ok(checks.length >= 15);
  for (const c of checks) assert.ok(c.ok, `${c.name}: ${c.message}`);
  const selfTest = checks.find((c) => c.name.startsWith('self-test'));
  assert.match(selfTest.message, /Jacobian mismatch/);
});

// randn of 16 or more floats runs Box-Muller in float: sin, cos and log of float arguments. musl's sinf and
// cosf (the WebAssembly build's C library) round 1.3% of those angles differently from glibc's, so the
// engine computes them with random::float_sincos, glibc's algorithm in portable arithmetic (docs/random.md).
test('randn draws the native build\'s bits: sin, cos and log on all 2^24 block arguments, and big tensors', () => {
  const all = wasm('box_muller_fingerprint');
  assert.equal(all, native('box_muller_fingerprint'));  // float_sincos, and musl's logf against glibc's
  assert.equal(JSON.parse(all).sin_cos, '9e827f2e9c0a657c');  // tests/test_random.cpp ties it to glibc's sinf/cosf
  for (const [n, seed] of [[16, 0], [17, 7], [6 * 4096, 0], [1 << 20, 0], [1000003, 12345]]) {
    const request = { n, seed };
    assert.equal(wasm('randn_fingerprint', request), native('randn_fingerprint', request), JSON.stringify(request));
  }
});

test('the train panel\'s run: 2.655 at step 0 and "aditi likes warm dosaw", as the native trainer prints them', () => {
  const sliced = JSON.parse(wasm('train', { slice: 5 }));
  const whole = JSON.parse(wasm('train', {}));
  assert.deepEqual(sliced, whole);  // slicing the run does not change it
  assert.equal(sliced.losses.length, 301);
  assert.equal(sliced.lines[0], 'step   0 | loss 2.655');
  assert.equal(sliced.sample.generated, 'aditi likes warm dosaw');
  // `scratchgrad train` (its defaults are the workshop's run) and the native build of the same code
  const trainer = run('scratchgrad', ['train']);
  assert.ok(trainer.includes('\nstep   0 | loss 2.655 |'));
  assert.ok(trainer.includes('generated: aditi likes warm dosaw\n'));
  // every one of the 301 losses, and the run's lines, bit for bit the native build's
  const nativeRun = JSON.parse(native('train', {}));
  assert.deepEqual(sliced.losses, nativeRun.losses);
  assert.deepEqual(sliced.lines, nativeRun.lines);
  assert.equal(sliced.sample.generated, nativeRun.sample.generated);
  // and the lines `scratchgrad train` prints at steps 100, 200 and 300 (0.219, 0.172, 0.131)
  for (const l of sliced.lines) assert.ok(trainer.includes(`\n${l} |`), `${l} not in the trainer's output:\n${trainer}`);
  assert.deepEqual(sliced.lines.slice(1), ['step 100 | loss 0.219', 'step 200 | loss 0.172', 'step 300 | loss 0.131']);
});

// Python's repr(float) of the printer, whose shortest digits come from fmt in this build: against V8's
// shortest round-trip digits (Number.prototype.toExponential) laid out by Python's rules.
function pythonRepr(v) {
  if (Object.is(v, -0)) return '-0.0';
  if (v === 0) return '0.0';
  const [mantissa, exp] = v.toExponential().split('e');
  const negative = mantissa.startsWith('-');
  const digits = mantissa.replace('-', '').replace('.', '');
  const exponent = Number(exp), decpt = exponent + 1;
  let out = negative ? '-' : '';
  if (decpt <= -4 || decpt > 16) {
    out += digits[0] + (digits.length > 1 ? '.' + digits.slice(1) : '');
    out += `e${exponent < 0 ? '-' : '+'}${String(Math.abs(exponent)).padStart(2, '0')}`;
  } else if (decpt <= 0) out += '0.' + '0'.repeat(-decpt) + digits;
  else if (decpt >= digits.length) out += digits + '0'.repeat(decpt - digits.length) + '.0';
  else out += digits.slice(0, decpt) + '.' + digits.slice(decpt);
  return out;
}

test('float repr: shortest round-trip digits, as Python prints them', () => {
  const values = [0.1, 0.2, 1 / 3, 5.960464477539063e-8, 1e16, 1e17, 123.5, 1e-5, 1e-4, 2.5e-4, 100, 1e22, 5e-324,
                  1.7976931348623157e308, -2.655, 0.0001234, 123456789012345680, 0, 2 ** -1074 * 3];
  let seed = 12345;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const bits = new DataView(new ArrayBuffer(8));
  for (let i = 0; i < 3000; ++i) {  // random bit patterns over the whole finite range
    bits.setUint32(0, Math.floor(random() * 2 ** 32));
    bits.setUint32(4, Math.floor(random() * 2 ** 32));
    const v = bits.getFloat64(0);
    if (Number.isFinite(v)) values.push(v);
  }
  for (let i = 0; i < 1000; ++i) values.push((random() - 0.5) * 10 ** Math.floor(random() * 40 - 20));
  const { repr } = JSON.parse(wasm('float_repr', { values }));
  values.forEach((v, i) => assert.equal(repr[i], pythonRepr(v), `repr of ${v}`));
  const some = values.slice(0, 400);  // (a command line holds a few hundred)
  assert.equal(wasm('float_repr', { values: some }), native('float_repr', { values: some }));
});

// The page's switch: the same panels on the reference kernels (autograd/reference/) agree with the CPU
// kernels to float rounding; a kernels value the engine does not know is an error answer, not a crash.
test('the reference kernels switch gives the same attention weights and gradients to rounding', () => {
  for (const [fn, request] of [['attention', { source: 'act2', mask: true, temperature: 0.5 }],
                               ['backward', { loss: 'mean_squares', mask: true, token: 3 }]]) {
    const cpu = JSON.parse(wasm(fn, { ...request, kernels: 'cpu' }));
    const reference = JSON.parse(wasm(fn, { ...request, kernels: 'reference' }));
    assert.equal(cpu.error, undefined);
    assert.equal(reference.error, undefined);
    // the numeric fields only (the printed strings round to 4 decimals, where an ulp can move a digit)
    const numbers = (x) => typeof x === 'number' ? [x] : x && typeof x === 'object' ? Object.values(x).flatMap(numbers) : [];
    const a = numbers(cpu), b = numbers(reference);
    assert.equal(a.length, b.length);
    a.forEach((v, i) => assert.ok(Math.abs(v - b[i]) <= 1e-5 * (1 + Math.abs(v)), `${fn}: ${v} vs ${b[i]} at ${i}`));
  }
  assert.match(JSON.parse(wasm('attention', { kernels: 'gpu' })).error, /kernels/);
});
