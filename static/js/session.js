// The session page's image zoom: a thumbnail button opens its image in a modal <dialog>.
// Escape (the dialog's own behaviour), the Close button or a click on the backdrop closes it,
// and focus goes back to the thumbnail that opened it.
(() => {
  const dialog = document.getElementById('image-zoom');
  if (!dialog || typeof dialog.showModal !== 'function') return;
  const image = dialog.querySelector('.image-zoom-img');
  let opener = null;

  document.addEventListener('click', (event) => {
    const button = event.target.closest('[data-zoom-src]');
    if (!button) return;
    opener = button;
    image.src = button.dataset.zoomSrc;
    const thumbnail = button.querySelector('img');
    image.alt = thumbnail && thumbnail.alt ? `${thumbnail.alt}, enlarged` : 'enlarged image';
    dialog.showModal();
  });

  // A click on the dialog element itself (not its image or button) is a click on the backdrop.
  dialog.addEventListener('click', (event) => {
    if (event.target === dialog) dialog.close();
  });

  dialog.addEventListener('close', () => {
    image.removeAttribute('src');
    if (opener) opener.focus();
    opener = null;
  });
})();
