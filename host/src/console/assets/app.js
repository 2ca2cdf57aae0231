// The justonce console's script, small and optional: every page works without it.
// - The live view: new calls and state changes appear on the calls page without a
//   reload. A row arrives as HTML the server built and escaped (the same as its
//   rows on the page); nothing from the journal is ever set as HTML here.
// - Copy buttons: a short key's button copies the whole key.
"use strict";

(function () {
  document.addEventListener("click", function (event) {
    const button = event.target.closest("button.copy");
    if (!button) {
      return;
    }
    const text = button.dataset.copy || "";
    const done = function () {
      button.textContent = "copied";
      setTimeout(function () { button.textContent = "copy"; }, 1500);
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(done, function () { window.prompt("Copy the key:", text); });
    } else {
      window.prompt("Copy the key:", text);
    }
  });

  const live = document.getElementById("live");
  const table = document.getElementById("calls");
  if (!live || !table || !window.EventSource) {
    return;
  }
  const body = table.tBodies[0];
  const params = new URLSearchParams(window.location.search);
  params.set("since", live.dataset.since || "0");

  const source = new EventSource("/console/live?" + params.toString());
  source.addEventListener("call", function (event) {
    const call = JSON.parse(event.data);
    const template = document.createElement("template");
    template.innerHTML = call.row;
    const fresh = template.content.querySelector("tr");
    if (!fresh) {
      return;
    }
    const row = Array.from(body.rows).find(function (r) { return r.dataset.key === call.key; });
    if (row) {
      row.replaceWith(fresh);
    } else {
      fresh.classList.add("new");
      body.insertBefore(fresh, body.firstChild);
    }
    live.textContent = "Live: updated " + new Date().toLocaleTimeString() + ".";
  });
})();
