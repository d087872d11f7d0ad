// The console's only script (no inline script: the CSP forbids it).
// Pages holding [data-refresh] refresh that part every N ms without a full
// reload (X-Console-Refresh: the server leaves out what is not refreshed,
// the charts); buttons with data-confirm ask first; the dead-letter page's
// checkbox selects every row.
"use strict";
document.addEventListener("click", function (e) {
  var b = e.target.closest("[data-confirm]");
  if (b && !window.confirm(b.getAttribute("data-confirm"))) e.preventDefault();
});
document.addEventListener("change", function (e) {
  if (e.target.id !== "select-all") return;
  document.querySelectorAll('input[name="id"]').forEach(function (c) { c.checked = e.target.checked; });
});
function refresh(el, every) {
  setTimeout(function () {
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html", "X-Console-Refresh": "1" } })
      .then(function (r) { if (!r.ok || r.redirected) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("[data-refresh]");
        if (fresh) { el.replaceWith(fresh); el = fresh; document.body.setAttribute("data-refreshed", Date.now()); }
      })
      .catch(function () {})
      .finally(function () { refresh(el, every); });
  }, every);
}
document.querySelectorAll("[data-refresh]").forEach(function (el) { refresh(el, +el.getAttribute("data-refresh")); });
