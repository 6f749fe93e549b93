/* The admin's delivery-analytics charts: each <figure data-chart="ID"> is drawn from the
 * JSON in <script id="ID" type="application/json"> (Django's json_script) with Chart.js.
 * Names from teams (categories, campaigns, providers) reach Chart.js as data and are drawn
 * on the canvas; nothing here writes HTML. The table beside each chart holds the same
 * numbers for keyboards and screen readers. */
(function () {
  "use strict";

  // Okabe–Ito: told apart by people with the common colour-vision deficiencies.
  var PALETTE = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00",
    "#F0E442", "#000000", "#999999", "#882255", "#44AA99", "#117733",
  ];

  function config(doc) {
    var line = doc.type === "line";
    return {
      type: doc.type,
      data: {
        labels: doc.labels,
        datasets: doc.datasets.map(function (series, index) {
          var colour = PALETTE[index % PALETTE.length];
          return {
            label: series.label,
            data: series.data,
            borderColor: colour,
            backgroundColor: colour,
            borderWidth: line ? 2 : 0,
            pointRadius: line ? 2 : 0,
          };
        }),
      },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: {
          x: { stacked: doc.stacked },
          y: {
            stacked: doc.stacked,
            beginAtZero: true,
            title: { display: true, text: doc.unit },
          },
        },
        plugins: { legend: { position: "bottom" } },
      },
    };
  }

  function draw(figure) {
    var source = document.getElementById(figure.getAttribute("data-chart"));
    var canvas = figure.querySelector("canvas");
    if (!source || !canvas) {
      return;
    }
    new window.Chart(canvas, config(JSON.parse(source.textContent)));
    figure.setAttribute("data-rendered", "true");
  }

  function drawAll() {
    if (!window.Chart) {
      var notes = document.querySelectorAll(".analytics-figure figcaption");
      notes.forEach(function (note) {
        note.textContent = "The chart library did not load: the table holds the numbers.";
      });
      return;
    }
    document.querySelectorAll("figure[data-chart]").forEach(draw);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
