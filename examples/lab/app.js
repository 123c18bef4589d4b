// app.js — the lab page. Every number it shows comes from lab.js: scratchgrad's engine compiled to
// WebAssembly (examples/lab/lab.cpp), called as lab.call(function, JSON request) → JSON answer.
'use strict';

const $ = (id) => document.getElementById(id);
let engine = null;

// One call into the engine. An answer {"error": ...} (bad input: the engine's exception text) is shown
// in the panel's message box and returns null; the rest of the page stays alive.
// The header's switch: every call runs on the CPU kernels, or on the reference kernels (the plain loops of
// autograd/reference/, what a learner steps into in gdb).
function kernels() {
  const box = $('reference-kernels');
  return box && box.checked ? 'reference' : 'cpu';
}

function call(fn, request, errorBox) {
  const answer = JSON.parse(engine.call(fn, JSON.stringify({ ...(request || {}), kernels: kernels() })));
  if (errorBox) {
    errorBox.hidden = !answer.error;
    errorBox.textContent = answer.error || '';
  }
  return answer.error ? null : answer;
}

// ---------------------------------------------------------------- drawing helpers

function element(tag, attributes, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attributes || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// Weights in [0, 1]: white to blue, 2 decimals. Gradients (signed): red below zero, blue above, scaled by
// the matrix's largest, 3 significant digits.
function colour(v, signed, largest) {
  if (v === null) return '#eeeeee';  // -inf (a masked score)
  const t = signed ? Math.min(1, Math.abs(v) / (largest || 1)) : Math.max(0, Math.min(1, v));
  const [r, g, b] = signed && v < 0 ? [203, 67, 53] : [41, 98, 255];
  const mix = (c) => Math.round(255 + (c - 255) * t);
  return `rgb(${mix(r)}, ${mix(g)}, ${mix(b)})`;
}

// A table heatmap of a matrix; onClick(i, j) makes the cells buttons.
function heatmap(box, matrix, options) {
  const { rows, cols, signed, digits = 2, onClick, selected } = options;
  const largest = Math.max(...matrix.flat().filter((v) => v !== null).map(Math.abs));
  const table = element('table', { class: 'heatmap' });
  const head = element('tr');
  head.appendChild(element('th'));
  for (const c of cols) head.appendChild(element('th', {}, c));
  table.appendChild(head);
  matrix.forEach((row, i) => {
    const tr = element('tr');
    tr.appendChild(element('th', {}, rows[i]));
    row.forEach((v, j) => {
      const shown = v === null ? '−∞' : signed ? v.toPrecision(digits) : v.toFixed(digits);
      const td = element('td', { 'data-i': i, 'data-j': j }, shown);
      td.style.background = colour(v, signed, largest);
      const strength = signed ? Math.abs(v) / (largest || 1) : v;
      if (v !== null && strength > 0.6) td.style.color = 'white';
      if (onClick) {
        td.classList.add('clickable');
        td.addEventListener('click', () => onClick(i, j));
      }
      if (selected && selected[0] === i && selected[1] === j) td.classList.add('selected');
      tr.appendChild(td);
    });
    table.appendChild(tr);
  });
  box.replaceChildren(table);
}

function bars(box, values) {
  box.replaceChildren(...values.map((v, i) => {
    const bar = element('div', { class: 'bar', title: v.toFixed(4) });
    bar.style.height = `${Math.max(1, v * 100)}px`;
    const cell = element('div', { class: 'bar-cell' });
    cell.append(bar, element('span', {}, v.toFixed(4)), element('span', { class: 'key' }, `k${i + 1}`));
    return cell;
  }));
}

// ---------------------------------------------------------------- the four acts

const TOKENS = ['Your', 'journey', 'starts', 'with', 'one', 'step'];

function showActs() {
  const text = call('acts').text;
  const parts = text.split(/^(?===)/m);  // "== Act 1: ... ==" headers start each section
  for (let n = 1; n <= 4; ++n) {
    const part = parts.find((p) => p.startsWith(`== Act ${n}:`));
    $(`act-${n}-output`).textContent = part.replace(/^== .* ==\n/, '');
  }
  const act1 = call('attention', { source: 'act1' });
  heatmap($('act-1-heatmap'), act1.weights, { rows: TOKENS, cols: TOKENS });
  const act2 = call('attention', { source: 'act2' });
  heatmap($('act-2-heatmap'), act2.weights, { rows: TOKENS, cols: TOKENS });
  const act3 = call('attention', { source: 'act2', mask: true });
  heatmap($('act-3-heatmap'), act3.weights, { rows: TOKENS, cols: TOKENS });
}

// ---------------------------------------------------------------- the lab

const lab = { query: 1, key: 2 };

function labRequest() {
  return { source: $('source').value, mask: $('mask').checked, temperature: Number($('temperature').value) };
}

function updateLab() {
  const request = labRequest();
  $('temperature-value').textContent = request.temperature.toFixed(2);
  const a = call('attention', request, $('lab-error'));
  document.querySelector('#lab .lab-body').classList.toggle('stale', !a);
  if (!a) return;
  heatmap($('lab-heatmap'), a.weights, {
    rows: a.tokens, cols: a.tokens, selected: [lab.query, lab.key],
    onClick: (i, j) => { lab.query = i; lab.key = j; updateLab(); },
  });
  const divide = a.d_k === null ? (a.temperature === 1 ? '' : ` / ${a.temperature}`) : ` / (√${a.d_k} · ${a.temperature})`;
  $('lab-code').textContent = `${a.code}\nattn_weights = softmax(attn_scores${divide}, dim=-1)`;
  $('lab-weights').textContent = a.printed.weights;
  updateCell(request);
}

function updateCell(request) {
  const c = call('cell', { ...request, query: lab.query, key: lab.key }, $('lab-error'));
  if (!c) return;
  $('cell-title').textContent = `query “${c.query_token}” meets key “${c.key_token}”`;
  const steps = [
    ['q', c.printed.query],
    ['k', c.printed.key],
    ['q ⊙ k', c.printed.products],
    ['q · k', c.score.toFixed(4)],
    [c.d_k === null ? '÷ T' : `÷ (√${c.d_k} · T)`, c.masked ? '−∞ (masked: a key in the future)' : c.scaled.toFixed(4)],
    ['softmax row', c.printed.row],
    ['weight', c.weight.toFixed(4)],
  ];
  $('cell-steps').replaceChildren(...steps.flatMap(([k, v]) => [element('dt', {}, k), element('dd', {}, v)]));
  $('cell-line').textContent = c.line;
}

// The d_k slider walks these values; the number box takes any (the engine says what it refuses).
const KEY_DIMENSIONS = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

function updateKeyDimension(d_k) {
  const k = call('key_dimension', { d_k }, $('dk-error'));
  document.querySelector('#lab .bars').classList.toggle('stale', !k);
  if (!k) {
    $('dk-note').textContent = '';
    return;
  }
  bars($('dk-unscaled'), k.unscaled);
  bars($('dk-scaled'), k.scaled);
  $('dk-lines').textContent = k.lines.join('\n');
  $('dk-note').textContent = k.note;
}

// ---------------------------------------------------------------- backward

function runBackward() {
  const request = { loss: $('loss').value, token: Number($('loss-token').value), mask: $('backward-mask').checked };
  const b = call('backward', request, $('backward-error'));
  if (!b) return;
  $('backward-loss').textContent = `${b.loss_line}\n${b.loss}`;
  $('backward-header').textContent = b.header;
  $('backward-nodes').replaceChildren(...b.nodes.map((n) => {
    const li = element('li', { class: 'node' });
    li.appendChild(element('pre', {}, n.text));
    return li;
  }));
  $('backward-grads').replaceChildren(...b.grads.map((g) => {
    const box = element('div', { class: 'grad' });
    box.appendChild(element('h4', {}, `${g.name}.grad ${g.shape}`));
    const map = element('div');
    heatmap(map, g.values, { rows: g.values.map((_, i) => `out ${i}`), cols: ['x₁', 'x₂', 'x₃'], signed: true, digits: 3 });
    box.appendChild(map);
    return box;
  }));
}

// ---------------------------------------------------------------- train

function drawCurve(losses, steps) {
  const svg = $('loss-curve');
  const W = 600, H = 220, left = 40, bottom = 20;
  const top = Math.max(3, ...losses);
  const x = (i) => left + (W - left - 10) * (i / Math.max(1, steps - 1));
  const y = (v) => (H - bottom) - (H - bottom - 10) * (v / top);
  const points = losses.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
  svg.innerHTML = `<line x1="${left}" y1="${H - bottom}" x2="${W - 10}" y2="${H - bottom}" class="axis"/>
    <line x1="${left}" y1="10" x2="${left}" y2="${H - bottom}" class="axis"/>
    <text x="4" y="${y(top) + 4}">${top.toFixed(1)}</text><text x="4" y="${H - bottom}">0</text>
    <text x="${left}" y="${H - 4}">step 0</text><text x="${W - 70}" y="${H - 4}">step ${steps - 1}</text>
    <polyline points="${points}" class="curve"/>`;
}

let training = false;

function runTraining() {
  if (training) return;
  const request = { text: $('train-text').value, steps: Number($('train-steps').value) };
  const start = call('train_start', request, $('train-error'));
  if (!start) return;
  training = true;
  $('train-run').disabled = true;
  $('train-generated').textContent = '';
  const losses = [], lines = [start.line];
  $('train-log').textContent = lines.join('\n');
  const began = performance.now();
  // A few steps per frame: the page stays responsive and the curve grows as the model learns.
  const slice = () => {
    const part = call('train_steps', { count: 5 }, $('train-error'));
    if (!part) return finishTraining();
    losses.push(...part.losses);
    lines.push(...part.lines);
    $('train-log').textContent = lines.join('\n');
    $('train-status').textContent = `step ${part.step} of ${part.steps}, ${((performance.now() - began) / 1000).toFixed(1)} s`;
    drawCurve(losses, part.steps);
    if (!part.done) return requestAnimationFrame(slice);
    const sample = call('train_sample', {}, $('train-error'));
    if (sample) {
      lines.push(`final loss ${losses[losses.length - 1].toFixed(3)}`, sample.line);
      $('train-log').textContent = lines.join('\n');
      $('train-generated').textContent = sample.generated;
    }
    $('train-status').textContent = `done: ${part.steps} steps in ${((performance.now() - began) / 1000).toFixed(1)} s`;
    finishTraining();
  };
  requestAnimationFrame(slice);
}

function finishTraining() {
  training = false;
  $('train-run').disabled = false;
  document.body.dataset.trained = 'yes';  // for the browser test
}

// ---------------------------------------------------------------- start

function wire() {
  for (const id of ['source', 'mask', 'temperature']) $(id).addEventListener('input', updateLab);
  $('dk').addEventListener('input', () => {
    const d_k = KEY_DIMENSIONS[Number($('dk').value)];
    $('dk-value').value = d_k;
    updateKeyDimension(d_k);
  });
  $('dk-value').addEventListener('input', () => updateKeyDimension(Number($('dk-value').value)));
  $('backward-run').addEventListener('click', runBackward);
  $('train-run').addEventListener('click', runTraining);
}

createLab().then((module) => {
  engine = module;
  wire();
  showActs();
  updateLab();
  updateKeyDimension(KEY_DIMENSIONS[Number($('dk').value)]);
  $('status').textContent = 'Engine loaded: scratchgrad, compiled to WebAssembly.';
  document.body.dataset.ready = 'yes';  // for the browser test
});
