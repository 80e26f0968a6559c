// Webhook pages: after a failed submit, focus the first field in error (the server marked it
// aria-invalid); a "Copy" button for the secret that is shown once. Both pages work without it.

document.addEventListener("DOMContentLoaded", () => {
  const invalid = document.querySelector(".webhook-form [aria-invalid='true']");
  if (invalid) {
    invalid.focus();
    invalid.scrollIntoView({ block: "center" });
  }

  for (const button of document.querySelectorAll("button[data-copy]")) {
    const field = document.getElementById(button.dataset.copy);
    const status = button.parentElement.querySelector(".copy-status");
    if (!field || !navigator.clipboard) continue;
    button.hidden = false;
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(field.textContent.trim());
        if (status) status.textContent = "Copied.";
      } catch {
        window.getSelection()?.selectAllChildren(field);
        if (status) status.textContent = "Selected: copy it with the keyboard (the browser refused).";
      }
    });
  }
});
