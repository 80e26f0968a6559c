// The experience form: validation as you type and a live YAML preview. Each pause in typing
// POSTs the form to the page's validation endpoint, which runs the same rules as the save
// (experiences_app.yaml_io + services) and answers the field errors and the exact file an
// export would write. The form still works without this: the save validates again.

(function () {
  const DELAY_MS = 250;

  function setErrors(form, errors) {
    for (const list of form.querySelectorAll("[data-errors-for]")) {
      const problems = errors[list.dataset.errorsFor] || [];
      list.replaceChildren(
        ...problems.map((problem) => {
          const item = document.createElement("li");
          item.textContent = problem.message;
          return item;
        }),
      );
      const input = form.querySelector(`[name="${list.dataset.errorsFor}"]`);
      if (input) input.toggleAttribute("aria-invalid", problems.length > 0);
    }
  }

  function start(form) {
    const preview = document.getElementById("yaml-preview");
    const empty = document.getElementById("yaml-empty");
    const fileName = document.getElementById("yaml-file-name");
    const validity = document.getElementById("exp-validity");
    let timer = null;
    let sent = 0; // answers can arrive out of order: only the newest one is shown

    async function validate() {
      const body = new FormData(form);
      if (form.dataset.existing) body.set("existing", form.dataset.existing);
      const mine = ++sent;
      try {
        const response = await fetch(form.dataset.validateUrl, {
          method: "POST",
          body,
          credentials: "same-origin",
          headers: { "X-CSRFToken": body.get("csrfmiddlewaretoken") },
        });
        if (!response.ok || response.redirected) throw new Error(`status ${response.status}`);
        const answer = await response.json();
        if (mine !== sent) return;
        setErrors(form, answer.errors);
        preview.textContent = answer.yaml;
        fileName.textContent = answer.file_name;
        empty.hidden = Boolean(answer.yaml);
        validity.textContent = answer.valid ? "✓ valid" : "";
        validity.classList.toggle("ok", answer.valid);
      } catch {
        if (mine === sent) validity.textContent = "Could not check the form (signed out or server down).";
      }
    }

    form.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(validate, DELAY_MS);
    });
    // Typing can begin before this deferred script runs (a slow page, or the browser restoring
    // the form on back): those edits fired no listened-to input event, so check them now.
    if (edited(form)) validate();
  }

  function edited(form) {
    return [...form.querySelectorAll("input:not([type=hidden]), textarea")].some(
      (field) => field.value !== field.defaultValue,
    );
  }

  document.addEventListener("DOMContentLoaded", () => {
    const form = document.getElementById("exp-form");
    if (form) start(form);
  });
})();
