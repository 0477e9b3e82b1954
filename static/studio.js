// Wayline studio: pan and zoom for server-drawn graphs, kept across htmx swaps.
// Everything works without this file (the canvas scrolls); it only adds comfort.
(function () {
  "use strict";
  var views = {}; // zoom key -> {zoom, left, top}
  var MIN = 0.25, MAX = 2.5, STEP = 1.2;
  var WHOLE_AT_LEAST = 0.6; // a graph that shows whole at this zoom or more opens whole

  function svgOf(viewport) { return viewport.querySelector("svg.graph"); }

  function apply(viewport, zoom) {
    var svg = svgOf(viewport);
    if (!svg) return;
    zoom = Math.min(MAX, Math.max(MIN, zoom));
    svg.style.width = (Number(svg.dataset.width) * zoom) + "px";
    svg.style.height = (Number(svg.dataset.height) * zoom) + "px";
    viewport.dataset.zoom = String(zoom);
    remember(viewport);
  }

  function zoomOf(viewport) { return Number(viewport.dataset.zoom || "1"); }

  // The zoom at which the whole graph shows in its canvas (at most 1).
  function wholeZoom(viewport) {
    var svg = svgOf(viewport);
    if (!svg) return 1;
    var w = Number(svg.dataset.width), h = Number(svg.dataset.height);
    return Math.min(1, (viewport.clientWidth - 8) / w, (viewport.clientHeight - 8) / h);
  }

  function fit(viewport) { apply(viewport, wholeZoom(viewport)); }

  function remember(viewport) {
    var key = viewport.dataset.zoomKey;
    if (key) views[key] = { zoom: zoomOf(viewport), left: viewport.scrollLeft, top: viewport.scrollTop };
  }

  function restore(viewport) {
    var saved = views[viewport.dataset.zoomKey || ""];
    if (!saved) {
      // A graph opens whole when it can be read so (a state machine's few states, cut off
      // at an edge, read as missing); else at the step an instance is at; else centred,
      // where its main line runs.
      var whole = wholeZoom(viewport);
      if (whole >= WHOLE_AT_LEAST) { if (whole < 1) apply(viewport, whole); return; }
      var current = viewport.querySelector(CURRENT);
      if (current) { showNode(viewport, current); return; }
      viewport.scrollLeft = (viewport.scrollWidth - viewport.clientWidth) / 2;
      return;
    }
    apply(viewport, saved.zoom);
    viewport.scrollLeft = saved.left;
    viewport.scrollTop = saved.top;
  }

  // The states of a step the instance is at (studio/instances/step_states.py).
  var CURRENT = [
    "running", "scheduled", "retry-waiting", "unknown", "waiting-signal", "waiting-timer",
    "waiting-approval", "waiting", "compensating", "compensation-unknown", "failed"
  ].map(function (state) { return ".node.state-" + state; }).join(", ");

  function showNode(viewport, node) {
    var box = viewport.getBoundingClientRect(), at = node.getBoundingClientRect();
    viewport.scrollLeft += (at.left + at.width / 2) - (box.left + box.width / 2);
    viewport.scrollTop += (at.top + at.height / 2) - (box.top + box.height / 2);
  }

  function zoomAt(viewport, factor, clientX, clientY) {
    var rect = viewport.getBoundingClientRect();
    var x = (clientX === undefined ? rect.width / 2 : clientX - rect.left);
    var y = (clientY === undefined ? rect.height / 2 : clientY - rect.top);
    var before = zoomOf(viewport);
    var contentX = (viewport.scrollLeft + x) / before, contentY = (viewport.scrollTop + y) / before;
    apply(viewport, before * factor);
    var after = zoomOf(viewport);
    viewport.scrollLeft = contentX * after - x;
    viewport.scrollTop = contentY * after - y;
    remember(viewport);
  }

  function setUp(root) {
    root.querySelectorAll(".viewport").forEach(function (viewport) {
      if (viewport.dataset.ready) return;
      viewport.dataset.ready = "1";
      restore(viewport);
      viewport.addEventListener("wheel", function (event) {
        if (!event.ctrlKey) return; // plain wheel scrolls the page and the canvas
        event.preventDefault();
        zoomAt(viewport, event.deltaY < 0 ? STEP : 1 / STEP, event.clientX, event.clientY);
      }, { passive: false });
      viewport.addEventListener("scroll", function () { remember(viewport); });
      var drag = null;
      viewport.addEventListener("pointerdown", function (event) {
        if (event.button !== 0 || event.target.closest("a, button, input, select, textarea")) return;
        drag = { x: event.clientX, y: event.clientY, left: viewport.scrollLeft, top: viewport.scrollTop };
        viewport.classList.add("dragging");
      });
      window.addEventListener("pointermove", function (event) {
        if (!drag) return;
        viewport.scrollLeft = drag.left - (event.clientX - drag.x);
        viewport.scrollTop = drag.top - (event.clientY - drag.y);
      });
      window.addEventListener("pointerup", function () {
        drag = null;
        viewport.classList.remove("dragging");
      });
      viewport.addEventListener("keydown", function (event) {
        if (event.key === "+" || event.key === "=") { zoomAt(viewport, STEP); event.preventDefault(); }
        if (event.key === "-") { zoomAt(viewport, 1 / STEP); event.preventDefault(); }
        if (event.key === "0") { apply(viewport, 1); event.preventDefault(); }
      });
    });
    root.querySelectorAll("[data-zoom-for]").forEach(function (bar) {
      if (bar.dataset.ready) return;
      bar.dataset.ready = "1";
      bar.addEventListener("click", function (event) {
        var button = event.target.closest("[data-zoom]");
        var viewport = document.getElementById(bar.dataset.zoomFor);
        if (!button || !viewport) return;
        var how = button.dataset.zoom;
        if (how === "in") zoomAt(viewport, STEP);
        else if (how === "out") zoomAt(viewport, 1 / STEP);
        else if (how === "reset") apply(viewport, 1);
        else fit(viewport);
      });
    });
  }

  // A group's checkbox chooses every item of its table (the dead-letters page).
  document.addEventListener("change", function (event) {
    var group = event.target.closest("[data-select-group]");
    if (!group) return;
    var table = document.getElementById(group.dataset.selectGroup);
    if (!table) return;
    table.querySelectorAll("tbody input[type=checkbox]").forEach(function (box) { box.checked = group.checked; });
  });

  // Undo and redo in the draft editor: Ctrl+Z, Ctrl+Shift+Z or Ctrl+Y outside the
  // fields (inside them the keys keep undoing typing, as everywhere).
  document.addEventListener("keydown", function (event) {
    if (!(event.ctrlKey || event.metaKey) || event.altKey) return;
    if (event.target.closest("input, textarea, select, [contenteditable]")) return;
    var key = event.key.toLowerCase();
    var way = key === "y" || (key === "z" && event.shiftKey) ? "redo" : key === "z" ? "undo" : "";
    var button = way && document.getElementById(way + "-button");
    if (!button) return;
    event.preventDefault();
    if (!button.disabled) button.click();
  });

  document.addEventListener("DOMContentLoaded", function () { setUp(document); });
  document.addEventListener("htmx:load", function (event) { setUp(event.target); });
})();
