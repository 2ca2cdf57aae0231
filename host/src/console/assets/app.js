// The justonce console's live view: new calls and state changes appear on the calls
// page without a reload. Every value is set as text, never as HTML.
"use strict";

(function () {
  const live = document.getElementById("live");
  const table = document.getElementById("calls");
  if (!live || !table || !window.EventSource) {
    return;
  }
  const body = table.tBodies[0];
  const params = new URLSearchParams(window.location.search);
  params.set("since", live.dataset.since || "0");
  const cells = ["created_at", "tool", "state", "principal", "conversation", "runs", "replays", "outcome"];

  function fill(row, call) {
    row.textContent = "";
    row.dataset.key = call.key;
    for (const name of cells) {
      const cell = row.insertCell();
      cell.textContent = String(call[name]);
      if (name === "state" || name === "outcome") {
        cell.className = name;
      }
    }
    const key = row.insertCell();
    key.className = "key";
    const link = document.createElement("a");
    link.href = call.url;
    link.textContent = call.key;
    key.appendChild(link);
  }

  const source = new EventSource("/console/live?" + params.toString());
  source.addEventListener("call", function (event) {
    const call = JSON.parse(event.data);
    let row = Array.from(body.rows).find(function (r) { return r.dataset.key === call.key; });
    if (!row) {
      row = body.insertRow(0);
      row.classList.add("new");
    }
    fill(row, call);
    live.textContent = "Live: updated " + new Date().toLocaleTimeString() + ".";
  });
})();
