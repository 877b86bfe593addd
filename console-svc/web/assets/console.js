// Live updates for the Realm console: the page's event stream says
// "changed" when what the page shows changed elsewhere (a gate answered at
// another door, expired, a run advanced); the page then fetches itself again
// and swaps its <main>, so nothing is built in the browser. No framework, no
// build step.
"use strict";
(function () {
  var src = document.body.getAttribute("data-events");
  if (!src || !window.EventSource) {
    return;
  }
  var busy = false;
  function refresh() {
    if (busy) {
      return;
    }
    busy = true;
    fetch(window.location.pathname + window.location.search.replace(/([?&])(notice|refused)=[^&]*/g, "$1"), {credentials: "same-origin", cache: "no-store"})
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main");
        if (fresh) {
          document.getElementById("main").replaceChildren.apply(document.getElementById("main"), Array.from(fresh.childNodes));
          var live = document.getElementById("live");
          live.hidden = false;
          live.setAttribute("data-at", String(Date.now()));
        }
      })
      .finally(function () { busy = false; });
  }
  var es = new EventSource(src);
  es.addEventListener("changed", refresh);
  document.body.setAttribute("data-live", "connected");
  window.addEventListener("pagehide", function () { es.close(); });
})();
