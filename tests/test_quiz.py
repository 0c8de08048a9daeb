"""The "Check yourself" questions (attention_core.book.quiz, .questions, .selfcheck): every chapter
shows 4 to 6 before its exercises; a multiple-choice question has exactly one right
choice and an explanation for every choice; a numeric one has a computed answer, a
tolerance and explained mistakes; their numbers follow the package. In a kernel the
questions are ipywidgets that answer right and wrong with the explanation; on the website
they are real form controls, and headless Chromium answers one question right and one
wrong on the built page and reads the feedback (light and dark, 1280 and 390 px)."""

import json
import math
import re
import shutil
import subprocess

import nbformat
import pytest
from bs4 import BeautifulSoup
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from IPython.utils.capture import capture_output

from attention_core.book import questions as question_module
from attention_core.book.quiz import quiz
from attention_core.book.selfcheck import MultipleChoice, Numeric, parse_number
from conftest import CHAPTERS, ROOT

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
ALL = {name: quiz(name).questions for name in question_module.QUESTIONS}


def test_every_chapter_has_its_questions_before_the_exercises():
    assert sorted(ALL) == [f"ch{n:02d}" for n in range(1, len(CHAPTERS) + 1)]
    for chapter in CHAPTERS:
        nb = nbformat.read(ROOT / "chapters" / f"{chapter}.ipynb", 4)
        calls = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "quiz(" in c.source]
        assert len(calls) == 1, f"{chapter}: expected one quiz cell, found {len(calls)}"
        i = calls[0]
        assert f'quiz("ch{chapter[:2]}")' in nb.cells[i].source, f"{chapter}: another chapter's quiz"
        assert nb.cells[i - 1].source.startswith("## Check yourself"), chapter
        assert nb.cells[i + 1].source.startswith("## Exercises"), f"{chapter}: not just before the exercises"


@pytest.mark.parametrize("chapter", sorted(ALL))
def test_questions_are_well_formed(chapter):
    qs = ALL[chapter]
    assert 4 <= len(qs) <= 6, f"{chapter}: {len(qs)} questions"
    assert len({q.prompt for q in qs}) == len(qs), f"{chapter}: a question is repeated"
    for q in qs:
        if isinstance(q, MultipleChoice):
            right = [i for i, c in enumerate(q.choices) if c.correct]
            assert len(right) == 1 and len(q.choices) >= 3, q.prompt
            for i, c in enumerate(q.choices):
                verdict = q.check(i)
                assert verdict.correct == (i == right[0]) and c.why in verdict.message, (q.prompt, c.text)
                assert len(c.why) > 20, f"{chapter}: choice {c.text!r} is not explained"
            assert not q.check(None).correct
        else:
            assert isinstance(q, Numeric) and math.isfinite(q.answer) and 0 < q.tolerance
            assert q.tolerance <= 0.05 * abs(q.answer) + 0.5, f"{chapter}: tolerance too loose for {q.prompt}"
            assert q.check(q.answer).correct and q.check(repr(q.answer)).correct
            assert q.check(f"{q.answer + q.tolerance * 0.9:.12g}").correct
            assert not q.check(q.answer + 3 * q.tolerance + 1).correct
            assert not q.check("twelve").correct
            for value, why in q.mistakes:
                verdict = q.check(value)
                assert not verdict.correct and why in verdict.message, (q.prompt, value)


def test_multiple_choice_answers_are_spread_over_positions():
    positions = [q.answer for qs in ALL.values() for q in qs if isinstance(q, MultipleChoice)]
    assert len(set(positions)) >= 3 and max(positions.count(p) for p in set(positions)) < 0.6 * len(positions)


def test_bad_questions_are_refused():
    from attention_core.book.selfcheck import Choice

    with pytest.raises(ValueError, match="exactly one right choice"):
        MultipleChoice("?", (Choice("a", True, "because"), Choice("b", True, "because")))
    with pytest.raises(ValueError, match="exactly one right choice"):
        MultipleChoice("?", (Choice("a", False, "because"), Choice("b", False, "because")))
    with pytest.raises(ValueError, match="explanation"):
        MultipleChoice("?", (Choice("a", True, "because"), Choice("b", False, " ")))
    with pytest.raises(ValueError, match="tolerance"):
        Numeric("?", 1.0, 0.0, "why", "hint")
    with pytest.raises(ValueError, match="mistakes"):
        Numeric("?", 1.0, 0.1, "why", "hint", mistakes=((1.05, "too close to the answer"),))
    with pytest.raises(ValueError, match="chapter must be one of"):
        quiz("ch99")


def test_numbers_are_parsed_as_readers_type_them():
    assert parse_number("1,048,576") == 1048576 and parse_number(" 6.5e-3 ") == 0.0065
    assert parse_number("\u22121.5") == -1.5 and parse_number("512") == 512 and parse_number(".5") == 0.5
    assert parse_number("12 MiB") is None and parse_number("") is None and parse_number("1.2.3") is None


# Issue #44: what a reader may type, accepted (with its value) or refused (None), by both rules
NUMBER_STRINGS = [("1,048,576", 1048576.0), (" 6.5e-3 ", 0.0065), ("\u22121.5", -1.5), (".5", 0.5),
                  ("1\u00a0024", 1024.0), ("+3", 3.0), ("12 MiB", None), ("", None), ("1.2.3", None),
                  ("\u0661\u0662", None), ("\uff11\uff12", None), ("\u0968", None), ("1e400", None),
                  ("-1e400", None), ("inf", None), ("nan", None), ("0x10", None)]


@pytest.mark.parametrize("text, value", NUMBER_STRINGS)
def test_only_ascii_finite_numbers_are_accepted(text, value):
    assert parse_number(text) == value


def test_numeric_check_refuses_numbers_it_cannot_check():
    numeric = next(q for qs in ALL.values() for q in qs if isinstance(q, Numeric))
    for text in (10**400, "1e400", "\uff11\uff12", float("nan")):
        verdict = numeric.check(text)
        assert not verdict.correct and "not a number we can check" in verdict.message
    choice = next(q for qs in ALL.values() for q in qs if isinstance(q, MultipleChoice))
    for index in (True, False):
        with pytest.raises(ValueError, match="index"):
            choice.check(index)


def test_a_chapter_id_must_be_an_id_before_it_reaches_html():
    """Issue #44: the chapter string goes into HTML ids and attributes."""
    from attention_core.book.selfcheck import Quiz, static_html

    questions = ALL["ch01"]
    for bad in ('x" onclick="alert(1)', "ch 01", "", 3):
        with pytest.raises(ValueError, match="chapter"):
            Quiz(bad, questions)
        with pytest.raises(ValueError, match="chapter"):
            static_html(bad, questions)
    assert 'id="ac-quiz-ch01"' in Quiz("ch01", questions).to_html()


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_quiz_js_parses_numbers_as_parse_number_does():
    """The website's parseNumber, taken from quiz.js and run by node on the same strings."""
    source = (ROOT / "_static" / "quiz" / "quiz.js").read_text()
    function = re.search(r"function parseNumber\(text\) \{.*?\n  \}", source, re.S).group(0)
    script = f"{function}\nconsole.log(JSON.stringify(JSON.parse(process.argv[1]).map(parseNumber)));"
    texts = [text for text, _ in NUMBER_STRINGS]
    result = subprocess.run(["node", "-e", script, json.dumps(texts)], capture_output=True, text=True,
                            timeout=30, check=True)
    assert json.loads(result.stdout) == [parse_number(text) for text in texts]


def test_numbers_come_from_the_package(monkeypatch):
    """A question's numbers follow the package: change what it computes and the question changes."""
    kv = next(q for q in ALL["ch09"] if isinstance(q, Numeric) and "KV cache take" in q.prompt)
    real = question_module.kv_cache_bytes
    monkeypatch.setattr(question_module, "kv_cache_bytes", lambda *a, **k: 3 * real(*a, **k))
    changed = next(q for q in question_module.ch09()
                   if isinstance(q, Numeric) and "KV cache take" in q.prompt)
    assert changed.answer == pytest.approx(3 * kv.answer)
    # the GQA trap: the group size and the number of key/value heads give different heads
    gqa = next(q for q in ALL["ch09"] if isinstance(q, MultipleChoice) and "which key/value head" in q.prompt)
    assert gqa.choices[gqa.answer].text == "3" and any(c.text == "1" and not c.correct for c in gqa.choices)
    # the masking trap: the package's fully masked row is zero, the -1e6 trick's uniform
    masked = next(q for q in ALL["ch05"] if "every one of its" in q.prompt)
    assert masked.choices[masked.answer].text.startswith("All zeros")


@pytest.fixture
def kernel(monkeypatch):
    yield InteractiveShell.instance()
    InteractiveShell.clear_instance()


def test_kernel_widgets_answer_right_and_wrong(kernel):
    shown = quiz("ch05")
    with capture_output() as captured:
        display(shown)
    (output,) = captured.outputs
    assert WIDGET_VIEW in output.data and output.data["text/plain"].startswith("Check yourself (ch05)")
    items = shown.widgets()
    assert len(items) == len(shown.questions)
    mc = next(i for i in items if isinstance(i.question, MultipleChoice))
    wrong = next(n for n, c in enumerate(mc.question.choices) if not c.correct)
    mc.answer.index = wrong
    mc.button.click()
    assert "Not quite." in mc.feedback.value and "aria-live" in mc.feedback.value
    mc.answer.index = mc.question.answer
    mc.button.click()
    assert "Correct." in mc.feedback.value
    num = next(i for i in items if isinstance(i.question, Numeric))
    num.answer.value = f"{num.question.answer:.4f}"
    num.button.click()
    assert "Correct." in num.feedback.value
    num.answer.value = f"{num.question.mistakes[0][0]:.4f}"
    num.button.click()
    assert "Not quite." in num.feedback.value and "without the mask" in num.feedback.value


def test_website_view_is_real_form_controls(website):
    shown = quiz("ch09")
    bundle = shown._repr_mimebundle_()
    assert set(bundle) == {"text/html"}, "the website gets the static view alone"
    soup = BeautifulSoup(bundle["text/html"], "html.parser")
    forms = soup.select("form.ac-quiz-question")
    assert len(forms) == len(shown.questions)
    data = json.loads(soup.select_one("script.ac-quiz-data").string)
    for form, q, d in zip(forms, shown.questions, data):
        assert form.fieldset and form.fieldset.legend and form.select_one("button[type=submit]")
        feedback = form.select_one(".ac-quiz-feedback")
        assert feedback["aria-live"] == "polite" and feedback["role"] == "status"
        if isinstance(q, MultipleChoice):
            radios = form.select("input[type=radio]")
            assert len(radios) == len(q.choices) and len({r["name"] for r in radios}) == 1
            assert all(r.parent.name == "label" for r in radios)
            assert [c["correct"] for c in d["choices"]] == [c.correct for c in q.choices]
        else:
            assert form.select_one("label input[type=text]") is not None
            assert d["answer"] == q.answer and d["tolerance"] == q.tolerance
    assert "<script>" not in bundle["text/html"] and "<style" not in bundle["text/html"]
    css = (ROOT / "_static" / "quiz" / "quiz.css").read_text()
    assert "html[data-theme=dark] .ac-quiz" in css and "min-height: 44px" in css


# --- the built website in Chromium -----------------------------------------------------

PAGE = "chapters/05_masking.html"


@pytest.fixture(scope="module")
def quiz_page(site):
    from conftest import need_chromium

    need_chromium()
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/{PAGE}"
    httpd.shutdown()


@pytest.mark.browser
@pytest.mark.parametrize("width", [1280, 390])
def test_chromium_answers_right_and_wrong(quiz_page, width):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    from conftest import PHONE, chromium, emulate_phone

    shots = ROOT / "_build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    phone = width == PHONE["width"]  # emulated: a headless window of 390 px shows 485 px
    with chromium(window="500,900" if phone else f"{width},900",
                  capabilities={"goog:loggingPrefs": {"browser": "ALL"}}) as driver:
        if phone:
            emulate_phone(driver)
        driver.get(quiz_page)
        WebDriverWait(driver, 30).until(
            lambda d: d.execute_script("return document.readyState") == "complete")
        root = driver.find_element(By.CSS_SELECTOR, ".ac-quiz")
        payload = root.find_element(By.CSS_SELECTOR, "script.ac-quiz-data")
        data = json.loads(payload.get_attribute("textContent"))
        forms = root.find_elements(By.CSS_SELECTOR, "form.ac-quiz-question")
        mc = next(n for n, d in enumerate(data) if d["kind"] == "choice")
        num = next(n for n, d in enumerate(data) if d["kind"] == "number")
        # a wrong choice, chosen with the keyboard: Tab to the group, arrows move the choice
        wrong = next(i for i, c in enumerate(data[mc]["choices"]) if not c["correct"])
        radios = forms[mc].find_elements(By.CSS_SELECTOR, "input[type=radio]")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", forms[mc])
        radios[0].send_keys(Keys.SPACE)
        for _ in range(wrong):
            driver.switch_to.active_element.send_keys(Keys.ARROW_DOWN)
        assert radios[wrong].is_selected()
        driver.switch_to.active_element.send_keys(Keys.TAB)  # to the Check button
        driver.switch_to.active_element.send_keys(Keys.ENTER)
        feedback = forms[mc].find_element(By.CSS_SELECTOR, ".ac-quiz-feedback")
        assert feedback.text.startswith("Not quite."), feedback.text
        assert feedback.get_attribute("aria-live") == "polite"
        # the right number, typed and submitted with Enter
        box = forms[num].find_element(By.CSS_SELECTOR, "input[type=text]")
        box.send_keys(f"{data[num]['answer']:.4f}", Keys.ENTER)
        right = forms[num].find_element(By.CSS_SELECTOR, ".ac-quiz-feedback")
        assert right.text.startswith("Correct."), right.text
        assert "ac-quiz-right" in right.get_attribute("class")
        # nothing overflows the content column
        overflow = driver.execute_script(
            "var r = arguments[0].getBoundingClientRect(); return r.right <= "
            "document.documentElement.clientWidth;",
            root)
        assert overflow, f"the questions are wider than the page at {width} px"
        for theme in ("light", "dark"):
            driver.execute_script(f"document.documentElement.dataset.theme = '{theme}';"
                                  "arguments[0].scrollIntoView({block: 'start'})", forms[mc])
            colours = driver.execute_script(
                "var s = getComputedStyle(arguments[0]); return [s.color, "
                "getComputedStyle(arguments[1]).color];",
                feedback, right)
            assert colours[0] != colours[1], "right and wrong feedback must look different"
            legend = driver.execute_script(
                "return getComputedStyle(arguments[0].querySelector('legend')).color", forms[mc])
            brightness = sum(float(v) for v in re.findall(r"[\d.]+", legend)[:3]) / 3
            assert (brightness > 160) == (theme == "dark"), f"{theme}: the question's text is {legend}"
            driver.save_screenshot(str(shots / f"quiz_{width}_{theme}.png"))
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
