// Draws the two timeline charts from the JSON in #gputriage-data. Rendering state goes on <html> as data attributes
// (data-charts-rendered, data-js-errors), so a headless browser test can read it from the DOM.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("gputriage-data").textContent);
  var rendered = 0;
  var sync = uPlot.sync("gputriage");
  var xRange = data.x_range_s;

  function width(el) {
    return Math.max(320, Math.floor(el.clientWidth || document.body.clientWidth || 900));
  }

  function fmtMs(v) {
    if (v == null) return "not measured";
    return v >= 1000 ? (v / 1000).toFixed(2) + " s" : v.toFixed(1) + " ms";
  }

  function xScale() {
    return {
      time: false,
      range: function (u, min, max) {
        var lo = xRange[0] != null ? Math.min(xRange[0], min) : min;
        var hi = xRange[1] != null ? Math.max(xRange[1], max) : max;
        return lo === hi ? [lo - 1, hi + 1] : [lo, hi];
      },
    };
  }

  // uPlot does not stack: plot running sums, top band first, so that each band's fill covers the one above it
  // only down to its own top. Stepped paths hold each step's value until the next step starts; a last point at the
  // end of the last step closes it. The legend shows each phase's own value, not the running sum.
  function stepsChart(el) {
    var steps = data.steps;
    var n = steps.t_s.length;
    var keys = data.phases.map(function (p) { return p.key; });
    var sums = [];
    var running = steps.t_s.map(function () { return 0; });
    keys.forEach(function (key) {
      running = running.map(function (acc, i) { return acc + (steps.phase_ms[key][i] || 0); });
      sums.push(running.concat([running[n - 1]]));
    });
    var own = function (key, idx) { return idx == null ? null : steps.phase_ms[key][Math.min(idx, n - 1)]; };
    var stepped = uPlot.paths.stepped({ align: 1 });
    var series = [{ label: "t (s)", value: function (u, v) { return v == null ? "--" : v.toFixed(3) + " s"; } }];
    var arrays = [steps.t_s.concat([steps.t_end_s])];
    for (var i = data.phases.length - 1; i >= 0; i--) {
      (function (phase) {
        series.push({
          label: phase.label,
          stroke: phase.color,
          fill: phase.color + "cc",
          width: 1,
          paths: stepped,
          points: { show: false },
          value: function (u, v, si, idx) { return idx == null ? "--" : fmtMs(own(phase.key, idx)); },
        });
      })(data.phases[i]);
      arrays.push(sums[i]);
    }
    var opts = {
      title: "Time per step, by phase",
      width: width(el),
      height: 280,
      cursor: { sync: { key: sync.key } },
      scales: { x: xScale(), y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.05 : 1]; } } },
      axes: [
        { label: "seconds since the run started" },
        { label: "ms per step", size: 60 },
      ],
      series: series,
    };
    return new uPlot(opts, arrays, el);
  }

  // NVML samples have their own times; uPlot wants one x array, so align every GPU on the union of sample times.
  function gpuChart(el) {
    var times = {};
    data.gpus.forEach(function (g) { g.t_s.forEach(function (t) { times[t] = true; }); });
    var xs = Object.keys(times).map(Number).sort(function (a, b) { return a - b; });
    var arrays = [xs];
    var series = [{ label: "t (s)", value: function (u, v) { return v == null ? "--" : v.toFixed(3) + " s"; } }];
    var palette = ["#1f77b4", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#ff7f0e"];
    data.gpus.forEach(function (g, n) {
      var at = {};
      g.t_s.forEach(function (t, i) { at[t] = i; });
      var pick = function (values) {
        return xs.map(function (t) { return at[t] === undefined ? null : values[at[t]]; });
      };
      var color = palette[n % palette.length];
      series.push({ label: g.label + " util %", stroke: color, width: 2, scale: "pct", spanGaps: true,
        value: function (u, v) { return v == null ? "--" : v.toFixed(0) + "%"; } });
      arrays.push(pick(g.util_pct));
      series.push({ label: g.label + " memory GiB", stroke: color, dash: [6, 4], width: 1.5, scale: "gib",
        spanGaps: true, value: function (u, v) { return v == null ? "--" : v.toFixed(2) + " GiB"; } });
      arrays.push(pick(g.memory_gib));
    });
    var opts = {
      title: "GPU utilisation and memory (NVML)",
      width: width(el),
      height: 240,
      cursor: { sync: { key: sync.key } },
      scales: { x: xScale(), pct: { range: [0, 100] }, gib: { range: function (u, min, max) { return [0, Math.max(1, data.memory_total_gib || 0, max * 1.1)]; } } },
      axes: [
        { label: "seconds since the run started" },
        { scale: "pct", label: "utilisation %", size: 60 },
        { scale: "gib", side: 1, label: "memory GiB", size: 60, grid: { show: false } },
      ],
      series: series,
    };
    return new uPlot(opts, arrays, el);
  }

  var charts = [];
  var stepsEl = document.getElementById("chart-steps");
  var gpuEl = document.getElementById("chart-gpu");
  if (data.steps && stepsEl) { charts.push([stepsChart(stepsEl), stepsEl]); rendered++; }
  if (data.gpus.length && gpuEl) { charts.push([gpuChart(gpuEl), gpuEl]); rendered++; }
  window.addEventListener("resize", function () {
    charts.forEach(function (c) { c[0].setSize({ width: width(c[1]), height: c[0].height }); });
  });
  document.documentElement.setAttribute("data-charts-rendered", String(rendered));
})();
