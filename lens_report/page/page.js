
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("lens-data").textContent);
  const probe = document.createElement("div");
  probe.innerHTML = "<svg></svg>";  // the SVG namespace, without a URL in the page
  const SVG = probe.firstChild.namespaceURI;
  const nR = D.ranks.length, nS = D.steps.length, N = nR * nS;
  const ROW_H = 14, GAP = 10, AXIS_H = 36, CHAR_W = 7;
  const CLASSES = D.buckets.concat(["unknown"]);
  const column = new Map(D.steps.map((s, i) => [s, i]));
  const windows = new Map(D.windows.map(([r, it, lo, hi]) => [r + ":" + it, [lo, hi]]));
  const hm = document.getElementById("heatmap"), tip = document.getElementById("hm-tip");
  const box = document.getElementById("waterfall-box"), note = document.getElementById("waterfall-note");
  let cells = null;
  const sec = (s) => s.toFixed(3) + " s", pct = (x) => (100 * x).toFixed(1) + "%";

  async function decode() {
    if (!N) return;
    const bin = Uint8Array.from(atob(D.cells), (c) => c.charCodeAt(0));
    const stream = new Blob([bin]).stream().pipeThrough(new DecompressionStream("deflate"));
    cells = new Uint8Array(await new Response(stream).arrayBuffer());
    drawGoodput();
    document.body.dataset.cells = "ready";
  }
  function value(k, i, c) { return (cells[2 * k * N + i] * 256 + cells[(2 * k + 1) * N + i]) / 65535 * D.scale_s[c]; }
  function cell(r, c) {
    const i = r * nS + c;
    if (!cells[i] && !cells[N + i]) return null;
    return {wall: value(0, i, c), parts: D.buckets.map((b, k) => value(k + 1, i, c))};
  }
  function drawGoodput() {  // the goodput view, from the figures: red (0 %) to green (100 %) in 20 steps
    const canvas = document.getElementById("heatmap-goodput");
    if (!canvas) return;
    canvas.width = nS; canvas.height = nR;
    const ctx = canvas.getContext("2d"), img = ctx.createImageData(nS, nR);
    for (let r = 0; r < nR; r++) for (let c = 0; c < nS; c++) {
      const x = cell(r, c), o = 4 * (r * nS + c);
      let rgb = [235, 235, 235];
      if (x) {
        const t = Math.round((x.wall ? x.parts[0] / x.wall : 0) * 20) / 20;
        rgb = [200 + (40 - 200) * t, 30 + (150 - 30) * t, 30 + (70 - 30) * t].map(Math.round);
      }
      img.data.set([rgb[0], rgb[1], rgb[2], 255], o);
    }
    ctx.putImageData(img, 0, 0);
  }
  function describe(r, c) {
    const head = D.ranks[r] + " · step " + D.steps[c];
    const x = cell(r, c);
    if (!x) return head + "\nthis rank did not run this step";
    const median = D.median_s[c], done = x.parts.reduce((a, b) => a + b, 0);
    return [head,
      "step time " + sec(x.wall) + (median ? " (" + (x.wall / median).toFixed(2) + "× the step's median rank)" : ""),
      "goodput " + (x.wall ? pct(x.parts[0] / x.wall) : "-") + (D.coarse ? " (figures rounded to fit the page)" : ""),
      D.buckets.map((b, k) => b + " " + sec(x.parts[k])).join(", ") +
        ", unattributed " + sec(Math.max(0, x.wall - done)),
      "click: this step's waterfall"].join("\n");
  }
  function locate(ev) {
    const img = Array.from(hm.querySelectorAll("img, canvas")).find((i) => i.offsetWidth > 0);
    if (!img) return null;
    const b = img.getBoundingClientRect();
    const c = Math.floor((ev.clientX - b.left) / b.width * nS), r = Math.floor((ev.clientY - b.top) / b.height * nR);
    return c >= 0 && r >= 0 && c < nS && r < nR ? {r, c} : null;
  }
  if (hm) {
    hm.addEventListener("mousemove", (ev) => {
      const p = locate(ev);
      if (!p || !cells) { tip.hidden = true; return; }
      tip.textContent = describe(p.r, p.c);
      tip.hidden = false;
      const b = hm.getBoundingClientRect(), x = ev.clientX - b.left, y = ev.clientY - b.top;
      tip.style.left = (x + 16 + tip.offsetWidth > b.width ? Math.max(0, x - 16 - tip.offsetWidth) : x + 16) + "px";
      tip.style.top = (y + 16) + "px";
    });
    hm.addEventListener("mouseleave", () => { tip.hidden = true; });
    hm.addEventListener("click", (ev) => { const p = locate(ev); if (p) show(D.steps[p.c], p.r); });
  }
  document.querySelectorAll("tr.pick").forEach((tr) => tr.addEventListener("click", () => {
    const r = D.ranks.indexOf(tr.dataset.rank);
    if (r < 0) return;
    let c = column.get(Number(tr.dataset.step));
    if (c === undefined && cells) {  // its slowest step against the step's median rank
      let worst = -1;
      for (let k = 0; k < nS; k++) {
        const x = cell(r, k);
        if (x && D.median_s[k] && x.wall / D.median_s[k] > worst) { worst = x.wall / D.median_s[k]; c = k; }
      }
    }
    if (c !== undefined) show(D.steps[c], r);
  }));

  function el(name, attrs, text) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function fit(text, width) {
    const room = Math.floor(width / CHAR_W);
    return text.length <= room ? text : text.slice(0, Math.max(0, room - 1)) + "…";
  }
  function tickStep(us) {
    const raw = us / 10, m = Math.pow(10, Math.floor(Math.log10(raw)));
    return [1, 2, 5, 10].map((k) => k * m).find((v) => v >= raw) || raw;
  }
  function plotWidth(labelW) { return Math.max(600, (box.clientWidth || 1400) - labelW - 14); }
  function rankNumber(r) { const m = /^rank (\d+)$/.exec(D.ranks[r]); return m ? Number(m[1]) : null; }

  function show(step, r) {
    const ranks = [];
    for (let k = Math.max(0, r - 2); k <= Math.min(nR - 1, r + 2); k++) ranks.push(k);
    const have = ranks.filter((k) => windows.has(k + ":" + step));
    const names = ranks.map((k) => D.ranks[k]).join(", ");
    const drawn = have.length ? spans(step, have, r) : buckets(step, ranks, r);
    box.replaceChildren(drawn);
    note.textContent = "Step " + step + ", " + (have.length ? have.map((k) => D.ranks[k]).join(", ") : names) +
      " (" + D.ranks[r] + " and its neighbours)" + (have.length ? "; the axis is the step: longer spans are " +
      "clipped (dashed, with a mark at the cut end)." : "");
    document.getElementById("waterfall-title").scrollIntoView();
  }

  function spans(step, ranks, focus) {
    let lo = Infinity, hi = -Infinity;
    for (const k of ranks) { const w = windows.get(k + ":" + step); lo = Math.min(lo, w[0]); hi = Math.max(hi, w[1]); }
    const span = Math.max(1, hi - lo), keep = new Set(ranks);
    const lanes = new Map();
    D.spans.forEach((s) => {
      if (!keep.has(D.lanes[s[0]][0]) || s[3] > hi || s[3] + s[4] < lo) return;
      if (!lanes.has(s[0])) lanes.set(s[0], []);
      lanes.get(s[0]).push(s);
    });
    const order = Array.from(lanes.keys()).sort((a, b) => a - b);
    const labelW = Math.min(420, Math.max(120, 12 + CHAR_W * Math.max(0, ...order.map((l) => D.lanes[l][2].length))));
    const PLOT_W = plotWidth(labelW);
    const x = (us) => labelW + (us - lo) / span * PLOT_W;
    const g = el("g");
    let y = AXIS_H;
    for (const l of order) {
      const list = lanes.get(l), rows = Array.from(new Set(list.map((s) => s[1]))).sort((a, b) => a - b);
      const dense = new Map(rows.map((row, i) => [row, i]));
      g.appendChild(el("line", {class: "sep", x1: 0, x2: labelW + PLOT_W, y1: y, y2: y}));
      const label = el("text", {class: "lane" + (D.lanes[l][0] === focus ? " focus" : ""), x: 4, y: y + 11},
                       fit(D.lanes[l][2], labelW - 8));
      label.appendChild(el("title", {}, D.lanes[l][1]));
      g.appendChild(label);
      for (const s of list) {
        const start = Math.max(s[3], lo), end = Math.min(s[3] + s[4], hi);
        const left = x(start), top = y + 1 + dense.get(s[1]) * ROW_H, width = Math.max(1, x(end) - left);
        const cut = [s[3] < lo ? "starts " + ((lo - s[3]) / 1e6).toFixed(3) + " s before the step" : "",
                     s[3] + s[4] > hi ? "ends " + ((s[3] + s[4] - hi) / 1e6).toFixed(3) + " s after the step" : ""]
          .filter(Boolean);
        const bucket = s[5] < 0 ? "umbrella" : CLASSES[s[5]];
        const rect = el("rect", {class: "span b-" + bucket + (s[7] ? " error" : "") + (cut.length ? " clipped" : ""),
                                 x: left.toFixed(2), y: top, width: width.toFixed(2), height: ROW_H - 2});
        rect.appendChild(el("title", {}, [D.names[s[2]] || "(unnamed)", "duration: " + (s[4] / 1e6).toFixed(6) + " s",
          "bucket: " + (s[5] < 0 ? "none (umbrella)" : CLASSES[s[5]]), "iteration: " + (s[6] === null ? "-" : s[6]),
          D.lanes[l][1]].concat(cut.length ? ["clipped: " + cut.join("; ")] : []).join("\n")));
        g.appendChild(rect);
        const half = (ROW_H - 2) / 2;
        if (s[3] < lo) g.appendChild(el("path", {class: "clip-mark", d: `M${left + 5} ${top} l-5 ${half} l5 ${half} z`}));
        if (s[3] + s[4] > hi) {
          g.appendChild(el("path", {class: "clip-mark", d: `M${left + width - 5} ${top} l5 ${half} l-5 ${half} z`}));
        }
        if (width > 30) g.appendChild(el("text", {x: (left + 2).toFixed(2), y: top + 10}, fit(D.names[s[2]], width - 4)));
      }
      y += rows.length * ROW_H + GAP;
    }
    const width = labelW + PLOT_W + 10, svg = el("svg", {id: "waterfall", width, height: y, viewBox: `0 0 ${width} ${y}`});
    svg.appendChild(el("text", {x: 4, y: 12}, "step " + step + " start"));
    const every = tickStep(span);
    for (let t = 0; t <= span; t += every) {
      const tx = x(lo + t);
      svg.appendChild(el("line", {class: "tick", x1: tx, x2: tx, y1: AXIS_H - 4, y2: y}));
      if (tx + 60 < width && t > 0) svg.appendChild(el("text", {x: tx + 2, y: 28}, "+" + +(t / 1e6).toPrecision(6) + " s"));
    }
    svg.appendChild(g);
    return svg;
  }

  function buckets(step, ranks, focus) {
    const c = column.get(step), wrap = document.createElement("div"), p = document.createElement("p");
    const numbers = ranks.map(rankNumber).filter((n) => n !== null);
    p.textContent = "The spans of step " + step + " for these ranks are not in this page (it carries " +
      (D.span_steps ? "step " + D.span_steps.join(", ") : "the whole run") + " for " + "the ranks it could hold). " +
      "Their bucket split is below; to draw their spans: " + D.rerun + " --step " + step +
      (numbers.length ? " --ranks " + Math.min(...numbers) + "-" + Math.max(...numbers) : "");
    wrap.appendChild(p);
    if (c === undefined || !cells) return wrap;
    const rows = ranks.map((k) => [k, cell(k, c)]), longest = Math.max(1e-9, ...rows.map(([, x]) => x ? x.wall : 0));
    const labelW = 120, PLOT_W = plotWidth(labelW);
    const svg = el("svg", {id: "waterfall", width: labelW + PLOT_W + 10, height: AXIS_H + rows.length * 20});
    rows.forEach(([k, x], i) => {
      const y = AXIS_H + i * 20;
      svg.appendChild(el("text", {class: "lane" + (k === focus ? " focus" : ""), x: 4, y: y + 11}, fit(D.ranks[k], labelW - 8)));
      if (!x) return;
      let left = labelW;
      const parts = x.parts.concat([Math.max(0, x.wall - x.parts.reduce((a, b) => a + b, 0))]);
      parts.forEach((v, b) => {
        const w = v / longest * PLOT_W, name = b < D.buckets.length ? D.buckets[b] : "unattributed";
        if (w <= 0) return;
        const rect = el("rect", {class: "span b-" + name, x: left.toFixed(2), y, width: w.toFixed(2), height: 14});
        rect.appendChild(el("title", {}, D.ranks[k] + " · step " + step + "\n" + name + " " + sec(v)));
        svg.appendChild(rect);
        left += w;
      });
    });
    svg.appendChild(el("text", {x: labelW, y: 12}, "bucket seconds of step " + step + ", longest " + sec(longest)));
    wrap.appendChild(svg);
    return wrap;
  }

  decode().catch((e) => { document.body.dataset.cells = "failed"; console.warn("lens: cannot decode the heatmap figures", e); });
})();
