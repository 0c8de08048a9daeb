// The website's "Check yourself" questions (attention_core.book.selfcheck): the same rules as
// MultipleChoice.check, Numeric.check and parse_number there, with no kernel and no library.
// Jupyter Book loads this file on every page; it sets up each div.ac-quiz the page has.
//
// Inside a quiz's root element the page holds:
//   form.ac-quiz-question  one per question (data-question = its position): radio buttons
//                          or a text input in a fieldset, a submit button, and
//                          p.ac-quiz-feedback (role=status, aria-live) for the verdict
//   script.ac-quiz-data    JSON [question], question = {kind: "choice", choices:
//                          [{correct, why}]} or {kind: "number", answer, tolerance, why,
//                          hint, unit, mistakes: [[value, why]]}; texts are HTML, escaped
//                          when the page was built
(function () {
  function parseNumber(text) {
    var cleaned = String(text).replace(/[\s,_\u00a0\u202f]/g, "").replace(/\u2212/g, "-");
    // ASCII digits only, finite only: the same rule as parse_number in selfcheck.py
    if (!/^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$/.test(cleaned)) return null;
    var value = parseFloat(cleaned);
    return isFinite(value) ? value : null;
  }

  function verdict(q, form) {  // [right?, first words, explanation]
    if (q.kind === "choice") {
      var picked = form.querySelector("input[type=radio]:checked");
      if (!picked) return [false, "", "Choose one of the answers first."];
      var choice = q.choices[+picked.value];
      return [choice.correct, choice.correct ? "Correct." : "Not quite.", choice.why];
    }
    var value = parseNumber(form.querySelector("input[type=text]").value);
    if (value === null) return [false, "", "That is not a number we can check: type one" + (q.unit ? " in " + q.unit : "") +
                                   ", such as 12.5."];
    if (Math.abs(value - q.answer) <= q.tolerance) return [true, "Correct.", q.why];
    for (var i = 0; i < q.mistakes.length; i++) {
      if (Math.abs(value - q.mistakes[i][0]) <= q.tolerance) return [false, "Not quite.", q.mistakes[i][1]];
    }
    return [false, "Not quite.", "Hint: " + q.hint];
  }

  function setUp(root) {
    if (root.dataset.ready) return;
    root.dataset.ready = "1";
    var data = JSON.parse(root.querySelector("script.ac-quiz-data").textContent);
    root.querySelectorAll("form.ac-quiz-question").forEach(function (form) {
      var q = data[+form.dataset.question];
      var out = form.querySelector(".ac-quiz-feedback");
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        var v = verdict(q, form);
        out.className = "ac-quiz-feedback " + (v[0] ? "ac-quiz-right" : "ac-quiz-wrong");
        out.innerHTML = (v[1] ? "<b>" + v[1] + "</b> " : "") + v[2];
        form.dataset.answered = v[0] ? "right" : "wrong";
      });
    });
  }

  function setUpAll() { document.querySelectorAll("div.ac-quiz").forEach(setUp); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUpAll);
  else setUpAll();
})();
