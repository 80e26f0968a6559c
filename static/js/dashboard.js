// Small progressive enhancements; every page works without them.
document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("form[data-autosubmit]")) {
    form.querySelector("button[type=submit]")?.setAttribute("hidden", "");
    form.querySelector("select")?.addEventListener("change", () => form.requestSubmit());
  }
});
