// Wayline studio: the draft editor's comfort over htmx. Every edit still works as a
// plain form post without this file; with it, no edit is lost while another saves and
// the keyboard stays where the work is.
(function () {
  "use strict";
  var queue = []; // requests for the workspace made while another was in flight
  var busy = false;

  function workspace() { return document.getElementById("workspace"); }

  function forWorkspace(detail) {
    return detail.target && detail.target.id === "workspace";
  }

  function showState() {
    var state = document.getElementById("save-state");
    var waiting = busy || queue.length > 0;
    if (state) state.textContent = waiting ? "Saving\u2026" : "";
    var ws = workspace();
    if (ws) ws.setAttribute("aria-busy", waiting ? "true" : "false");
  }

  // A request made while another is in flight waits its turn (an edit made on the
  // revision being replaced would be refused as stale, and htmx would drop it with the
  // form the answer replaces): it is sent once the answer before it is swapped in, on
  // that answer's revision. Asked here, before htmx queues it on the old form.
  document.addEventListener("htmx:confirm", function (event) {
    var detail = event.detail;
    if (!forWorkspace(detail) || !busy) return;
    event.preventDefault();
    if (detail.question && !window.confirm(detail.question)) return;
    var values = {};
    var read = htmx.values(detail.elt, detail.verb);
    Object.keys(read).forEach(function (key) { values[key] = read[key]; });
    var push = detail.verb === "get" && detail.elt.closest("[hx-push-url]") ? "true" : undefined;
    queue.push({ verb: detail.verb, path: detail.path, values: values, push: push });
    showState();
  });

  document.addEventListener("htmx:beforeRequest", function (event) {
    if (!forWorkspace(event.detail)) return;
    busy = true;
    showState();
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    if (!forWorkspace(event.detail)) return;
    busy = false;
    var next = queue.shift();
    if (next) send(next);
    showState();
  });

  function send(request) {
    var ws = workspace();
    var values = request.values;
    if (ws && values.revision !== undefined) values.revision = ws.dataset.revision;
    var options = { source: ws, target: "#workspace", swap: "outerHTML", push: request.push };
    if (request.verb !== "get") options.values = values;
    htmx.ajax(request.verb, request.path, options);
  }

  // Focus stays where the work is across an answer: on the field being typed in (with
  // what is typed and the caret or selection), on the link just chosen (the outline item or graph
  // node, drawn again), or where the control that asked says (Cancel: the canvas). The
  // answer's [autofocus] (an insert menu's first choice, a new step's first field)
  // comes after, as htmx focuses it once the new content settles.
  var kept = null;
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (!forWorkspace(event.detail)) return;
    kept = remembered(document.activeElement, event.detail.requestConfig.elt);
  });

  function remembered(active, asker) {
    var ws = workspace();
    var after = asker && asker.getAttribute && asker.getAttribute("data-focus-after");
    if (after) return { id: after };
    if (!active || !ws || !ws.contains(active)) return null;
    if (active.id) {
      // The selection too when nothing is typed yet: Tab selects the value it lands
      // on, so that typing replaces it, and the answer must not undo that.
      var was = { id: active.id, value: active.value };
      was.changed = "defaultValue" in active && active.value !== active.defaultValue;
      if ("selectionStart" in active) {
        try { was.start = active.selectionStart; was.end = active.selectionEnd; } catch (e) { was.start = null; }
      }
      return was;
    }
    var link = active.getAttribute("hx-get");
    if (!link) return null;
    return { link: link, region: active.closest("svg") ? "svg" : ".outline-pane" };
  }

  document.addEventListener("htmx:afterSwap", function (event) {
    if (!forWorkspace(event.detail)) return;
    showState();
    var was = kept;
    kept = null;
    if (!was) return;
    if (was.link) {
      var region = workspace() && workspace().querySelector(was.region);
      var again = region && Array.prototype.find.call(
        region.querySelectorAll("a[hx-get]"),
        function (a) { return a.getAttribute("hx-get") === was.link; });
      if (again) again.focus();
      return;
    }
    var field = document.getElementById(was.id);
    // A control that cannot take the focus now (a branch's ↑ once it is first) names
    // the one that can (its ↓), so the keyboard stays with the branch just moved.
    if (field && field.disabled && field.dataset.focusInstead) {
      field = document.getElementById(field.dataset.focusInstead);
    }
    if (!field) return;
    field.focus();
    if (was.changed) {
      field.value = was.value;
      changeOnLeaving(field);
    }
    if (was.start != null && field.setSelectionRange && field.value === was.value) {
      try { field.setSelectionRange(was.start, was.end); } catch (e) { /* not a text field */ }
    }
  });

  // Escape closes the insert and branch menus and the chosen step (outside its fields,
  // where it belongs to the field); the arrow keys, Home and End move
  // through the outline (Enter chooses, as on any link).
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") {
      var close = document.querySelector("#inspector [data-closes-panel]");
      if (!close || event.target.closest("input, textarea, select")) return;
      event.preventDefault();
      close.click();
      return;
    }
    var item = event.target.closest && event.target.closest(".outline-pane .outline-item");
    if (!item) return;
    var items = Array.prototype.slice.call(document.querySelectorAll(".outline-pane .outline-item"));
    var at = items.indexOf(item);
    var to = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: items.length - 1 }[event.key];
    if (to === undefined) return;
    event.preventDefault();
    if (items[to]) items[to].focus();
  });

  // A value put back by script is not a change the browser reports on leaving the
  // field, so the editor reports it (once) unless the browser did.
  function changeOnLeaving(field) {
    var reported = false;
    field.addEventListener("change", function () { reported = true; }, { once: true });
    field.addEventListener("blur", function () {
      if (!reported && field.value !== field.defaultValue) {
        field.dispatchEvent(new Event("change", { bubbles: true }));
      }
    }, { once: true });
  }
})();
