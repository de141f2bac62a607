// The dashboard's charts: inline SVG with time and value axes, drawn from
// arrays of [unix_ms, value] points. Plain JavaScript, no libraries.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const CHART = { W: 640, H: 200, left: 52, right: 10, top: 10, bottom: 24 };

function svgEl(name, attrs, text) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// niceStep is a round step (1, 2 or 5 times a power of ten) that cuts
// top into about n parts.
function niceStep(top, n) {
  const raw = top / n;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// tickFormat formats the value ticks of a step: as many decimals as the
// step needs, large values compact (1.2K).
function tickFormat(step) {
  const digits = step < 1 ? Math.min(Math.ceil(-Math.log10(step)), 6) : 0;
  return new Intl.NumberFormat("en", { maximumFractionDigits: digits, notation: step >= 1000 ? "compact" : "standard" });
}

function timeLabel(ms, span) {
  const d = new Date(ms);
  const opts = span > 36 * 3600e3 ? { month: "short", day: "numeric", hour: "2-digit" }
    : span > 600e3 ? { hour: "2-digit", minute: "2-digit" }
    : { hour: "2-digit", minute: "2-digit", second: "2-digit" };
  return d.toLocaleTimeString("en-GB", opts);
}

// drawChart draws lines ([{pts: [[ms, v], ...], cls, label}]) over
// [start, end] into svg, with value ticks on the left and time ticks
// below, and returns the highest value drawn. unit follows the value
// ticks ("s", "/s" or "").
function drawChart(svg, lines, start, end, unit) {
  const { W, H, left, right, top, bottom } = CHART;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.replaceChildren();
  let peak = 0;
  for (const l of lines) for (const p of l.pts) if (p[0] >= start && p[0] <= end && p[1] != null) peak = Math.max(peak, p[1]);
  const step = niceStep(peak > 0 ? peak : 1, 4);
  const vmax = Math.max(step * Math.ceil((peak > 0 ? peak : 1) / step), step);
  const pw = W - left - right, ph = H - top - bottom;
  const x = (t) => left + (end > start ? (t - start) / (end - start) : 1) * pw;
  const y = (v) => top + ph - (v / vmax) * ph;
  const axes = svgEl("g", { class: "axes" });
  const num = tickFormat(step);
  for (let i = 0; i * step <= vmax + step / 2; i++) {
    const v = i * step;
    axes.append(svgEl("line", { class: "grid", x1: left, x2: W - right, y1: y(v), y2: y(v) }));
    axes.append(svgEl("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, num.format(v) + unit));
  }
  const span = end - start;
  const tstep = [1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400]
    .map((s) => s * 1000).find((s) => span / s <= 6) || 86400e3;
  for (let t = Math.ceil(start / tstep) * tstep; t <= end; t += tstep) {
    axes.append(svgEl("line", { class: "tick", x1: x(t), x2: x(t), y1: top + ph, y2: top + ph + 4 }));
    const anchor = x(t) > W - right - 30 ? "end" : x(t) < left + 30 ? "start" : "middle";
    axes.append(svgEl("text", { x: x(t), y: H - 6, "text-anchor": anchor }, timeLabel(t, span)));
  }
  axes.append(svgEl("line", { class: "axis", x1: left, x2: left, y1: top, y2: top + ph }));
  axes.append(svgEl("line", { class: "axis", x1: left, x2: W - right, y1: top + ph, y2: top + ph }));
  svg.append(axes);
  for (const l of lines) {
    const pts = l.pts.filter((p) => p[0] >= start && p[0] <= end && p[1] != null)
      .map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1));
    const pl = svgEl("polyline", { class: "line " + (l.cls || ""), points: pts.join(" ") });
    if (l.label) pl.append(svgEl("title", {}, l.label));
    svg.append(pl);
    if (pts.length === 1) {
      // One point is no line: a dot shows it.
      const [cx, cy] = pts[0].split(",");
      svg.append(svgEl("circle", { class: "dot " + (l.cls || ""), cx, cy, r: 3 }));
    }
  }
  return peak;
}

// mergeSeries merges per-second points of several sources into one
// series, each second taking the largest value any source has for it.
// With zeroFill (rates), a second no source has between two points is a
// zero, so a line does not bridge a quiet time.
function mergeSeries(zeroFill, ...sources) {
  const by = new Map();
  for (const src of sources) {
    for (const [t, v] of src) {
      if (v == null) continue;
      const s = Math.floor(t / 1000) * 1000;
      by.set(s, Math.max(by.has(s) ? by.get(s) : 0, v));
    }
  }
  const pts = [...by.entries()].sort((a, b) => a[0] - b[0]);
  if (!zeroFill) return pts;
  const out = [];
  for (const p of pts) {
    const prev = out.length ? out[out.length - 1][0] : null;
    if (prev !== null && p[0] - prev > 1000) {
      out.push([prev + 1000, 0]);
      if (p[0] - prev > 2000) out.push([p[0] - 1000, 0]);
    }
    out.push(p);
  }
  return out;
}
