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

  document.addEventListener("DOMContentLoaded", function () {
    var replaced = document.querySelector("[data-replace-url]");
    if (replaced) history.replaceState(null, "", replaced.dataset.replaceUrl);
  });
})();
