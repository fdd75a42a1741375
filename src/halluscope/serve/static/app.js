// Shared by the dashboard and the review page: the API key (kept in this browser's localStorage), API calls, and
// small SVG charts (no third-party code, no CDN).
const HS = {
  key() { return localStorage.getItem("halluscope-key") || ""; },
  async api(path, opts = {}) {
    const headers = Object.assign({"Content-Type": "application/json"}, opts.headers || {});
    if (HS.key()) headers["Authorization"] = "Bearer " + HS.key();
    const r = await fetch(path, Object.assign({}, opts, {headers}));
    if (r.status === 401 || r.status === 403) { HS.askKey(r.status === 401 ? "This page needs an API key." : "This key lacks the scope for this page."); throw new Error("auth " + r.status); }
    if (!r.ok) throw new Error("HTTP " + r.status + ": " + await r.text());
    return r.json();
  },
  askKey(msg) {
    const box = document.getElementById("keybox");
    box.classList.add("show");
    document.getElementById("keymsg").textContent = msg;
  },
  initKeyForm(onSaved) {
    document.getElementById("keyform").addEventListener("submit", (e) => {
      e.preventDefault();
      localStorage.setItem("halluscope-key", document.getElementById("keyinput").value.trim());
      document.getElementById("keybox").classList.remove("show");
      onSaved();
    });
  },
  esc(s) { return String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c])); },
  colour(p) {  // 0 -> green, 0.5 -> yellow, 1 -> red, light enough to read text on
    const h = 120 * (1 - Math.max(0, Math.min(1, p)));
    return `hsl(${h}, 70%, 85%)`;
  },
  svg(w, h, inner) { return `<svg viewBox="0 0 ${w} ${h}" width="100%" role="img">${inner}</svg>`; },
  lineChart(series, w = 560, h = 220, step = 0) {
    // series: {name: [{t, rate, n}]}; x = time, y = rate in [0, 1]; step: the bucket in ms (a line breaks over empty
    // buckets rather than suggest answers there)
    const pts = Object.values(series).flat();
    if (!pts.length) return "<p class='muted'>No answers in this range yet.</p>";
    const ts = pts.map((p) => Date.parse(p.t)), t0 = Math.min(...ts), t1 = Math.max(...ts) || t0 + 1;
    const L = 40, R = 110, T = 10, B = 30, X = (t) => L + (t1 === t0 ? (w - L - R) / 2 : (t - t0) / (t1 - t0) * (w - L - R));
    const Y = (v) => T + (1 - v) * (h - T - B);
    const palette = ["#1c7ed6", "#e8590c", "#2f9e44", "#ae3ec9", "#f08c00", "#0c8599"];
    let s = `<line x1="${L}" y1="${Y(0)}" x2="${w - R}" y2="${Y(0)}" stroke="#98a2b3"/><line x1="${L}" y1="${T}" x2="${L}" y2="${Y(0)}" stroke="#98a2b3"/>`;
    for (const v of [0, 0.5, 1]) s += `<text x="${L - 6}" y="${Y(v) + 4}" text-anchor="end">${v * 100}%</text>`;
    const {step: tstep, ticks} = HS.timeTicks(t0, t1);
    ticks.forEach((t, k) => {  // round UTC times; the date where a day starts (and on the first tick)
      const x = X(t).toFixed(1);
      s += `<line class="xtick" x1="${x}" y1="${Y(0)}" x2="${x}" y2="${Y(0) + 4}" stroke="#98a2b3"/>`;
      s += `<text class="xtick" x="${x}" y="${h - 12}" text-anchor="middle">${HS.tickLabel(t, tstep, k === 0 || t % 864e5 === 0)}</text>`;
    });
    s += `<text x="${w - R + 10}" y="${h - 12}">UTC</text>`;
    Object.entries(series).forEach(([name, ps], i) => {
      const c = palette[i % palette.length];
      const d = ps.map((p, k) => `${k && !(step && Date.parse(p.t) - Date.parse(ps[k - 1].t) > 1.5 * step) ? "L" : "M"}${X(Date.parse(p.t)).toFixed(1)},${Y(p.rate).toFixed(1)}`).join(" ");
      s += `<path d="${d}" fill="none" stroke="${c}" stroke-width="2"/>`;
      s += ps.map((p) => `<circle cx="${X(Date.parse(p.t)).toFixed(1)}" cy="${Y(p.rate).toFixed(1)}" r="3" fill="${c}"><title>${HS.esc(name)} ${p.t}: ${(100 * p.rate).toFixed(1)}% of ${p.n}</title></circle>`).join("");
      s += `<rect x="${w - R + 10}" y="${T + 16 * i}" width="10" height="10" fill="${c}"/><text x="${w - R + 24}" y="${T + 9 + 16 * i}">${HS.esc(name)}</text>`;
    });
    return HS.svg(w, h, s);
  },
  timeTicks(t0, t1, most = 5) {
    // round UTC times for the time axis: the smallest of these steps that gives at most `most` ticks over [t0, t1]
    // (beyond them, whole multiples of 28 days)
    const m = 60e3, d = 864e5, steps = [m, 5 * m, 15 * m, 30 * m, 60 * m, 180 * m, 360 * m, 720 * m, d, 2 * d, 7 * d, 14 * d, 28 * d];
    const step = steps.find((st) => (t1 - t0) / st < most) || 28 * d * Math.ceil((t1 - t0) / (28 * d * most) + 1e-9);
    const ticks = [];
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) ticks.push(t);
    return {step, ticks: ticks.length ? ticks : [t0]};
  },
  tickLabel(t, step, withDate) {
    // "HH:MM" within a day, "MM-DD HH:MM" where the date changes, "MM-DD" for day steps, "YYYY-MM-DD" from 28 days
    const iso = new Date(t).toISOString(), time = iso.slice(11, t % 60e3 ? 19 : 16);
    if (step >= 28 * 864e5) return iso.slice(0, 10);
    return step >= 864e5 ? iso.slice(5, 10) : (withDate ? iso.slice(5, 10) + " " : "") + time;
  },
  histogram(hist, w = 560, h = 220) {
    const n = hist.counts.length, max = Math.max(1, ...hist.counts), L = 40, B = 30, T = 10;
    const bw = (w - L - 10) / n;
    let s = `<line x1="${L}" y1="${h - B}" x2="${w - 10}" y2="${h - B}" stroke="#98a2b3"/>`;
    hist.counts.forEach((c, i) => {
      const bh = c / max * (h - B - T), mid = (hist.edges[i] + hist.edges[i + 1]) / 2;
      s += `<rect x="${(L + i * bw + 1).toFixed(1)}" y="${(h - B - bh).toFixed(1)}" width="${(bw - 2).toFixed(1)}" height="${bh.toFixed(1)}" fill="${HS.colour(mid).replace("85%", "60%")}"><title>${hist.edges[i].toFixed(1)}-${hist.edges[i + 1].toFixed(1)}: ${c}</title></rect>`;
    });
    for (const v of [0, 0.5, 1]) s += `<text x="${L + v * (w - L - 10)}" y="${h - 10}" text-anchor="middle">${v}</text>`;
    s += `<text x="${L - 6}" y="${T + 8}" text-anchor="end">${max}</text>`;
    return HS.svg(w, h, s);
  },
};
