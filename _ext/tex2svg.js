// Typeset TeX into SVG at build time with MathJax (mathjax-full, run by Node), so that
// pages ship finished math and no 2 MB script. One JSON request a line on stdin:
//   {"tex": "...", "display": true}  ->  {"html": "<mjx-container ...>...</mjx-container>"}
//   {"stylesheet": true}             ->  {"css": "..."}  (the CSS the SVG output needs)
//   {"reset": true}                  ->  {}  (a new page: forget the glyphs seen so far)
//   {"glyphs": true}                 ->  {"html": "<svg ...><defs>...</defs></svg>"}: the glyphs
//                                        the page's equations use, once per page
// The output keeps MathJax's assistive MathML, which screen readers read instead of the SVG.
const readline = require('readline');
const {mathjax} = require('mathjax-full/js/mathjax.js');
const {TeX} = require('mathjax-full/js/input/tex.js');
const {SVG} = require('mathjax-full/js/output/svg.js');
const {liteAdaptor} = require('mathjax-full/js/adaptors/liteAdaptor.js');
const {RegisterHTMLHandler} = require('mathjax-full/js/handlers/html.js');
const {AssistiveMmlHandler} = require('mathjax-full/js/a11y/assistive-mml.js');
const {AllPackages} = require('mathjax-full/js/input/tex/AllPackages.js');

const adaptor = liteAdaptor();
AssistiveMmlHandler(RegisterHTMLHandler(adaptor));
const tex = new TeX({packages: AllPackages.filter((p) => p !== 'bussproofs')});
const svg = new SVG({fontCache: 'global'});
const doc = mathjax.document('', {InputJax: tex, OutputJax: svg});

const rl = readline.createInterface({input: process.stdin, terminal: false});
rl.on('line', (line) => {
  let reply;
  try {
    const request = JSON.parse(line);
    if (request.reset) {
      svg.fontCache.clearCache();
      reply = {};
    } else if (request.glyphs) {
      reply = {html: '<svg id="MJX-SVG-global-cache" style="display: none" aria-hidden="true">'
                     + adaptor.outerHTML(svg.fontCache.getCache()) + '</svg>'};
    } else if (request.stylesheet) {
      reply = {css: adaptor.textContent(svg.styleSheet(doc))};
    } else {
      const node = doc.convert(request.tex, {display: !!request.display, em: 16, ex: 8,
                                             containerWidth: 1280});
      reply = {html: adaptor.outerHTML(node)};
    }
  } catch (err) {
    reply = {error: String(err && err.message || err)};
  }
  process.stdout.write(JSON.stringify(reply) + '\n');
});
