// Inlined after the article of every page of at most RENDER_AFTER_LOAD elements
// (site_pages.lazy_edits). book.css renders the
// sections below the screen lazily (content-visibility: auto): the first paint lays out the
// top of the page only. Once the page has loaded, this renders the rest in moments the
// browser is idle, one section a task, so a reader's tap or scroll waits for one section at
// most, never for the whole page. When it is done every section is laid out and painted, as
// on a page without lazy sections: find in page, tools that read the page's geometry (a
// contrast checker measured text on a neighbour's background while its section was a 900 px
// placeholder, dequelabs/axe-core#2768) and the theme's keyboard stops see the page as it is.
// A section above the screen that grows as it renders does not move what the reader sees, in
// browsers with scroll anchoring (tests/test_browser.py). Nothing on the screen moves
// or animates: what changes is off the screen.
(() => {
  const article = document.querySelector("article.ac-lazy-sections");
  if (!article || !CSS.supports("content-visibility", "auto") || !Element.prototype.checkVisibility) return;
  // One section a task (measured when every page ran this: chapter 8's largest took about 35 ms
  // here, under load). A section of more than PART elements (on the pages that run this, only
  // notation's table of symbols) renders a child at a time instead: each child waits as a
  // placeholder of its own ("ac-lazy-parts", book.css).
  const PART = 3000;
  const SPLIT = "section, dl, dd, div:not(.highlight, .math, .ac-explorer)"; // blocks of blocks
  const queue = [...article.querySelectorAll(":scope > section > section")];
  if (!queue.length) return; // a page of one section (the glossary, the index): nothing waits
  const idle = window.requestIdleCallback || ((task) => setTimeout(task, 50));

  // Still a placeholder: the browser skips its content (content-visibility: auto, off screen).
  const skipped = (unit) => {
    const child = unit.firstElementChild;
    return !!child && child.checkVisibility() && !child.checkVisibility({ contentVisibilityAuto: true });
  };

  function step() {
    const unit = queue.shift();
    if (skipped(unit) && unit.matches(SPLIT) && unit.getElementsByTagName("*").length > PART) {
      unit.classList.add("ac-lazy-parts");
      queue.unshift(...unit.children);
    }
    unit.classList.add("ac-rendered");
    void unit.offsetHeight; // lay it out now, inside this task, not in the next frame's
    if (queue.length) {
      idle(step);
    } else { // every section is rendered: _static/theme_behaviour.js makes the boxes that
      // scroll keyboard stops when it hears this event (the book's own, named at both ends)
      document.dispatchEvent(new CustomEvent("attention:sections-rendered"));
    }
  }

  if (document.readyState === "complete") idle(step);
  else addEventListener("load", () => idle(step), { once: true });
})();
