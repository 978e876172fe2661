// Renders every chart of a scenario page from its JSON data block with the local plotly.min.js.
// No inline script: the page's content security policy allows scripts from this folder only.
(function () {
  "use strict";
  var block = document.getElementById("series-data");
  if (!block || typeof Plotly === "undefined") { return; }
  var page = JSON.parse(block.textContent);
  // Each case's ticks and hover labels by point index, kept once for all of its charts.
  var cases = page.cases;
  // At most about 12 build names under an axis: every k-th, the newest always among them.
  function thin(values) {
    var k = Math.max(1, Math.ceil(values.length / 12));
    return values.filter(function (v, i) { return (values.length - 1 - i) % k === 0; });
  }
  page.charts.forEach(function (chart) {
    var el = document.getElementById(chart.id);
    if (!el) { return; }
    var axis = cases[chart.axis];
    var ticks = chart.x.map(function (i) { return axis.ticks[i]; });
    var labels = chart.x.map(function (i) { return axis.labels[i]; });
    // One trial a point, equal to its value: the trials' dots are the points themselves.
    var trialsX = chart.trials_same ? chart.x : chart.trials_x;
    var trialsY = chart.trials_same ? chart.y : chart.trials_y;
    var traces = [{
      x: chart.x, y: chart.y, text: labels, mode: "lines+markers", type: "scatter",
      name: chart.metric, hovertemplate: "%{text}<br>%{y:.4g}<extra></extra>"
    }];
    if (trialsX.length) {
      traces.push({x: trialsX, y: trialsY, mode: "markers", type: "scatter", name: "trials",
                   marker: {size: 4, opacity: 0.35}, hoverinfo: "skip"});
    }
    var shapes = chart.changes.map(function (c) {
      return {type: "line", x0: c.x - 0.5, x1: c.x - 0.5, yref: "paper", y0: 0, y1: 1,
              line: {color: c.color, width: 2,
                     dash: c.kind === "suspicious" ? "dot" : (c.kind === "incident" ? "dash" : "solid")}};
    });
    var notes = chart.changes.map(function (c) {
      // An incident's note sits below the change's, so both stay readable on the same night.
      return {x: c.x - 0.5, yref: "paper", y: c.kind === "incident" ? 0.92 : 1.02, text: c.text, showarrow: false,
              font: {size: 10, color: c.color}};
    });
    Plotly.newPlot(el, traces, {
      title: {text: chart.title, font: {size: 13}}, margin: {l: 50, r: 10, t: 40, b: 110}, height: 330,
      xaxis: {title: {text: "build and night (in order)", standoff: 18}, automargin: true, zeroline: false,
              tickmode: "array",
              tickvals: thin(chart.x), ticktext: thin(ticks), tickangle: -30},
      shapes: shapes, annotations: notes, showlegend: false
    }, {displaylogo: false, responsive: true});
  });
})();
