// The page's few behaviours, here rather than in inline handlers: the Content-Security-Policy
// allows no inline script.
"use strict";

document.addEventListener("change", (event) => {
  // The header's project switcher goes to the chosen project at once.
  if (event.target.matches("select[data-submit-on-change]") && event.target.value) {
    event.target.form.submit();
  }
});
