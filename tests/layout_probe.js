() => {
  // Run in the page by tests/browser_kit.py: what spills out of the viewport or is cut off.
  const viewportWidth = document.documentElement.clientWidth;
  const problems = [];
  const describe = (el) => {
    let name = el.tagName.toLowerCase();
    if (el.id) name += '#' + el.id;
    const classes = [...el.classList].slice(0, 3).join('.');
    if (classes) name += '.' + classes;
    const text = (el.innerText || el.getAttribute('aria-label') || '').trim().replace(/\s+/g, ' ').slice(0, 40);
    return text ? `${name} "${text}"` : name;
  };
  const scrolls = (style) => ['auto', 'scroll'].includes(style.overflowX);
  const hides = (style) => ['hidden', 'clip'].includes(style.overflowX) || ['hidden', 'clip'].includes(style.overflowY);
  const pageWidth = document.documentElement.scrollWidth;
  if (pageWidth > viewportWidth + 1) problems.push(`page is ${pageWidth}px wide in a ${viewportWidth}px viewport`);
  for (const el of document.body.querySelectorAll('*')) {
    const rect = el.getBoundingClientRect();
    if (rect.width < 1 || rect.height < 1) continue;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || el.closest('.visually-hidden, [hidden], dialog:not([open]), details:not([open]) > :not(summary)')) continue;
    if (style.position === 'fixed' || style.position === 'sticky') continue;
    let holder = null;
    let cutter = null;
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      const upStyle = getComputedStyle(up);
      if (scrolls(upStyle)) { holder = up; break; }
      if (hides(upStyle) && !cutter) cutter = up;
    }
    const left = rect.left + window.scrollX;
    if (!holder && (rect.right > viewportWidth + 1 || left < -1)) {
      problems.push(`${describe(el)} spills: ${Math.round(rect.left)}..${Math.round(rect.right)}px of ${viewportWidth}px`);
      continue;
    }
    if (cutter) {
      const box = cutter.getBoundingClientRect();
      if (rect.right > box.right + 1 || rect.left < box.left - 1 || rect.bottom > box.bottom + 1 || rect.top < box.top - 1) {
        // Text ellipsized on purpose (text-overflow) is shown cut, with its whole text in a title.
        if (getComputedStyle(cutter).textOverflow !== 'ellipsis') {
          problems.push(`${describe(el)} is clipped by ${describe(cutter)}`);
        }
      }
    }
    // A text box narrower than its own text with overflow hidden shows part of a word.
    if (hides(style) && !el.matches('input, textarea, select') && style.textOverflow !== 'ellipsis' && el.scrollWidth > el.clientWidth + 1 && !scrolls(style)) {
      problems.push(`${describe(el)} hides ${el.scrollWidth - el.clientWidth}px of its content`);
    }
  }
  return [...new Set(problems)];
}
