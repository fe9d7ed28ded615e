// live.js keeps the live parts of a console page current. Each live part
// refreshes itself (htmx) on the "reconciler-change" event of the body.
// The page follows the console's event stream (GET /events, same origin,
// the session's cookie) and fires that event when a change is committed,
// at most once per 100 ms. Only while the stream fails (the server refused
// it, or it cannot reconnect) does the page fire the event every
// data-refresh milliseconds instead; a stream that comes back fires it
// once, for what it missed, and stops the polling.
(function () {
  "use strict";
  var body = document.body;
  if (!body || !document.querySelector("[hx-trigger*='reconciler-change']")) {
    return;
  }
  var refresh = parseInt(body.getAttribute("data-refresh"), 10) || 30000;
  var queued = false;
  function changed() {
    if (queued) {
      return;
    }
    queued = true;
    setTimeout(function () {
      queued = false;
      body.dispatchEvent(new CustomEvent("reconciler-change"));
    }, 100);
  }
  var poll = null;
  function fallBack() {
    if (poll === null) {
      poll = setInterval(changed, refresh);
    }
  }
  if (typeof EventSource === "undefined") {
    fallBack();
    return;
  }
  var opened = false;
  var stream = new EventSource("/events");
  stream.addEventListener("change", changed);
  stream.addEventListener("open", function () {
    if (poll !== null) {
      clearInterval(poll);
      poll = null;
    }
    if (opened) {
      changed(); // reconnected: catch up on what the gap hid
    }
    opened = true;
  });
  stream.addEventListener("error", function () {
    fallBack(); // stopped again when the stream reopens
  });
})();
