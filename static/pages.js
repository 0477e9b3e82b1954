// Wayline studio: small comforts for ordinary pages. Every page works without them.
//  - [data-copy="ID"] buttons copy the text of element ID (a new token, a one-time code);
//  - form[data-confirm] asks before it posts (removing a member, revoking a token);
//  - select[data-hint-for="ID ..."] shows the chosen option's hint in each element it
//    names: the option attribute that element names in its own data-hint (data-hint
//    when it names none), so the start form's input limit and what its id becomes
//    follow the chosen version;
//  - input[type=file][data-max-bytes] refuses, as it is chosen, a file larger than that,
//    with its data-too-large message (one over the studio's body limit would otherwise
//    be refused before the form could say why);
//  - [data-replace-url] puts that URL in the address bar: a page a form's POST answered
//    (a secret shown once) reloads as the page itself, never as the POST again.
//  - text typed into a form outlives a session that ended while it was typed: kept in
//    this tab as the form is sent, dropped once the studio answers anything but "sign
//    in first", and put back into that form (same target, a field still as it was
//    rendered) on the page that signing in again returns to, when the form shows.
(function () {
  "use strict";

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    var area = document.createElement("textarea");
    area.value = text;
    document.body.appendChild(area);
    area.select();
    var done = document.execCommand("copy");
    area.remove();
    return done ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.dataset.copy);
    if (!source) return;
    var label = button.dataset.label || button.textContent;
    button.dataset.label = label;
    copyText(source.textContent.trim()).then(
      function () { button.textContent = "Copied"; },
      function () { button.textContent = "Select and copy it by hand"; }
    );
    setTimeout(function () { button.textContent = label; }, 2500);
  });

  document.addEventListener("submit", function (event) {
    var question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });

  document.addEventListener("change", function (event) {
    var select = event.target.closest("select[data-hint-for]");
    var option = select && select.selectedOptions[0];
    if (!option) return;
    select.dataset.hintFor.split(" ").forEach(function (id) {
      var hint = document.getElementById(id);
      var text = hint && option.dataset[hint.dataset.hint || "hint"];
      if (text !== undefined && text !== null) hint.textContent = text;
    });
  });

  document.addEventListener("change", function (event) {
    var input = event.target.closest("input[type=file][data-max-bytes]");
    if (!input) return;
    var file = input.files[0];
    var large = file && file.size > Number(input.dataset.maxBytes);
    input.setCustomValidity(large ? input.dataset.tooLarge : "");
    if (large) input.reportValidity();
  });

  var KEPT = "wayline.typed ";
  var TYPED = "textarea[name], input[name]:not([type]), input[name][type=text]";

  function sentTo(form) {
    return form.getAttribute("hx-post") || form.getAttribute("action") || "";
  }

  function keepTyped(form) {
    var typed = {};
    form.querySelectorAll(TYPED).forEach(function (field) {
      if (field.value !== field.defaultValue) typed[field.name] = field.value;
    });
    if (Object.keys(typed).length) sessionStorage.setItem(KEPT + sentTo(form), JSON.stringify(typed));
  }

  function putBackTyped(root) {
    root.querySelectorAll("form").forEach(function (form) {
      var key = KEPT + sentTo(form);
      var typed = JSON.parse(sessionStorage.getItem(key) || "null");
      if (!typed) return;
      sessionStorage.removeItem(key);
      form.querySelectorAll(TYPED).forEach(function (field) {
        if (field.name in typed && field.value === field.defaultValue) field.value = typed[field.name];
      });
    });
  }

  function forgetTyped() {
    Object.keys(sessionStorage).forEach(function (key) {
      if (key.indexOf(KEPT) === 0) sessionStorage.removeItem(key);
    });
  }

  var signingIn = location.pathname === "/login";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!signingIn && !form.hasAttribute("hx-post") && !event.defaultPrevented) keepTyped(form);
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    var form = event.detail.elt.closest("form");
    if (!form || event.detail.requestConfig.verb !== "post") return;
    keepTyped(form);
    // The answer often replaces the form, whose own events then reach no listener here.
    var xhr = event.detail.xhr, key = KEPT + sentTo(form);
    xhr.addEventListener("load", function () {
      if (xhr.status !== 401) sessionStorage.removeItem(key);
    });
  });

  function cameFromSignIn() {
    try { return new URL(document.referrer).pathname === "/login"; } catch (e) { return false; }
  }

  var returning = cameFromSignIn();
  document.addEventListener("DOMContentLoaded", function () {
    if (signingIn) return;
    if (returning) putBackTyped(document); else forgetTyped();
  });
  document.addEventListener("htmx:load", function (event) {
    if (returning) putBackTyped(event.target);
  });

  document.addEventListener("DOMContentLoaded", function () {
    var replaced = document.querySelector("[data-replace-url]");
    if (replaced) history.replaceState(null, "", replaced.dataset.replaceUrl);
  });
})();
