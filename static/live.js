// Wayline studio: live instance pages (server-sent events) and small page helpers.
// The page works without this file (links and forms; a refresh shows the news);
// with it, a running instance's page follows the instance in place: node classes and
// titles change (and a state diagram's edge counts), changed parts are swapped (only when their digest differs), and new
// history rows are appended while the page shows the end of the history.
(function () {
  "use strict";

  function applyNodes(nodes) {
    (nodes || []).forEach(function (node) {
      var element = document.getElementById(node.id);
      if (!element) return;
      if (element.getAttribute("class") !== node["class"]) element.setAttribute("class", node["class"]);
      var title = element.querySelector("title");
      if (title && title.textContent !== node.title) title.textContent = node.title;
      var count = element.querySelector(".count");
      if (count && node.count !== undefined && count.textContent !== node.count) count.textContent = node.count;
    });
  }

  function fromHtml(html) {
    var holder = document.createElement("template");
    holder.innerHTML = html.trim();
    return holder.content.firstElementChild;
  }

  function applyParts(parts) {
    Object.keys(parts || {}).forEach(function (id) {
      var current = document.getElementById(id);
      var part = parts[id];
      if (!current || current.dataset.digest === part.digest) return;
      var fresh = fromHtml(part.html);
      current.replaceWith(fresh);
      if (window.htmx) window.htmx.process(fresh);
    });
  }

  function appendEvents(rows) {
    var history = document.getElementById("history");
    if (!history || history.dataset.follow !== "1") return;
    var body = document.getElementById("history-rows");
    var note = document.getElementById("history-live-note");
    if (rows === null || !body) {
      if (note && rows !== undefined && (rows === null || rows.length)) {
        note.textContent = "New events arrived: reload the history to see them.";
      }
      return;
    }
    rows.forEach(function (html) {
      var row = fromHtml(html);
      if (row && !document.getElementById(row.id)) body.appendChild(row);
    });
  }

  function follow(root) {
    if (!root || root.dataset.live !== "on" || !window.EventSource) return;
    var badge = document.getElementById("live-badge");
    var say = function (text) { if (badge) badge.textContent = text; };
    var url = root.dataset.liveUrl + "?after=" + encodeURIComponent(root.dataset.sequence || "0");
    var source = new EventSource(url);
    source.addEventListener("open", function () { say("live"); });
    source.addEventListener("update", function (event) {
      var data = JSON.parse(event.data);
      applyNodes(data.nodes);
      applyParts(data.parts);
      appendEvents(data.events);
      root.dataset.sequence = String(data.sequence);
    });
    source.addEventListener("end", function (event) {
      source.close();
      root.dataset.live = "ended";
      // "access-ended": the session was signed out (or the token revoked, the person
      // removed from the team) while the page was open; reloading leads to sign-in.
      say(event.data === "access-ended" ? "stopped: signed out, reload to sign in" : "ended");
    });
    source.addEventListener("error", function () {
      if (source.readyState === EventSource.CONNECTING) say("reconnecting…");
    });
  }

  function openDeepLink() {
    // #event-N beyond the page shown: open the history page that starts at N.
    var match = /^#event-(\d+)$/.exec(window.location.hash);
    var history = document.getElementById("history");
    if (!match || !history || document.getElementById("event-" + match[1])) return;
    var sequence = Number(match[1]);
    window.location.assign(history.dataset.historyUrl + "?after=" + (sequence - 1) + "#event-" + sequence);
  }

  document.addEventListener("click", function (event) {
    var dismiss = event.target.closest("[data-dismiss]");
    if (dismiss) {
      var panel = document.querySelector(dismiss.dataset.dismiss);
      if (panel) { event.preventDefault(); panel.innerHTML = ""; }
    }
  });

  document.addEventListener("htmx:load", function (event) {
    var root = event.target;
    var holders = Array.prototype.slice.call(root.querySelectorAll("[data-nodes]"));
    if (root.dataset && root.dataset.nodes) holders.push(root);
    holders.forEach(function (holder) { applyNodes(JSON.parse(holder.dataset.nodes)); });
  });

  document.addEventListener("DOMContentLoaded", function () {
    follow(document.getElementById("instance-page"));
    openDeepLink();
  });
})();
