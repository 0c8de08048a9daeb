// What the book changes in the theme's behaviour, from outside the theme's script (issue 54).
// Jupyter Book adds this file to every page's head; it runs before the theme's script or
// after it alike: it acts on events and attributes, never on the theme's code.

// The theme button. The theme cycles auto -> dark -> light -> auto (on a dark system: auto ->
// light -> dark), so one click in three changed nothing on screen ("light" to "auto" on a
// light system), and its name, "Color mode", did not say what a click would do. Here every
// click shows the other theme: when the theme's own click handler (on the button) has gone
// to a mode that shows the same theme, the button is clicked once more. Its name and its
// native tooltip say what a click does ("Switch to the dark theme"); the build
// (_ext/site_pages.py) leaves out the Bootstrap tooltip and the icons' titles.
(() => {
  const root = document.documentElement;
  const systemDark = window.matchMedia("(prefers-color-scheme: dark)");
  const shown = () => (root.dataset.theme === "dark" || (root.dataset.theme !== "light" && systemDark.matches)
    ? "dark" : "light");
  const button = (event) => event.target.closest && event.target.closest(".theme-switch-button");
  let before = null; // the theme on screen when the click began
  let again = false;

  document.addEventListener("click", (event) => { if (button(event)) before = shown(); }, true);
  document.addEventListener("click", (event) => {
    const clicked = button(event);
    if (!clicked || before === null) return;
    const was = before;
    before = null;
    if (shown() === was && !again) {
      again = true;
      clicked.click();
      again = false;
    }
  });

  const name = () => {
    const label = `Switch to the ${shown() === "dark" ? "light" : "dark"} theme`;
    document.querySelectorAll(".theme-switch-button").forEach((b) => {
      b.setAttribute("aria-label", label);
      b.setAttribute("title", label);
    });
  };
  new MutationObserver(name).observe(root, { attributes: true, attributeFilter: ["data-theme"] });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", name);
  else name();
})();

// Keyboard stops. The theme makes each scrollable box a keyboard stop; its loop leaves a box
// alone while the box's section waits unrendered (content-visibility: auto; see
// lazy_tab_stops in _ext/site_pages.py) and runs again on the browser's
// "contentvisibilityautostatechange" (Chromium sends one for each section as it renders).
// When _ext/lazy_sections.js has rendered every section it sends the book's own
// "attention:sections-rendered" on the document, and every box is checked once more, whatever
// the browser sent: one that scrolls is a keyboard stop (tabindex 0), the others not (-1).
(() => {
  const BOXES = "pre, .nboutput > .output_area, .cell_output > .output, .jp-RenderedHTMLCommon, "
    + ".pst-scrollable-table-container"; // the theme's own list
  document.addEventListener("attention:sections-rendered", () => {
    document.querySelectorAll(BOXES).forEach((box) => {
      if (!box.checkVisibility({ contentVisibilityAuto: true })) return; // still waiting
      box.tabIndex = box.scrollWidth > box.clientWidth || box.scrollHeight > box.clientHeight ? 0 : -1;
    });
  });
})();
