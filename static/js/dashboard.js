// Small progressive enhancements; every page works without them.

// A live region re-fetches its server-rendered HTML from data-live-url every
// data-live-seconds while the tab is visible, and at once when it becomes visible again
// (healthchecks' adaptive setInterval: no polling from a background tab).
function liveRegion(region) {
  // The fetched HTML may say how soon to ask again (a running job: soon; a finished one: rarely).
  const every = () => (Number(region.dataset.liveSeconds) || 5) * 1000;
  let timer = null;
  let busy = false;

  async function refresh() {
    // Never swap the HTML under a button the user is pointing at or a form they are in.
    const inForm = region.contains(document.activeElement) && document.activeElement.closest("form");
    if (busy || inForm || region.querySelector("form:hover")) return;
    busy = true;
    try {
      const response = await fetch(region.dataset.liveUrl, { credentials: "same-origin", cache: "no-store" });
      // A redirect is the login page (signed out): keep the last view and say it is stale.
      if (!response.ok || response.redirected) throw new Error(`status ${response.status}`);
      const html = await response.text();
      const open = [...region.querySelectorAll("details[open][id]")].map((el) => el.id);
      const before = region.querySelector("[data-live-state]")?.dataset.liveState;
      region.innerHTML = html;
      for (const id of open) document.getElementById(id)?.setAttribute("open", "");
      region.removeAttribute("data-stale");
      const after = region.querySelector("[data-live-state]")?.dataset.liveState;
      swapAlong(region, before !== after);
      const next = region.querySelector("[data-live-next-seconds]")?.dataset.liveNextSeconds;
      if (next && next !== region.dataset.liveSeconds) {
        region.dataset.liveSeconds = next;
        schedule();
      }
    } catch {
      region.setAttribute("data-stale", "");
    } finally {
      busy = false;
    }
  }

  function schedule() {
    clearInterval(timer);
    timer = document.hidden ? null : setInterval(refresh, every());
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) refresh();
    schedule();
  });
  schedule();
}

// Other parts of the page that show what a live region follows come along in its HTML, each as
// <template data-live-swap="element id">: they replace their element when the region's state
// (data-live-state) changed, so a panel saying "done" never sits above a ledger saying "pending".
// A flash message tagged with a topic (data-flash-topic) goes once the region says that topic
// has settled (data-live-settles): "queued" is not left standing under a finished run.
function swapAlong(region, changed) {
  for (const template of region.querySelectorAll("template[data-live-swap]")) {
    const target = document.getElementById(template.dataset.liveSwap);
    if (changed && target) {
      const open = [...target.querySelectorAll("details[open][id]")].map((el) => el.id);
      target.replaceWith(template.content.cloneNode(true));
      for (const id of open) document.getElementById(id)?.setAttribute("open", "");
    }
    template.remove();
  }
  for (const settled of region.querySelectorAll("[data-live-settles]")) {
    for (const message of document.querySelectorAll(`.flash [data-flash-topic="${settled.dataset.liveSettles}"]`)) {
      const list = message.parentElement;
      message.remove();
      if (list && !list.children.length) list.remove();
    }
  }
}

// The phone layout folds the navigation behind a Menu button; without this script it wraps.
function navToggle(button) {
  const topbar = button.closest(".topbar");
  button.hidden = false;
  button.addEventListener("click", () => {
    const open = topbar.classList.toggle("nav-open");
    button.setAttribute("aria-expanded", String(open));
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && topbar.classList.contains("nav-open")) {
      topbar.classList.remove("nav-open");
      button.setAttribute("aria-expanded", "false");
      button.focus();
    }
  });
}

// After a refused submit the server renders the form again with its errors: the reader
// lands on the first refused field (its error is tied to it by aria-describedby), not at
// the top of the page. A field with data-no-autofocus-error opts out.
function focusFirstError() {
  const first = document.querySelector('main [aria-invalid="true"]:not([data-no-autofocus-error])');
  if (first && !document.activeElement?.matches("input, select, textarea")) {
    first.focus({ preventScroll: true });
    first.scrollIntoView({ block: "center" });
  }
}

// A box that scrolls sideways (a wide table on a phone) must be reachable by keyboard, or its
// hidden columns are out of reach without a pointer.
function focusableScrollers() {
  for (const box of document.querySelectorAll(".table-scroll, .card.flush")) {
    if (box.scrollWidth > box.clientWidth + 1 && !box.hasAttribute("tabindex")) box.setAttribute("tabindex", "0");
  }
}

document.documentElement.classList.add("has-js");

document.addEventListener("DOMContentLoaded", () => {
  const toggle = document.querySelector(".nav-toggle");
  if (toggle) navToggle(toggle);
  focusFirstError();
  focusableScrollers();
  window.addEventListener("resize", focusableScrollers);
  for (const form of document.querySelectorAll("form[data-autosubmit]")) {
    const select = form.querySelector("select");
    form.querySelector("button[type=submit]")?.setAttribute("hidden", "");
    select?.addEventListener("change", () => form.requestSubmit());
    // A choice made before this deferred script ran fired no listened-to change (and its
    // button is now hidden): submit it as the change would have.
    if (select && [...select.options].some((option) => option.selected !== option.defaultSelected)) {
      form.requestSubmit();
    }
  }
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
  for (const region of document.querySelectorAll("[data-live-url]")) liveRegion(region);
});
