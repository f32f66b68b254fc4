// compactor console: a confirm dialog in front of destructive actions.
// Without this script the same forms open a confirmation page first
// (GET), whose button sends the POST: nothing here is needed to use the
// console, it only saves a page load.
"use strict";
document.addEventListener("submit", function (event) {
  var form = event.target;
  var question = form.getAttribute("data-confirm");
  var target = form.getAttribute("data-post");
  if (!question || !target) {
    return;
  }
  event.preventDefault();
  if (!window.confirm(question)) {
    return;
  }
  var meta = document.querySelector('meta[name="csrf-token"]');
  var csrf = document.createElement("input");
  csrf.type = "hidden";
  csrf.name = "csrf";
  csrf.value = meta ? meta.getAttribute("content") : "";
  form.appendChild(csrf);
  form.method = "post";
  form.action = target;
  form.submit();
});
