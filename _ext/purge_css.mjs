// The site's stylesheet without the rules no page can use (PurgeCSS), minified (Lightning
// CSS): called by _ext/site_css.py at the end of the build with the bundled CSS on stdin.
//
//   SITE_TOOLS=.venv/site-tools/node_modules node purge_css.mjs SITE_DIR < bundle.css > site.css
//
// A selector is kept when its classes, ids and tags occur in a built page or in one of the
// site's scripts (which add classes such as bootstrap's "show" and set data-theme="dark"),
// so what the theme's JavaScript switches on at run time keeps its rules.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(process.env.SITE_TOOLS + "/");
const { PurgeCSS } = require("purgecss");
const { transform } = require("lightningcss");

const site = process.argv[2];
const css = readFileSync(0, "utf8");
const [purged] = await new PurgeCSS().purge({
  content: [`${site}/**/*.html`, `${site}/**/*.js`, `${site}/**/*.mjs`],
  // the search index is words of the pages, not code that sets classes
  skippedContentGlobs: [`${site}/searchindex.js`, `${site}/_static/mathjax/**`],
  css: [{ raw: css }],
  // the theme's own classes: some are built from pieces in its scripts
  safelist: { greedy: [/^pst-/, /^bd-/] },
  fontFace: true,
  keyframes: true,
});
const { code } = transform({ filename: "site.css", code: Buffer.from(purged.css), minify: true });
process.stdout.write(code);
