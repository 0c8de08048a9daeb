// The website's explorer player: the same controls as the live widget, over frames
// rendered at build time. No kernel, no network, no library.
//
// The page holds, inside the explorer's root element:
//   script.ac-frames  JSON {index: {"i,j,..": frame}, images: [base64 PNG],
//                           names: [control label], labels: [[value shown]], alt: text}
//   input[type=range]  one per control, value = index into that control's values
//   output             one per control, the value shown
// This file is a function expression; the page calls it with the root element.
(function (root) {
  if (!root || root.dataset.ready) return;
  root.dataset.ready = "1";
  var data = JSON.parse(root.querySelector("script.ac-frames").textContent);
  var img = root.querySelector("img");
  var inputs = root.querySelectorAll("input[type=range]");
  var outputs = root.querySelectorAll("output");

  function show() {
    var key = [], state = [];
    inputs.forEach(function (input, n) {
      var label = data.labels[n][input.value];
      key.push(input.value);
      state.push(data.names[n] + " " + label);
      outputs[n].textContent = label;
      input.setAttribute("aria-valuetext", label);  // screen readers hear the value shown
    });
    var frame = data.index[key.join(",")];
    img.src = "data:image/png;base64," + data.images[frame];
    img.alt = data.alt + " Shown: " + state.join(", ") + ".";  // describes this frame
    root.dataset.frame = key.join(",");
  }

  inputs.forEach(function (input) { input.addEventListener("input", show); });
  show();
})
