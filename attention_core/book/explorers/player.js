// The website's explorer player: the same controls as the live widget, over frames
// rendered at build time. No kernel, no library.
//
// The page holds, inside the explorer's root element:
//   script.ac-frames  JSON {layouts: {wide: L, narrow: L}, breakpoint: px,
//                           names: [control label], labels: [values shown], alt: text}
//                     where L = {index: {"i,j,..": frame}, images: [src], width, height,
//                     min_text_px}; an image src is a data URI (a notebook) or a URL
//                     (the website: files fetched when a control moves); labels[n] is a
//                     list, or for a control whose range depends on the controls before
//                     it, {"i,j": list} keyed by their positions
//   img.ac-frame       the frame shown (its src, width, height, data-layout and
//                     data-min-text-px follow the layout and the controls)
//   the controls       one per control, in order: input[type=range] (value = index into
//                     that control's values, with an output showing the value),
//                     input[type=checkbox] (an on/off control: data-on and data-off
//                     are the indices of "on" and "off") or select (named choices,
//                     option values = indices)
// The layout is "narrow" when the explorer is shown narrower than the breakpoint.
// This file is a function expression; the page calls it with the root element.
(function (root) {
  if (!root || root.dataset.ready) return;
  root.dataset.ready = "1";
  var data = JSON.parse(root.querySelector("script.ac-frames").textContent);
  var img = root.querySelector("img");
  var inputs = root.querySelectorAll("input[type=range], input[type=checkbox], select");
  var moved = false, fetched = {};

  function labelsFor(n, positions) {
    var labels = data.labels[n];
    return Array.isArray(labels) ? labels : labels[positions.slice(0, n).join(",")];
  }

  function layoutName() {
    var width = root.clientWidth || window.innerWidth;
    return data.layouts.narrow && width < data.breakpoint ? "narrow" : "wide";
  }

  function prefetch(layout, positions) {
    // after a first move: the frames one step away on each control, so the next is ready
    positions.forEach(function (p, n) {
      [-1, 1].forEach(function (step) {
        var next = positions.slice();
        next[n] = p + step;
        var src = layout.images[layout.index[next.join(",")]];
        if (src && src.lastIndexOf("data:", 0) !== 0 && !fetched[src]) {
          fetched[src] = true;
          new Image().src = src;
        }
      });
    });
  }

  function position(input, labels) {
    if (input.type === "checkbox") return +(input.checked ? input.dataset.on : input.dataset.off);
    if (input.type === "range") {
      input.max = labels.length - 1;  // a range that depends on the controls before it
      if (+input.value > labels.length - 1) input.value = labels.length - 1;
    }
    return +input.value;
  }

  function show() {
    var positions = [], state = [];
    inputs.forEach(function (input, n) {
      var labels = labelsFor(n, positions);
      var label = labels[position(input, labels)];
      positions.push(position(input, labels));
      state.push(data.names[n] + " " + label);
      if (input.type === "range") {
        var output = input.parentNode.querySelector("output");
        if (output) output.textContent = label;
        input.setAttribute("aria-valuetext", label);  // screen readers hear the value shown
      }
    });
    var name = layoutName(), layout = data.layouts[name];
    var src = layout.images[layout.index[positions.join(",")]];
    if (img.getAttribute("src") !== src) img.setAttribute("src", src);
    if (img.dataset.layout !== name) {
      img.setAttribute("width", layout.width);  // natural size: no layout shift
      img.setAttribute("height", layout.height);
      img.dataset.layout = name;
    }
    img.dataset.minTextPx = String(layout.min_text_px);  // smallest text, px at natural size
    img.alt = data.alt + " Shown: " + state.join(", ") + ".";  // describes this frame
    root.dataset.frame = positions.join(",");
    if (moved) prefetch(layout, positions);
  }

  inputs.forEach(function (input) {
    // "change" for checkboxes and drop-downs in every browser, "input" while a slider moves
    ["input", "change"].forEach(function (type) {
      input.addEventListener(type, function () { moved = true; show(); });
    });
  });
  if (window.ResizeObserver) {
    new ResizeObserver(function () { if (img.dataset.layout !== layoutName()) show(); }).observe(root);
  } else {
    window.addEventListener("resize", function () { if (img.dataset.layout !== layoutName()) show(); });
  }
  show();
})
