// soda web: live updates over server-sent events, with no other script and no
// other origin. The Now page fetches its live part again when an event comes;
// the Events page adds each event at the top. EventSource reconnects by itself
// and sends Last-Event-ID, so nothing is missed.
(function () {
  "use strict";

  function connect(url, onEvent, indicator) {
    if (!window.EventSource) { return; }
    var source = new EventSource(url);
    source.addEventListener("open", function () { if (indicator) { indicator.textContent = "live"; indicator.className = "live on"; } });
    source.addEventListener("error", function () { if (indicator) { indicator.textContent = "reconnecting…"; indicator.className = "live"; } });
    source.addEventListener("soda", function (message) { onEvent(JSON.parse(message.data)); });
    window.addEventListener("pagehide", function () { source.close(); });
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function elapsed(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    if (!h && !m) { return s + " s"; }
    return (h ? h + " h " + pad(m) + " m " : m + " m ") + pad(s % 60) + " s";
  }
  function tick() {
    var t = document.getElementById("elapsed");
    if (t && !t.getAttribute("data-ended") && document.getElementById("running").classList.contains("on")) {
      t.textContent = elapsed(Date.now() - Date.parse(t.getAttribute("datetime")));
    }
  }

  // Whether the person is writing in `part`: a field holds text, or has focus.
  function typedIn(part) {
    var fields = part.querySelectorAll("textarea, input:not([type=hidden])");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value || fields[i] === document.activeElement) { return true; }
    }
    return false;
  }

  var now = document.getElementById("now");
  if (now) {
    var pending = null;
    var refresh = function () {
      pending = null;
      fetch(now.getAttribute("data-live"), { credentials: "same-origin" }).then(function (r) {
        return r.ok ? r.text() : null;
      }).then(function (html) {
        if (!html) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html");
        var status = fresh.getElementById("now-status"), waits = fresh.getElementById("now-waits");
        var oldWaits = document.getElementById("now-waits");
        if (status) { document.getElementById("now-status").replaceWith(status); }
        if (waits && oldWaits && waits.getAttribute("data-key") !== oldWaits.getAttribute("data-key") && !typedIn(oldWaits)) {
          oldWaits.replaceWith(waits);
        }
        tick();
      }).catch(function () { /* the next event tries again */ });
    };
    connect("/stream", function () { if (!pending) { pending = setTimeout(refresh, 150); } }, null);
    setInterval(tick, 1000);
    tick();
  }

  // A running iteration's page: shown again as events arrive, unless the
  // person is writing in one of its fields.
  if (document.getElementById("live-reload")) {
    var again = null;
    connect("/stream", function () {
      if (again) { return; }
      again = setTimeout(function () {
        again = null;
        if (!typedIn(document.getElementById("main"))) { window.location.reload(); }
      }, 1000);
    }, null);
  }

  var rows = document.getElementById("events");
  if (rows) {
    var url = "/stream?after=" + encodeURIComponent(rows.getAttribute("data-after")) +
      "&kind=" + encodeURIComponent(rows.getAttribute("data-kind"));
    connect(url, function (e) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-id", e.id);
      tr.className = "new";
      [e.ts.slice(11, 23), e.iteration === null ? "-" : String(e.iteration), e.kind, e.text].forEach(function (text, i) {
        var td = document.createElement("td");
        td.className = ["ts", "", "kind", "data"][i];
        td.textContent = text;
        tr.appendChild(td);
      });
      rows.insertBefore(tr, rows.firstChild);
      var none = document.getElementById("no-events");
      if (none) { none.remove(); }
    }, document.getElementById("live"));
  }
})();
