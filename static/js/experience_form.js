// The experience form: validation as you type and a live YAML preview. Each pause in typing
// POSTs the form to the page's validation endpoint, which runs the same rules as the save
// (experiences_app.yaml_io + services) and answers the field errors and the exact file an
// export would write. The form still works without this: the save validates again.

(function () {
  const DELAY_MS = 250;

  // The inputs a field's messages belong to: `who` is ticked boxes plus the typed other roles,
  // and only the typed text can be wrong, so that is what gets marked.
  function inputsFor(form, name) {
    if (name === "who") return form.querySelectorAll('[name="who_other"]');
    return form.querySelectorAll(`[name="${name}"]`);
  }

  function fill(list, problems) {
    list.replaceChildren(
      ...problems.map((problem) => {
        const item = document.createElement("li");
        item.textContent = problem.message;
        return item;
      }),
    );
  }

  // Errors show only on fields the reader has touched: typing in the first field must not flag
  // the ones not reached yet. The save shows every error anyway.
  function setErrors(form, errors, touched) {
    for (const list of form.querySelectorAll("[data-errors-for]")) {
      const name = list.dataset.errorsFor;
      const problems = touched.has(name) ? errors[name] || [] : [];
      fill(list, problems);
      for (const input of inputsFor(form, name)) {
        if (problems.length) input.setAttribute("aria-invalid", "true");
        else input.removeAttribute("aria-invalid");
      }
    }
  }

  function setWarnings(form, warnings) {
    for (const list of form.querySelectorAll("[data-warnings-for]")) {
      fill(list, warnings[list.dataset.warningsFor] || []);
    }
  }

  function fieldName(target) {
    if (!target || !target.name) return "";
    return target.name === "who_other" ? "who" : target.name;
  }

  function start(form) {
    const preview = document.getElementById("yaml-preview");
    const empty = document.getElementById("yaml-empty");
    const fileName = document.getElementById("yaml-file-name");
    const validity = document.getElementById("exp-validity");
    let timer = null;
    let sent = 0; // answers can arrive out of order: only the newest one is shown
    // Fields the server already flagged count as touched, so their errors stay until fixed.
    const touched = new Set(
      [...form.querySelectorAll("[data-errors-for]")].filter((l) => l.children.length).map((l) => l.dataset.errorsFor),
    );

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
        setErrors(form, answer.errors, touched);
        setWarnings(form, answer.warnings || {});
        preview.textContent = answer.yaml;
        fileName.textContent = answer.file_name;
        empty.hidden = Boolean(answer.yaml);
        validity.textContent = answer.valid ? "✓ valid" : "";
        validity.classList.toggle("ok", answer.valid);
      } catch {
        if (mine === sent) validity.textContent = "Could not check the form (signed out or server down).";
      }
    }

    form.addEventListener("input", (event) => {
      touched.add(fieldName(event.target));
      clearTimeout(timer);
      timer = setTimeout(validate, DELAY_MS);
    });
    // Typing can begin before this deferred script runs (a slow page, or the browser restoring
    // the form on back): those edits fired no listened-to input event, so check them now.
    const early = edited(form);
    for (const field of early) touched.add(fieldName(field));
    if (early.length) validate();
  }

  function edited(form) {
    return [...form.querySelectorAll("input:not([type=hidden]), textarea")].filter((field) =>
      field.type === "checkbox" ? field.checked !== field.defaultChecked : field.value !== field.defaultValue,
    );
  }

  document.addEventListener("DOMContentLoaded", () => {
    const form = document.getElementById("exp-form");
    if (form) start(form);
  });
})();
