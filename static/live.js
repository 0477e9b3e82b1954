// Wayline studio: live instance pages (server-sent events) and small page helpers.
// The page works without this file (links and forms; a refresh shows the news);
// with it, a running instance's page follows the instance in place: node classes and
// titles change (and a state diagram's edge counts), changed parts are swapped (only when their digest differs), and new
// history rows are appended while the page shows the end of the history.
// Every state-bearing answer says the sequence it was drawn at (a live update, an
// action's notice, each part): the page never takes state older than it shows, since
// an action's response and the live stream race and either may arrive last.
(function () {
  "use strict";

  function shown(element) {
    return Number((element && element.dataset.sequence) || 0);
  }

  // The graph's nodes, when `sequence` is not older than what the graph shows.
  function applyNodesAt(nodes, sequence) {
    var root = document.getElementById("instance-page");
    if (root && sequence < shown(root)) return;
    applyNodes(nodes);
    if (root) root.dataset.sequence = String(sequence);
  }

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
      if (shown(fresh) < shown(current)) return;
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
      applyNodesAt(data.nodes, data.sequence);
      applyParts(data.parts);
      appendEvents(data.events);
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
    holders.forEach(function (holder) { applyNodesAt(JSON.parse(holder.dataset.nodes), shown(holder)); });
  });

  // An action's response swaps every part out of band: not over a part drawn later.
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var fresh = event.detail.fragment && event.detail.fragment.firstElementChild;
    if (fresh && fresh.dataset && fresh.dataset.sequence && shown(fresh) < shown(event.detail.target)) {
      event.detail.shouldSwap = false;
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    follow(document.getElementById("instance-page"));
    openDeepLink();
  });
})();
