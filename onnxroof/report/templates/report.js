/* onnxroof report: the roofline chart, tooltips and the sortable, filterable kernel table; with a profile
 * (onnxroof report --profile), measured points beside the predicted ones and measured columns.
 * Model strings are untrusted: they reach the page only through textContent and setAttribute on
 * elements built here, never through innerHTML. No network, no library. */
(function () {
  "use strict";
  const started = performance.now();
  const SVG = "http://www.w3.org/2000/svg";
  const A = JSON.parse(document.getElementById("onnxroof-analysis").textContent);
  const V = JSON.parse(document.getElementById("onnxroof-view").textContent);

  // ------------------------------------------------------------------ formatting (mirrors report/units.py)
  const PREFIXES = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  const sig = (v, d) => String(Number(v.toPrecision(d)));
  function si(v, unit, d) {
    unit = unit || ""; d = d || 3;
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    if (!Number.isFinite(v)) return "∞";
    const m = Math.abs(v);
    for (const [f, p] of PREFIXES) if (m >= f) return (sig(v / f, d) + " " + p + unit).trim();
    return (sig(v, d) + " " + unit).trim();
  }
  function seconds(v) {
    if (!(v > 0)) return "0 s";
    for (const [f, u] of [[1, "s"], [1e-3, "ms"], [1e-6, "µs"]]) if (v >= f) return sig(v / f, 3) + " " + u;
    return sig(v / 1e-9, 3) + " ns";
  }
  const pct = (s) => (100 * s).toFixed(1) + "%";
  const num = (v) => (v === null || v === undefined) ? "∞" : (Math.abs(v) >= 1000 ? Math.round(v).toLocaleString("en-US") : sig(v, 3));
  const shape = (s) => s === null || s === undefined ? "?" : (s.length ? s.map((d) => d === null ? "?" : d).join("×") : "scalar");

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // Long node names wrap after "/" and "." (a <wbr>, not a character: copying the name copies it intact).
  function breakable(parent, text) {
    const parts = text.split(/(?<=[\/.])/);
    parts.forEach((part, j) => {
      if (j) parent.appendChild(document.createElement("wbr"));
      parent.appendChild(document.createTextNode(part));
    });
  }

  // ---------------------------------------------------------------------------------------- kernels
  const nodes = new Map(A.nodes.map((n) => [n.id, n]));
  const total = A.totals.latency_s || 1;
  // measured times from a profile: id -> {measured_s, predicted_s, ratio, achieved_flops, measured_with, ort_nodes}
  const M = new Map(((A.measured && A.measured.kernels) || []).map((m) => [m.id, m]));
  const measured = M.size > 0;
  const ratioText = (v) => (v === null || v === undefined ? "∞" : sig(v, 3)) + "×";
  const K = A.kernels.map((k, i) => {
    const first = nodes.get(k.node_ids[0]);
    const last = nodes.get(k.node_ids[k.node_ids.length - 1]);
    const name = first ? (first.name || first.id) : k.id;
    const extra = k.node_ids.length - 1;
    const label = extra > 0 ? name + " (+" + extra + "\u00a0fused)" : name;
    const bytes = k.bytes_read + k.bytes_written;
    const names = k.node_ids.map((id) => { const n = nodes.get(id); return n ? (n.name || n.id) : id; });
    const rec = {
      k, i, label, names, bytes,
      ops: k.op_types.join(" + "),
      op0: k.op_types[0] || "?",
      out: last && last.output_shapes.length ? shape(last.output_shapes[0]) : "",
      ins: first ? first.input_shapes.filter((s) => s !== null).map(shape) : [],
      perf: k.latency_s > 0 ? k.flops / k.latency_s : 0,
      share: k.latency_s / total,
      rank: 0,
      m: M.get(k.id) || null,
    };
    const ort = rec.m ? rec.m.ort_nodes : [];
    rec.text = [k.id, k.pattern, rec.ops, k.bound, k.precision, rec.out, ...names, ...ort].join(" ").toLowerCase();
    return rec;
  });
  K.slice().sort((a, b) => b.k.latency_s - a.k.latency_s || a.i - b.i).forEach((r, j) => { r.rank = j + 1; });

  let colourMode = "op";
  const colourOf = (r) => colourMode === "bound"
    ? (V.bound_colours[r.k.bound] || V.other_colour)
    : (V.op_colours[r.op0] || V.other_colour);

  // ------------------------------------------------------------------------------------------ chart
  const plat = A.platform;
  const R = V.roofs;  // the roofs the prediction used, with the datasheet figures beside them
  const roofPeak = (p) => R.peak_flops[p] || plat.peak_flops[p];
  // "sustained DRAM 102 GB/s (datasheet 137 GB/s)" where a sustained share derates the roof, else as given
  function roofLabel(value, datasheet, what, unit) {
    const derated = R.sustained && datasheet && Math.abs(value - datasheet) > 1e-9 * datasheet;
    return (derated ? "sustained " : "") + what + " " + si(value, unit) +
      (derated ? " (datasheet " + si(datasheet, unit) + ")" : "");
  }
  const used = V.precisions_used.filter((p) => plat.peak_flops[p]);
  const timeIn = {};
  for (const r of K) timeIn[r.k.precision] = (timeIn[r.k.precision] || 0) + r.k.latency_s;
  const primary = used.slice().sort((a, b) => (timeIn[b] || 0) - (timeIn[a] || 0))[0];
  const onRoof = K.filter((r) => r.k.flops > 0);
  const moveOnly = K.filter((r) => !(r.k.flops > 0));
  const hasMeasuredPoint = (r) => r.m !== null && r.m.achieved_flops > 0;
  const points = [];

  function logDomain(values, pad, minDecades) {
    let lo = Math.min(...values), hi = Math.max(...values);
    lo = Math.floor(Math.log10(lo / pad)); hi = Math.ceil(Math.log10(hi * pad));
    while (hi - lo < minDecades) { hi += 1; if (hi - lo < minDecades) lo -= 1; }
    return [lo, hi];
  }

  // A log–log frame (grid, a tick per decade, axis titles) on `root`; returns its scales. The roofline and the
  // floorline share it. f: {x0, x1, y0, y1 (decades), ml, mt, pw, plotH, xTick, yTick, xTitle, yTitle}
  function logFrame(root, f) {
    const X = (v) => f.ml + (Math.log10(v) - f.x0) / (f.x1 - f.x0) * f.pw;
    const Y = (v) => f.mt + f.plotH - (Math.log10(v) - f.y0) / (f.y1 - f.y0) * f.plotH;
    const grid = svg("g", { class: "grid" }), axis = svg("g", { class: "axis" });
    for (let d = f.x0; d <= f.x1; d++) {
      const x = X(Math.pow(10, d));
      grid.appendChild(svg("line", { x1: x, x2: x, y1: f.mt, y2: f.mt + f.plotH }));
      axis.appendChild(svg("text", { x: x, y: f.mt + f.plotH + 16, "text-anchor": "middle" }, f.xTick(Math.pow(10, d))));
    }
    for (let d = f.y0; d <= f.y1; d++) {
      const y = Y(Math.pow(10, d));
      grid.appendChild(svg("line", { x1: f.ml, x2: f.ml + f.pw, y1: y, y2: y }));
      axis.appendChild(svg("text", { x: f.ml - 8, y: y + 4, "text-anchor": "end" }, f.yTick(Math.pow(10, d))));
    }
    root.appendChild(grid);
    root.appendChild(svg("rect", { class: "frame", x: f.ml, y: f.mt, width: f.pw, height: f.plotH }));
    root.appendChild(axis);
    root.appendChild(svg("text", { class: "axis-title", x: f.ml + f.pw / 2, y: f.mt + f.plotH + 38,
      "text-anchor": "middle" }, f.xTitle));
    root.appendChild(svg("text", { class: "axis-title", x: 16, y: f.mt + f.plotH / 2, "text-anchor": "middle",
      transform: "rotate(-90 16 " + (f.mt + f.plotH / 2) + ")" }, f.yTitle));
    return { X, Y };
  }

  function drawChart() {
    const host = document.getElementById("roofline");
    const W = 1000, ml = 96, mr = 24, mt = 18, plotH = 430, mb = 50;
    const stripH = moveOnly.length ? 64 : 0, stripGap = moveOnly.length ? 44 : 0;
    const H = mt + plotH + mb + stripGap + stripH + (moveOnly.length ? 30 : 0);
    const pw = W - ml - mr;
    const root = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "roofline" });

    const ridges = used.map((p) => plat.ridge[p]);
    const xs = onRoof.map((r) => r.k.intensity).filter((v) => v !== null && v > 0);
    const [x0, x1] = logDomain(xs.concat(ridges).concat(ridges.length ? [] : [1]), 2, 4);
    const peaks = used.map((p) => roofPeak(p));
    const achieved = onRoof.filter(hasMeasuredPoint).map((r) => r.m.achieved_flops);
    const ys = onRoof.map((r) => r.perf).concat(achieved).filter((v) => v > 0);
    const [y0, y1] = logDomain(ys.concat(peaks).concat(peaks.length ? [] : [1e9]), 1.6, 3);
    const { X, Y } = logFrame(root, { x0, x1, y0, y1, ml, mt, pw, plotH,
      xTick: (v) => si(v), yTick: (v) => si(v, "FLOP/s"), xTitle: "arithmetic intensity (FLOP/byte)",
      yTitle: measured ? "throughput (FLOP/s): ● predicted, ◆ measured" : "predicted throughput (FLOP/s)" });
    const xmin = Math.pow(10, x0), xmax = Math.pow(10, x1), ymin = Math.pow(10, y0);

    // roofs: the memory slope up to each precision's ridge, then its flat compute roof. Drawn and labelled
    // with the roofs the prediction used (V.roofs: sustained shares applied unless --peak), the datasheet
    // figure after it in brackets where it differs.
    const bw = R.dram_bandwidth;
    const sx = Math.max(xmin, ymin / bw);
    const roofs = svg("g", {}), labels = svg("g", {});  // labels go over the points, with a halo
    const byPeak = used.slice().sort((a, b) => roofPeak(a) - roofPeak(b));
    for (const p of byPeak) {
      const peak = roofPeak(p), ridge = plat.ridge[p];
      const secondary = p !== primary;
      const d = "M" + X(sx) + "," + Y(sx * bw) + " L" + X(ridge) + "," + Y(peak) + " L" + X(xmax) + "," + Y(peak);
      roofs.appendChild(svg("path", { class: "roof" + (secondary ? " secondary" : ""), d: d }));
      roofs.appendChild(svg("line", { class: "ridge-line", x1: X(ridge), x2: X(ridge), y1: Y(peak) + 6, y2: mt + plotH }));
      labels.appendChild(svg("text", { class: "roof-label halo" + (secondary ? " secondary" : ""), x: ml + pw - 6,
        y: Y(peak) - 7, "text-anchor": "end" }, p + " " + roofLabel(peak, plat.peak_flops[p], "peak", "FLOP/s")));
      labels.appendChild(svg("text", { class: "ridge-label halo", x: X(ridge) + 8, y: Y(peak) + 16 },
        (used.length > 1 ? p + " " : "") + "ridge " + num(ridge) + " FLOP/B"));
      roofs.appendChild(svg("circle", { class: "ridge", cx: X(ridge), cy: Y(peak), r: 3.5 }));
    }
    if (byPeak.length) {  // bandwidth label along the slope
      const top = plat.ridge[byPeak[0]];
      const at = Math.pow(10, Math.log10(sx) + 0.42 * (Math.log10(top) - Math.log10(sx)));
      const ax = X(at), ay = Y(at * bw);
      const angle = Math.atan2(Y(top * bw) - Y(sx * bw), X(top) - X(sx)) * 180 / Math.PI;
      labels.appendChild(svg("text", { class: "roof-label halo", x: ax, y: ay - 8, "text-anchor": "middle",
        transform: "rotate(" + angle.toFixed(2) + " " + ax + " " + ay + ")" },
        roofLabel(bw, R.datasheet_dram_bandwidth, "DRAM", "B/s")));
    }
    root.appendChild(roofs);

    const dots = svg("g", {});
    const maxT = Math.max(...K.map((r) => r.k.latency_s), 1e-30);
    const radius = (r) => 2.6 + 15 * Math.sqrt(r.k.latency_s / maxT);
    function addPoint(r, cx, cy) {
      const c = svg("circle", { class: "pt", cx: cx.toFixed(1), cy: cy.toFixed(1), r: radius(r).toFixed(2),
        fill: colourOf(r), "data-i": r.i });
      points.push(c);
      r.dot = c;
      return c;
    }
    const order = (list) => list.slice().sort((a, b) => b.k.latency_s - a.k.latency_s);
    const links = svg("g", {}), marks = svg("g", {});
    for (const r of order(onRoof)) {
      const I = r.k.intensity === null ? xmax : Math.min(Math.max(r.k.intensity, xmin), xmax);
      const cx = X(I), cy = Y(Math.max(r.perf, ymin));
      dots.appendChild(addPoint(r, cx, cy));
      if (!hasMeasuredPoint(r)) continue;
      // the measured point: FLOPs ÷ measured time at the same intensity, joined to the predicted one
      const my = Y(Math.min(Math.max(r.m.achieved_flops, ymin), Math.pow(10, y1)));
      links.appendChild(svg("line", { class: "mlink", x1: cx.toFixed(1), x2: cx.toFixed(1), y1: cy.toFixed(1),
        y2: my.toFixed(1) }));
      const s = 5.5;
      const d = "M" + cx.toFixed(1) + "," + (my - s).toFixed(1) + " l" + s + "," + s + " l" + (-s) + "," + s +
        " l" + (-s) + "," + (-s) + " Z";
      r.mdot = svg("path", { class: "mpt", d: d, stroke: colourOf(r), "data-i": r.i, "data-measured": "1" });
      marks.appendChild(r.mdot);
    }

    // the strip: kernels with no FLOPs, placed by bytes moved
    if (moveOnly.length) {
      const top = mt + plotH + mb + stripGap;
      const moved = moveOnly.map((r) => Math.max(r.bytes, 1));
      const [b0, b1] = logDomain(moved, 1.5, 2);
      const B = (v) => ml + (Math.log10(v) - b0) / (b1 - b0) * pw;
      const time = moveOnly.reduce((s, r) => s + r.k.latency_s, 0);
      root.appendChild(svg("text", { class: "axis-title", x: ml, y: top - 10 },
        "No arithmetic (data movement only): " + moveOnly.length + " kernel" + (moveOnly.length === 1 ? "" : "s") +
        ", " + seconds(time) + " (" + pct(time / total) + " of predicted time), by bytes moved"));
      root.appendChild(svg("rect", { class: "strip-bg", x: ml, y: top, width: pw, height: stripH }));
      const sAxis = svg("g", { class: "axis" });
      for (let d = b0; d <= b1; d++) {
        const x = B(Math.pow(10, d));
        sAxis.appendChild(svg("line", { x1: x, x2: x, y1: top, y2: top + stripH, stroke: "#e6e8ef" }));
        sAxis.appendChild(svg("text", { x: x, y: top + stripH + 15, "text-anchor": "middle" }, si(Math.pow(10, d), "B")));
      }
      root.appendChild(sAxis);
      for (const r of order(moveOnly)) {
        const h = ((r.i * 2654435761) % 1000) / 1000;  // deterministic jitter so equal sizes do not stack
        const cy = top + stripH / 2 + (h - 0.5) * (stripH - 16);
        dots.appendChild(addPoint(r, B(Math.max(r.bytes, 1)), cy));
      }
    }
    root.appendChild(links);
    root.appendChild(dots);
    root.appendChild(marks);
    root.appendChild(labels);
    host.appendChild(root);
    wireTooltips(root);
  }

  // ------------------------------------------------ floorline (energy per operation; V.floorline, see html.py)
  function joules(v) {  // mirrors report/units.py
    if (v === null || v === undefined) return "–";
    if (!(v > 0)) return "0 J";
    for (const [f, u] of [[1, "J"], [1e-3, "mJ"], [1e-6, "µJ"], [1e-9, "nJ"]]) if (v >= f) return sig(v / f, 3) + " " + u;
    return sig(v / 1e-12, 3) + " pJ";
  }
  function drawFloorline() {
    const F = V.floorline, host = document.getElementById("floorline");
    if (!F || !host) return;
    const W = 1000, ml = 96, mr = 24, mt = 18, plotH = 430, mb = 50, pw = W - ml - mr;
    const root = svg("svg", { viewBox: "0 0 " + W + " " + (mt + plotH + mb), class: "roofline floorline" });
    const drawn = K.filter((r) => r.k.flops > 0 && r.k.energy_j > 0);
    const perOp = (r) => r.k.energy_j / r.k.flops;
    const xs = drawn.map((r) => r.k.intensity).filter((v) => v !== null && v > 0);
    const [x0, x1] = logDomain(xs.concat([F.ridge]), 2, 4);
    const [y0, y1] = logDomain(drawn.map(perOp).concat([F.e_op, 2 * F.e_op]), 1.6, 3);
    const { X, Y } = logFrame(root, { x0, x1, y0, y1, ml, mt, pw, plotH,
      xTick: (v) => si(v), yTick: (v) => joules(v) + "/op", xTitle: "arithmetic intensity (FLOP/byte)",
      yTitle: "energy per operation (J/op)" });
    const xmin = Math.pow(10, x0), xmax = Math.pow(10, x1), ymin = Math.pow(10, y0), ymax = Math.pow(10, y1);
    const lines = svg("g", {}), labels = svg("g", {});
    for (const floor of F.floors.slice().reverse()) {  // E_op + E_dram / I, from where it enters the chart
      const start = Math.max(xmin, F.e_dram / Math.max(ymax - floor.e_op, 1e-300));
      let d = "";
      for (let i = 0; i <= 120; i++) {
        const x = start * Math.pow(xmax / start, i / 120);
        d += (i ? " L" : "M") + X(x).toFixed(1) + "," + Y(floor.e_op + F.e_dram / x).toFixed(1);
      }
      lines.appendChild(svg("path", { class: "roof" + (floor.primary ? "" : " secondary"), d: d }));
    }
    lines.appendChild(svg("line", { class: "ridge-line", x1: ml, x2: ml + pw, y1: Y(F.e_op), y2: Y(F.e_op) }));
    lines.appendChild(svg("line", { class: "ridge-line", x1: X(F.ridge), x2: X(F.ridge), y1: Y(2 * F.e_op) + 6,
      y2: mt + plotH }));
    lines.appendChild(svg("circle", { class: "ridge", cx: X(F.ridge), cy: Y(2 * F.e_op), r: 3.5 }));
    labels.appendChild(svg("text", { class: "roof-label halo", x: ml + 6, y: Y(F.e_op) + 17 },
      F.precision + " floor E_op " + joules(F.e_op) + "/op"));
    labels.appendChild(svg("text", { class: "ridge-label halo", x: X(F.ridge) + 8, y: Y(2 * F.e_op) - 8 },
      "energy ridge " + num(F.ridge) + " FLOP/B"));
    const dots = svg("g", {});
    const maxE = Math.max(...drawn.map((r) => r.k.energy_j), 1e-300);
    for (const r of drawn.slice().sort((a, b) => b.k.energy_j - a.k.energy_j)) {  // small points on top
      const I = r.k.intensity === null ? xmax : Math.min(Math.max(r.k.intensity, xmin), xmax);
      r.fdot = svg("circle", { class: "pt", cx: X(I).toFixed(1), cy: Y(Math.max(perOp(r), ymin)).toFixed(1),
        r: (2.6 + 15 * Math.sqrt(r.k.energy_j / maxE)).toFixed(2),
        fill: V.bound_colours[r.k.energy_bound] || V.other_colour, "data-i": r.i });
      dots.appendChild(r.fdot);
    }
    root.appendChild(lines);
    root.appendChild(dots);
    root.appendChild(labels);
    host.appendChild(root);
    wireTooltips(root);
  }
  // ------------------------------------------------------------------------------------ end floorline

  // --------------------------------------------------------------------------------------- tooltip
  const tip = document.getElementById("tip");
  function tipRow(label, value) {
    const row = el("div", "t-row");
    row.appendChild(el("span", "", label));
    row.appendChild(el("span", "", value));
    return row;
  }
  function showTip(r, x, y, onMeasured) {
    const k = r.k;
    tip.replaceChildren();
    const title = el("div", "t-title");
    breakable(title, r.label);
    tip.appendChild(title);
    if (measured) tip.appendChild(tipRow("point", onMeasured ? "◆ measured in onnxruntime" : "● predicted"));
    tip.appendChild(tipRow("op", r.ops + (k.pattern !== "single" ? "  (" + k.pattern + ")" : "") + " · " + k.id));
    if (r.names.length > 1) {  // the first is the title; the others by their last path segments
      const tail = (n) => { const parts = n.split("/"); return parts.length > 2 ? "…/" + parts.slice(-2).join("/") : n; };
      const rest = r.names.slice(1);
      tip.appendChild(tipRow("with", rest.slice(0, 3).map(tail).join(", ") + (rest.length > 3 ? " and " + (rest.length - 3) + " more" : "")));
    }
    if (r.ins.length) tip.appendChild(tipRow("inputs", r.ins.join(", ")));
    if (r.out) tip.appendChild(tipRow("output", r.out));
    tip.appendChild(tipRow("FLOPs", si(k.flops, "FLOP") + (k.macs ? " (" + si(k.macs) + " MACs)" : "")));
    tip.appendChild(tipRow("bytes", si(r.bytes, "B") + " (" + si(k.bytes_read, "B") + " read, " +
      si(k.bytes_written, "B") + " written)"));
    tip.appendChild(tipRow("intensity", num(k.intensity) + " FLOP/B · ridge " + num(k.ridge) + " (" + k.precision + ")"));
    tip.appendChild(tipRow("bound", k.bound));
    tip.appendChild(tipRow("time", seconds(k.latency_s) + " · " + pct(r.share) + " of total"));
    tip.appendChild(tipRow("made of", "compute " + seconds(k.t_compute_s) + ", memory " + seconds(k.t_memory_s) +
      ", launch " + seconds(k.t_overhead_s)));
    if (k.energy_j !== null && k.energy_j !== undefined) {  // floorline figures
      tip.appendChild(tipRow("energy", joules(k.energy_j) + " (" + k.energy_bound + "-energy-bound)" +
        (k.flops > 0 ? " · " + joules(k.energy_j / k.flops) + "/op" : "")));
    }
    if (r.m) measuredRows(r);
    else if (measured) tip.appendChild(tipRow("measured", "none: onnxruntime did not run this kernel as profiled"));
    tip.hidden = false;
    const w = tip.offsetWidth, h = tip.offsetHeight;
    const left = x + 16 + w > window.innerWidth ? x - w - 16 : x + 16;
    const top = y + 16 + h > window.innerHeight ? Math.max(4, y - h - 12) : y + 16;
    tip.style.left = left + "px";
    tip.style.top = top + "px";
  }
  function measuredRows(r) {
    const m = r.m, k = r.k;
    tip.appendChild(tipRow("measured", seconds(m.measured_s) + " vs " + seconds(k.latency_s) + " predicted"));
    const ratio = m.ratio;
    const verdict = ratio === null ? "" : ratio > 1 ? " (slower than predicted)" : ratio < 1 ? " (faster than predicted)" : "";
    tip.appendChild(tipRow("ratio", ratioText(ratio) + verdict));
    if (k.flops > 0) {
      tip.appendChild(tipRow("achieved", si(m.achieved_flops, "FLOP/s") + " (predicted " + si(r.perf, "FLOP/s") + ")"));
    }
    if (m.measured_with.length) {
      tip.appendChild(tipRow("shared with", m.measured_with.join(", ") +
        ": onnxruntime ran them as one; the time is shared by predicted time"));
    }
    if (m.ort_nodes.length) {
      const more = m.ort_nodes.length > 3 ? " and " + (m.ort_nodes.length - 3) + " more" : "";
      tip.appendChild(tipRow("onnxruntime", m.ort_nodes.slice(0, 3).join(", ") + more));
    }
  }
  function wireTooltips(root) {
    let hot = null;
    root.addEventListener("pointermove", (e) => {
      const c = e.target.closest ? e.target.closest("circle.pt, path.mpt") : null;
      if (!c) { tip.hidden = true; hot = null; return; }
      const r = K[Number(c.getAttribute("data-i"))];
      if (r !== hot || tip.hidden) { hot = r; }
      showTip(r, e.clientX, e.clientY, c.hasAttribute("data-measured"));
    });
    root.addEventListener("pointerleave", () => { tip.hidden = true; hot = null; });
    root.addEventListener("click", (e) => {
      const c = e.target.closest ? e.target.closest("circle.pt, path.mpt") : null;
      if (!c) return;
      const r = K[Number(c.getAttribute("data-i"))];
      filterInput.value = "id:" + r.k.id;
      applyFilter();
      document.getElementById("kernels-panel").scrollIntoView({ behavior: "smooth", block: "start" });
    });
  }

  // ---------------------------------------------------------------------------------------- legend
  function drawLegend() {
    const host = document.getElementById("legend");
    host.replaceChildren();
    const entries = [];
    if (colourMode === "bound") {
      for (const b of Object.keys(V.bound_colours)) {
        const n = K.filter((r) => r.k.bound === b);
        if (n.length) entries.push([V.bound_colours[b], b + "-bound", n.reduce((s, r) => s + r.k.latency_s, 0)]);
      }
    } else {
      const time = {};
      for (const r of K) time[r.op0] = (time[r.op0] || 0) + r.k.latency_s;
      let other = 0, others = 0;
      for (const op of Object.keys(V.op_colours)) {
        if (V.op_colours[op] === V.other_colour) { other += time[op] || 0; others += 1; }
        else entries.push([V.op_colours[op], op, time[op] || 0]);
      }
      if (others) entries.push([V.other_colour, others + " other op type" + (others === 1 ? "" : "s"), other]);
    }
    for (const [colour, label, t] of entries) {
      const item = el("span", "item");
      const dot = el("span", "dot");
      dot.style.background = colour;
      item.appendChild(dot);
      item.appendChild(el("span", "", label));
      item.appendChild(el("span", "muted", pct(t / total)));
      host.appendChild(item);
    }
    if (measured) {  // the two markers: predicted (filled circle) and measured (hollow diamond)
      const shapes = el("span", "item shapes");
      shapes.appendChild(el("span", "shape-predicted"));
      shapes.appendChild(el("span", "", "predicted"));
      shapes.appendChild(el("span", "shape-measured"));
      shapes.appendChild(el("span", "", "measured (onnxruntime)"));
      shapes.appendChild(el("span", "muted", M.size + " of " + K.length + " kernels, Σ " +
        ratioText(A.measured.ratio) + " predicted"));
      host.appendChild(shapes);
    }
  }
  function recolour() {
    for (const r of K) {
      if (r.dot) r.dot.setAttribute("fill", colourOf(r));
      if (r.mdot) r.mdot.setAttribute("stroke", colourOf(r));
    }
    drawLegend();
  }
  for (const b of document.querySelectorAll(".toggle button")) {
    b.addEventListener("click", () => {
      colourMode = b.getAttribute("data-colour");
      for (const o of document.querySelectorAll(".toggle button")) {
        const on = o === b;
        o.classList.toggle("on", on);
        o.setAttribute("aria-pressed", on ? "true" : "false");
      }
      recolour();
    });
  }

  // ----------------------------------------------------------------------------------------- table
  const table = document.getElementById("kernels");
  const tbody = table.tBodies[0];
  const filterInput = document.getElementById("filter");
  const countEl = document.getElementById("count");
  const VALUE = {
    rank: (r) => r.rank, label: (r) => r.label, ops: (r) => r.ops, out: (r) => r.out, precision: (r) => r.k.precision,
    flops: (r) => r.k.flops, bytes: (r) => r.bytes, intensity: (r) => (r.k.intensity === null ? Infinity : r.k.intensity),
    bound: (r) => r.k.bound, latency: (r) => r.k.latency_s, share: (r) => r.share,
    measured: (r) => (r.m ? r.m.measured_s : -Infinity),
    ratio: (r) => (r.m ? (r.m.ratio === null ? Infinity : r.m.ratio) : -Infinity),
  };
  const maxShare = Math.max(...K.map((r) => r.share), 1e-30);
  // Rows are built when first shown and shown a page at a time (more on scroll or on the button): laying
  // out thousands of table rows at once would cost the browser more than everything else on the page.
  const PAGE = 150;
  const more = document.getElementById("more");
  let ordered = K, matched = K, shown = 0;
  function rowOf(r) {
    if (r.tr) return r.tr;
    const tr = document.createElement("tr");
    tr.appendChild(el("td", "num muted", String(r.rank)));
    const name = el("td", "name");
    breakable(name, r.label);
    if (r.k.pattern !== "single") name.appendChild(el("span", "pattern", r.k.pattern));
    tr.appendChild(name);
    tr.appendChild(el("td", "ops", r.ops));
    tr.appendChild(el("td", "out", r.out));
    tr.appendChild(el("td", "", r.k.precision));
    tr.appendChild(el("td", "num", si(r.k.flops)));
    tr.appendChild(el("td", "num", si(r.bytes, "B")));
    tr.appendChild(el("td", "num", num(r.k.intensity)));
    tr.appendChild(el("td", "b-" + (r.k.bound === "compute" ? "compute" : "memory"), r.k.bound));
    tr.appendChild(el("td", "num", seconds(r.k.latency_s)));
    const share = el("td", "num");
    const bar = el("span", "sharebar");
    bar.style.width = Math.max(1, Math.round(48 * r.share / maxShare)) + "px";
    share.appendChild(bar);
    share.appendChild(document.createTextNode(pct(r.share)));
    tr.appendChild(share);
    if (measured) {
      const m = r.m;
      const time = el("td", "num", m ? seconds(m.measured_s) : "–");
      if (m && m.measured_with.length) {
        time.classList.add("shared");
        time.title = "measured as one with " + m.measured_with.join(", ") + "; shared by predicted time";
      } else if (!m) time.title = "not measured: onnxruntime did not run this kernel as profiled";
      tr.appendChild(time);
      const cls = !m ? "num muted" : m.ratio === null || m.ratio > 1.25 ? "num r-slow" : m.ratio < 0.8 ? "num r-fast" : "num";
      tr.appendChild(el("td", cls, m ? ratioText(m.ratio) : "–"));
    }
    tr.setAttribute("data-kernel", r.k.id);
    r.tr = tr;
    return tr;
  }
  function showRows(upTo) {  // append rows up to index upTo of the matched list
    const frag = document.createDocumentFragment();
    const end = Math.min(upTo, matched.length);
    for (; shown < end; shown++) frag.appendChild(rowOf(matched[shown]));
    tbody.appendChild(frag);
    const left = matched.length - shown;
    more.hidden = left <= 0;
    more.textContent = "show " + Math.min(PAGE, left) + " more (" + left + " not shown)";
  }
  function render() {
    tbody.replaceChildren();
    shown = 0;
    showRows(PAGE);
  }
  more.addEventListener("click", () => showRows(shown + PAGE));
  const wrap = table.parentElement;
  wrap.addEventListener("scroll", () => {
    if (!more.hidden && wrap.scrollTop + wrap.clientHeight > wrap.scrollHeight - 300) showRows(shown + PAGE);
  });

  let sortKey = "latency", sortDir = -1;
  function sortRows() {
    const get = VALUE[sortKey];
    const numeric = sortKey !== "label" && sortKey !== "ops" && sortKey !== "out" && sortKey !== "precision" && sortKey !== "bound";
    ordered = K.slice().sort((a, b) => {
      const va = get(a), vb = get(b);
      const c = numeric ? (va < vb ? -1 : va > vb ? 1 : 0) : String(va).localeCompare(String(vb));
      return c * sortDir || a.rank - b.rank;
    });
    for (const th of table.tHead.rows[0].cells) {
      th.classList.toggle("sorted-asc", th.getAttribute("data-key") === sortKey && sortDir === 1);
      th.classList.toggle("sorted-desc", th.getAttribute("data-key") === sortKey && sortDir === -1);
      th.setAttribute("aria-sort", th.getAttribute("data-key") === sortKey ? (sortDir === 1 ? "ascending" : "descending") : "none");
    }
  }
  for (const th of table.tHead.rows[0].cells) {
    th.addEventListener("click", () => {
      const key = th.getAttribute("data-key");
      if (key === sortKey) sortDir = -sortDir;
      else { sortKey = key; sortDir = th.getAttribute("data-num") && key !== "rank" ? -1 : 1; }
      sortRows();
      applyFilter();
    });
  }
  function applyFilter() {
    const words = filterInput.value.toLowerCase().split(/\s+/).filter(Boolean);
    const exact = words.length === 1 && words[0].startsWith("id:");
    const keep = (r) => words.every((w) => (w.startsWith("id:") ? r.k.id.toLowerCase() === w.slice(3) : r.text.includes(w)));
    matched = words.length ? ordered.filter(keep) : ordered;
    const hits = new Set(words.length ? matched : []);
    for (const r of K) {
      if (r.dot) r.dot.classList.toggle("hot", hits.has(r));
      if (r.mdot) r.mdot.classList.toggle("hot", hits.has(r));
      if (r.fdot) r.fdot.classList.toggle("hot", hits.has(r));
      if (r.tr) r.tr.classList.toggle("hot", exact && hits.has(r));
    }
    render();
    countEl.textContent = words.length ? matched.length + " of " + K.length + " kernels" : K.length + " kernels";
  }
  let pending = 0;
  filterInput.addEventListener("input", () => { clearTimeout(pending); pending = setTimeout(applyFilter, 60); });

  drawChart();
  drawFloorline();
  drawLegend();
  sortRows();
  applyFilter();
  document.documentElement.setAttribute("data-render-ms", (performance.now() - started).toFixed(1));
  document.documentElement.setAttribute("data-ready", "1");
})();
