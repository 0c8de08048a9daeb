// Chapter 13 (website): the explorer's styles, added to the page by lab.js. Kept out of a
// .css file under _static/, which Jupyter Book would link from every page of the site.
export const CSS = `
#attention-lab { --lab-accent: var(--pst-color-primary, #1f6fb2); margin: 1em 0 1.5em; }
#attention-lab .lab-start, #attention-lab .lab-compute {
  font: inherit; padding: 0.45em 0.9em; border-radius: 0.3em; cursor: pointer;
  border: 1px solid var(--lab-accent); background: var(--lab-accent); color: #fff; }
#attention-lab .lab-start:disabled { opacity: 0.6; cursor: progress; }
#attention-lab button:focus-visible, #attention-lab input:focus-visible, #attention-lab select:focus-visible,
#attention-lab text:focus-visible, #attention-lab summary:focus-visible {
  outline: 3px solid var(--pst-color-accent, #d97706); outline-offset: 2px; }
#attention-lab .lab-message[data-kind="warning"] {
  border-left: 4px solid var(--pst-color-warning, #b45309); padding: 0.3em 0.7em;
  background: var(--pst-color-surface, #f3f4f6); }
#attention-lab .lab-form label { display: block; font-weight: 600; margin-top: 0.6em; }
#attention-lab .lab-row { display: flex; gap: 0.5em; }
#attention-lab .lab-row input { flex: 1; min-width: 0; font: inherit; padding: 0.35em 0.5em;
  color: var(--pst-color-text-base, inherit); background: var(--pst-color-background, #fff);
  border: 1px solid var(--pst-color-border, #aaa); border-radius: 0.3em; }
#attention-lab .lab-help { font-size: 0.85em; margin: 0.2em 0 0.6em; opacity: 0.85; }
#attention-lab .lab-tokens { line-height: 1.9; }
#attention-lab .lab-token { margin-right: 0.25em; white-space: nowrap; unicode-bidi: isolate; }
#attention-lab .lab-tokens, #attention-lab .lab-text-list { direction: ltr; }
#attention-lab .lab-text-list bdi { unicode-bidi: isolate; }
#attention-lab .lab-unk { outline: 2px dashed var(--pst-color-warning, #b45309); }
#attention-lab .lab-controls { display: flex; gap: 0.5em; align-items: center; flex-wrap: wrap; }
#attention-lab .lab-controls select { font: inherit; color: var(--pst-color-text-base, inherit);
  background: var(--pst-color-background, #fff); border: 1px solid var(--pst-color-border, #aaa); }
#attention-lab .lab-views { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
#attention-lab .lab-views figure { margin: 0; padding: 0; flex: 1 1 100%; min-width: 0; max-width: 100%;
  overflow-x: auto; overflow-y: hidden; }
#attention-lab .lab-views canvas, #attention-lab .lab-views svg { display: block; }
#attention-lab .lab-views.lab-side figure { flex: 1 1 calc(50% - 0.5em); }
#attention-lab figcaption { font-size: 0.85em; margin-top: 0.3em; }
#attention-lab .lab-lines text { font: 12px sans-serif; cursor: pointer; }
#attention-lab .lab-lines text.lab-focus { font-weight: 700; text-decoration: underline; }
#attention-lab .lab-text-alt { margin: 0.8em 0; }
#attention-lab .lab-grid { display: grid; grid-template-columns: repeat(6, minmax(0, 64px)); gap: 4px; }
#attention-lab .lab-thumb { display: flex; flex-direction: column; align-items: center; padding: 2px;
  font: 11px sans-serif; color: var(--pst-color-text-base, inherit); background: transparent;
  border: 2px solid transparent; border-radius: 3px; cursor: pointer; }
#attention-lab .lab-thumb[aria-pressed="true"] { border-color: var(--lab-accent); }
#attention-lab .lab-thumb canvas { width: 100%; max-width: 56px; aspect-ratio: 1; image-rendering: pixelated; }
#attention-lab .lab-grid-title { font-size: 0.9em; margin: 1em 0 0.4em; }
`;
