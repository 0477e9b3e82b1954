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

  // What is being typed when an answer arrives stays typed, with the caret where it
  // was: the answer redraws the form from what was saved, which does not hold it yet.
  var typing = null;
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (!forWorkspace(event.detail)) return;
    var active = document.activeElement;
    typing = null;
    if (!active || !active.id || !workspace() || !workspace().contains(active)) return;
    typing = { id: active.id, value: active.value, changed: "defaultValue" in active && active.value !== active.defaultValue };
    if (typing.changed && "selectionStart" in active) {
      try { typing.start = active.selectionStart; typing.end = active.selectionEnd; } catch (e) { typing.start = null; }
    }
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    if (!forWorkspace(event.detail)) return;
    showState();
    var was = typing;
    typing = null;
    if (!was) return;
    var field = document.getElementById(was.id);
    if (!field) return;
    field.focus();
    if (!was.changed) return;
    field.value = was.value;
    if (was.start != null && field.setSelectionRange) {
      try { field.setSelectionRange(was.start, was.end); } catch (e) { /* not a text field */ }
    }
    changeOnLeaving(field);
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
