/* The run report: how many metrics its data holds, for tools reading the page. */
(function () {
  "use strict";
  var parsed = CL.json("contextlens-data");
  document.documentElement.setAttribute(
    "data-metrics", parsed ? String(Object.keys(parsed.summaries || {}).length) : "error");
})();
