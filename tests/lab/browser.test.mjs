// browser.test.mjs — drives the real lab page in headless Chromium (Debian's /usr/bin/chromium, through
// playwright-core) and checks what it displays against the native programs. Run by run-browser-test.sh.
//
// It loads the page from disk (file://) and over http, toggles the mask, moves the temperature and d_k
// sliders (to their extremes too), clicks a cell, presses backward, trains 301 steps, saves screenshots,
// and fails on any page error or console error.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const source = path.resolve(here, '../..');
const pageDir = path.resolve(process.env.LAB_DIR || path.join(source, 'build-wasm/lab'));
const nativeBin = path.resolve(process.env.NATIVE_BIN || path.join(source, 'build/bin'));
const shots = path.resolve(process.env.SCREENSHOTS || path.join(source, 'build-wasm/lab-screenshots'));
mkdirSync(shots, { recursive: true });

const native = (program, args = [], env = process.env) => execFileSync(path.join(nativeBin, program), args, { encoding: 'utf8', env });
// WebAssembly keeps subnormal floats; the native build flushes them unless told (docs/parity.md). The d_k
// slider meets them at large d_k (an unscaled weight of 1e-45 at 2048 and 4096), so lab_json keeps them too.
const nativeLabText = (fn, request) =>
  native('lab_json', [fn, JSON.stringify(request)], { ...process.env, SCRATCHGRAD_DENORMALS: 'keep' }).trimEnd();
const nativeLab = (fn, request) => JSON.parse(nativeLabText(fn, request));

// The native program's output, and the pieces of it the page shows.
const program = native('attention_from_scratch');
const line = (prefix) => program.split('\n').find((l) => l.startsWith(prefix));
const after = (heading) => {  // the tensor printed below a heading line
  const lines = program.split('\n');
  const start = lines.indexOf(heading) + 1;
  assert.ok(start > 0, `no "${heading}" in the program's output`);
  let end = start;
  while (end < lines.length && !lines[end].endsWith('])')) ++end;
  return lines.slice(start, end + 1).join('\n');
};

const problems = [];
const userData = mkdtempSync(path.join(os.tmpdir(), 'lab-chromium-'));
const context = await chromium.launchPersistentContext(userData, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1180, height: 900 },
});

async function open(url) {
  const page = await context.newPage();
  page.on('pageerror', (e) => problems.push(`page error at ${url}: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error at ${url}: ${m.text()}`); });
  await page.goto(url);
  await page.waitForSelector('body[data-ready="yes"]', { timeout: 120000 });
  return page;
}
const text = (page, selector) => page.locator(selector).textContent();
const setRange = (page, selector, value) => page.locator(selector).evaluate((e, v) => {
  e.value = v;
  e.dispatchEvent(new Event('input', { bubbles: true }));
}, String(value));

let checks = 0;
const check = (actual, expected, what) => { assert.equal(actual, expected, what); ++checks; };

try {
  // ---------------------------------------------------------------- from disk: the whole tour
  const page = await open(pathToFileURL(path.join(pageDir, 'index.html')).href);

  // The four acts: each section of the program's output, verbatim.
  const sections = program.split(/^(?===)/m);
  for (let n = 1; n <= 4; ++n) {
    const part = sections.find((p) => p.startsWith(`== Act ${n}:`)).replace(/^== .* ==\n/, '');
    check(await text(page, `#act-${n}-output`), part, `act ${n}`);
  }
  await page.locator('#acts').screenshot({ path: path.join(shots, 'acts.png') });

  // The lab at its defaults (act 1, no mask, T = 1): act 1's weights.
  check(await text(page, '#lab-weights'), after('attn_weights = softmax(attn_scores, dim=-1)'), 'lab weights, T = 1');
  // Click a cell: query "journey" meets key "starts".
  await page.locator('#lab-heatmap td[data-i="1"][data-j="2"]').click();
  check(await text(page, '#cell-line'), line('score = '), 'the clicked cell');
  const dd = (n) => page.locator('#cell-steps dd').nth(n).textContent();
  check(`query: ${await dd(0)}`, line('query: '), 'the cell\'s query');
  check(`key:   ${await dd(1)}`, line('key:   '), 'the cell\'s key');
  check(`products: ${await dd(2)}`, line('products: '), 'the cell\'s products');
  await page.locator('#lab-heatmap td[data-i="1"][data-j="1"]').click();  // the softmax row below is journey's either way
  // Warm and cool the softmax: journey's row at each temperature the program prints.
  for (const T of [0.25, 0.5, 2, 4]) {
    await setRange(page, '#temperature', T);
    check(`T = ${T.toFixed(2)}: ${await dd(5)}`, line(`T = ${T.toFixed(2)}:`), `softmax row at T = ${T}`);
  }
  await setRange(page, '#temperature', 1);
  check(`mask off: ${await dd(5)}`, line('mask off:'), 'journey\'s row, mask off');
  // Toggle the causal mask.
  await page.locator('#mask').check();
  check(`mask on:  ${await dd(5)}`, line('mask on: '), 'journey\'s row, mask on');
  check(await text(page, '#lab-weights'), after('full causal weights (act 1 scores, mask on):'), 'causal weights');
  check(await page.locator('#lab-heatmap td[data-i="0"][data-j="5"]').textContent(), '0.00', 'a masked cell');
  // Act 2's scores, masked: act 3's weights.
  await page.locator('#source').selectOption('act2');
  check(await text(page, '#lab-weights'), after('masked attention weights = softmax(masked / sqrt(d_k)):'), 'act 3 weights');
  await page.locator('#lab-heatmap td[data-i="4"][data-j="2"]').click();
  await page.locator('#lab').screenshot({ path: path.join(shots, 'lab.png') });
  // A temperature of 0: the engine's message, and the page lives on.
  await setRange(page, '#temperature', 0);
  assert.match(await text(page, '#lab-error'), /temperature T must be a positive number, got 0/);
  assert.equal(await page.locator('#lab-error').isVisible(), true);
  await page.locator('#lab-error').screenshot({ path: path.join(shots, 'lab-error.png') });
  await setRange(page, '#temperature', 1);
  assert.equal(await page.locator('#lab-error').isVisible(), false);
  await page.locator('#source').selectOption('act1');
  await page.locator('#mask').uncheck();
  check(await text(page, '#lab-weights'), after('attn_weights = softmax(attn_scores, dim=-1)'), 'back to act 1');

  // The d_k slider: the program's four lines for each d_k it prints, then both extremes.
  const dims = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];
  const programLines = program.split('\n');
  for (const d_k of [2, 8, 32, 128, 512]) {
    await setRange(page, '#dk', dims.indexOf(d_k));
    const at = programLines.indexOf(`d_k = ${d_k}`);
    check(await text(page, '#dk-lines'), programLines.slice(at, at + 4).join('\n'), `d_k = ${d_k}`);
  }
  await page.locator('#lab .bars').screenshot({ path: path.join(shots, 'dk-512.png') });
  // Behind the 4-decimal rows: the page's engine answers every d_k with the native build's full-precision
  // numbers (from d_k = 16 on, randn draws Box-Muller in float: sin and cos from random::float_sincos).
  for (const d_k of [1, 8, 16, 32, 128, 512, 2048, 4096]) {
    const inPage = await page.evaluate((request) => engine.call('key_dimension', request), JSON.stringify({ d_k }));
    check(inPage, nativeLabText('key_dimension', { d_k }), `d_k = ${d_k}, full precision`);
  }
  await setRange(page, '#dk', 0);
  assert.match(await text(page, '#dk-error'), /d_k must be a whole number from 1 to 4096, got 0/);
  await setRange(page, '#dk', 1);
  assert.equal(await page.locator('#dk-error').isVisible(), false);
  assert.match(await text(page, '#dk-note'), /√d_k = 1/);
  await setRange(page, '#dk', 10);
  assert.match(await text(page, '#dk-note'), /d_k = 512: the unscaled softmax has collapsed into a spike/);
  await setRange(page, '#dk', 13);
  assert.match(await text(page, '#dk-note'), /d_k = 4096 is as far as the slider goes/);
  await page.locator('#dk-value').fill('-3');
  assert.match(await text(page, '#dk-error'), /got -3/);

  // Backward: (context_vecs ** 2).mean() with the mask; every node and every weight's gradient, against
  // the native build of the same code.
  await page.locator('#loss').selectOption('mean_squares');
  await page.locator('#backward-mask').check();
  await page.locator('#backward-run').click();
  const want = nativeLab('backward', { loss: 'mean_squares', token: 1, mask: true });
  const nodes = await page.locator('#backward-nodes li pre').allTextContents();
  check(nodes.length, want.nodes.length, 'backward: node count');
  nodes.forEach((t, i) => check(t, want.nodes[i].text, `backward node ${i + 1}`));
  check(await text(page, '#backward-loss'), `${want.loss_line}\n${want.loss}`, 'backward: the loss');
  const cells = await page.locator('#backward-grads td').allTextContents();
  check(cells.join(' '), want.grads.flatMap((g) => g.values.flat().map((v) => v.toPrecision(3))).join(' '), 'gradient heatmaps');
  assert.ok(nodes.some((t) => t.includes('MaskedFillBackward0')) || nodes.length > 10);
  await page.locator('#backward').screenshot({ path: path.join(shots, 'backward.png') });
  await page.locator('#backward-grads').screenshot({ path: path.join(shots, 'backward-grads.png') });
  await page.locator('#backward-nodes li').nth(5).screenshot({ path: path.join(shots, 'backward-node.png') });

  // Train 301 steps in the page.
  await page.locator('#train-run').click();
  await page.waitForSelector('body[data-trained="yes"]', { timeout: 300000 });
  const log = (await text(page, '#train-log')).split('\n');
  const trainer = native('scratchgrad', ['train']).split('\n');
  // The trainer's "step N | loss L | tok/s | time" lines without the timing, and its final loss.
  const trainerStep = (n) => trainer.find((l) => l.startsWith(`step ${String(n).padStart(3)} |`)).split(' | ').slice(0, 2).join(' | ');
  check(trainerStep(0), 'step   0 | loss 2.655', 'the native trainer\'s step 0');
  for (const n of [0, 100, 200, 300]) check(log.find((l) => l.startsWith(`step ${String(n).padStart(3)} |`)), trainerStep(n), `step ${n}'s loss`);
  check(log.find((l) => l.startsWith('final loss')), trainer.find((l) => l.startsWith('final loss')), 'the final loss');
  check(await text(page, '#train-generated'), 'aditi likes warm dosaw', 'generated text');
  assert.ok(trainer.includes('generated: aditi likes warm dosaw'));
  assert.match(await text(page, '#train-status'), /done: 301 steps/);
  await page.locator('#train').screenshot({ path: path.join(shots, 'train.png') });
  await page.screenshot({ path: path.join(shots, 'page.png'), fullPage: true });
  await page.close();

  // ---------------------------------------------------------------- over http, as `make lab` serves it
  const server = spawn('python3', ['-m', 'http.server', '0', '--bind', '127.0.0.1'], { cwd: pageDir });
  try {
    const port = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('http.server did not start')), 20000);
      const seen = (data) => {
        const m = /port (\d+)/.exec(String(data));
        if (m) { clearTimeout(timer); resolve(m[1]); }
      };
      server.stdout.on('data', seen);
      server.stderr.on('data', seen);
    });
    const served = await open(`http://127.0.0.1:${port}/`);
    check(await text(served, '#act-1-output'), sections.find((p) => p.startsWith('== Act 1:')).replace(/^== .* ==\n/, ''), 'served: act 1');
    await served.close();
  } finally {
    server.kill();
  }
} finally {
  await context.close();
  rmSync(userData, { recursive: true, force: true });
}

assert.deepEqual(problems, [], 'page or console errors');
console.log(`browser test: ${checks} displayed values match the native programs; screenshots in ${shots}`);
