"""The website's view of the explorers: every chapter's explorer in a wide (desktop)
and a narrow (phone) layout, text legible at the size each is shown, no control whose
neighbouring values give the same picture, and the site build writing the frames as
files instead of base64 in the page."""

import base64
import html
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from docutils import nodes
from PIL import Image

from attention_core.book import explorers
from attention_core.book.explorers import strips
from attention_core.book.explorers.static import BREAKPOINT_PX, player_js, static_html
from attention_core.book.render import COLUMN_CSS_PX, PRINT_SCALE

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "_ext"))
import explorer_frames  # noqa: E402

COLUMN_PX = {"wide": COLUMN_CSS_PX["desktop"], "narrow": COLUMN_CSS_PX["phone"]}  # the content columns
FLOOR_PX = 9
CHAPTERS = sorted(p.stem for p in (ROOT / "chapters").glob("*.ipynb"))


def built_explorers(site, chapter: str) -> list[dict]:
    """The frame data of every explorer on a chapter's built page (``make book`` renders
    every frame of both layouts once; the tests read what the website ships)."""
    page = site / "chapters" / f"{chapter}.html"
    found = re.findall(r'class="ac-frames">(.*?)</script>', page.read_text(encoding="utf-8"), re.S)
    return [json.loads(f.replace("<\\/", "</")) for f in found]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_text_is_legible_at_the_size_shown(site, chapter):
    for data in built_explorers(site, chapter):
        layouts = data["layouts"]
        for layout, frames in layouts.items():
            shown = frames["min_text_px"] * min(1.0, COLUMN_PX[layout] / frames["width"])
            assert shown >= FLOOR_PX, (f"{chapter}, {layout} layout: smallest text {shown:.1f} CSS px "
                                       f"in a {COLUMN_PX[layout]} px column ({frames['min_text_px']} "
                                       f"px at {frames['width']} px)")
        narrow, wide = layouts["narrow"], layouts["wide"]
        assert narrow["width"] < wide["width"]
        assert narrow["height"] / narrow["width"] > wide["height"] / wide["width"], "narrow: panels stacked"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_control_repeats_a_picture_under_a_new_readout(site, chapter):
    """For each control, some step to a neighbouring value changes the frame: a
    control whose neighbours always show the same picture (chapter 11's key blocks
    beyond the last block, once) fails."""
    for data in built_explorers(site, chapter):
        index = data["layouts"]["wide"]["index"]
        for n, control in enumerate(data["names"]):
            pairs = []
            for key, frame in index.items():
                positions = [int(i) for i in key.split(",")]
                positions[n] += 1
                neighbour = index.get(",".join(map(str, positions)))
                if neighbour is not None:
                    pairs.append(frame == neighbour)
            assert not pairs or not all(pairs), f"{chapter}: control {control!r} never changes the frame"
            same = sum(pairs)
            assert same <= len(pairs) // 2, (f"{chapter}: control {control!r} repeats the frame in "
                                              f"{same} of {len(pairs)} steps")


def test_tiling_reads_exactly_the_key_blocks_there_are(site):
    explorer = explorers.tiling_explorer()
    counts = {}
    for _indices, values in explorer.combinations():
        counts.setdefault((values["seq_len"], values["block"]), []).append(values["key_blocks_done"])
    for (seq_len, block), done in counts.items():
        assert done == list(range(1, seq_len // block + 1))
    (data,) = built_explorers(site, "11_flash_attention")
    assert len(data["layouts"]["wide"]["index"]) == sum(len(d) for d in counts.values())


def test_static_view_carries_sizes_and_accessible_controls():
    explorer = explorers.tiling_explorer(seq_lens=(8, 16), blocks=(4, 8))
    page = static_html(explorer)
    img = re.search(r"<img [^>]*>", page).group(0)
    data = json.loads(re.search(r'class="ac-frames">(.*?)</script>', page).group(1))
    wide = data["layouts"]["wide"]
    assert f'width="{wide["width"]}"' in img and f'height="{wide["height"]}"' in img
    assert f'data-min-text-px="{wide["min_text_px"]}"' in img and 'data-layout="wide"' in img
    assert data["breakpoint"] == BREAKPOINT_PX
    assert 'aria-label="key blocks read" aria-valuetext="2"' in page
    assert '<output style="width:1.5ch">2</output>' in page, "a readout as wide as the widest value"
    assert "height:44px" in page, "touch-sized sliders on a phone"
    # key blocks read depends on the length and block size before it: one list per setting
    assert data["labels"][2] == {"0,0": ["1", "2"], "0,1": ["1"], "1,0": ["1", "2", "3", "4"],
                                 "1,1": ["1", "2"]}


def test_extension_writes_each_frame_once_as_a_file(tmp_path):
    explorer = explorers.tiling_explorer(seq_lens=(8, 16), blocks=(4, 8))
    page = static_html(explorer)
    uris = set(re.findall(r"data:image/png;base64,[A-Za-z0-9+/=]+", page))
    out = explorer_frames.externalise(page, str(tmp_path), "chapters")
    assert "data:image" not in out
    files = sorted((tmp_path / "_static" / "explorer-frames").iterdir())
    assert len(files) == len(uris), "content-addressed: each distinct frame once"
    assert {f.read_bytes() for f in files} == {base64.b64decode(u.split(",", 1)[1]) for u in uris}
    urls = set(re.findall(r"\.\./_static/explorer-frames/[0-9a-f]{16}\.png", out))
    assert urls == {f"../_static/explorer-frames/{f.name}" for f in files}
    img = re.search(r"<img [^>]*>", out).group(0)
    assert 'src="../_static/explorer-frames/' in img and 'loading="lazy"' in img
    assert len(out) < len(page) / 5
    assert 'src="_static/explorer-frames/' in explorer_frames.externalise(page, str(tmp_path), "")

    # as the build calls it: on the raw HTML node of a chapter's doctree
    doctree = nodes.document(None, None)
    doctree += nodes.raw("", page, format="html")
    doctree += nodes.raw("", "<p>data:image/png;base64,AAAA</p>", format="html")  # not an explorer
    app = SimpleNamespace(outdir=str(tmp_path / "site"), builder=SimpleNamespace(
        format="html", get_target_uri=lambda docname: docname + ".html"))
    explorer_frames.externalise_frames(app, doctree, "chapters/11_flash_attention")
    raws = [n.astext() for n in doctree.findall(nodes.raw)]
    assert "data:image" not in raws[0] and "../_static/explorer-frames/" in raws[0]
    assert raws[1] == "<p>data:image/png;base64,AAAA</p>"
    assert len(list((tmp_path / "site" / "_static" / "explorer-frames").iterdir())) == len(files)


PLAYER_HARNESS = r"""
const data = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const width = +process.argv[2];
function el(attrs) {
  const e = {dataset: {}, attrs: Object.assign({}, attrs), handlers: {},
    getAttribute(k) { return this.attrs[k]; }, setAttribute(k, v) { this.attrs[k] = String(v); },
    addEventListener(t, f) { this.handlers[t] = f; }};
  return e;
}
const kinds = data.kinds || data.start.map(() => "range");
const outputs = data.start.map(() => ({textContent: ""}));
const inputs = data.start.map((v, n) => Object.assign(el({}), {type: kinds[n], value: String(v), max: "0",
  checked: kinds[n] === "checkbox" && v === 1, dataset: {on: "1", off: "0"},
  parentNode: {querySelector() { return kinds[n] === "range" ? outputs[n] : null; }}}));
const img = el({src: "first"});
const root = {dataset: {}, clientWidth: width,
  querySelector(s) { return s.startsWith("script") ? {textContent: JSON.stringify(data.frames)} : img; },
  querySelectorAll(s) { return s.startsWith("input") ? inputs : outputs; }};
global.window = {innerWidth: width, addEventListener() {}};
const player = eval(require("fs").readFileSync(process.argv[3], "utf8"));
player(root);
const snap = () => ({src: img.attrs.src, layout: img.dataset.layout, minText: img.dataset.minTextPx,
  width: img.attrs.width, readouts: outputs.map((o) => o.textContent),
  valuetext: inputs.map((i) => i.attrs["aria-valuetext"]), max: inputs.map((i) => i.max)});
const out = [snap()];
for (const [n, v] of data.moves) {
  if (inputs[n].type === "checkbox") { inputs[n].checked = v === 1; inputs[n].handlers.change(); }
  else { inputs[n].value = String(v); inputs[n].handlers[inputs[n].type === "range" ? "input" : "change"](); }
  out.push(snap());
}
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
@pytest.mark.parametrize("width", [700, COLUMN_CSS_PX["phone"]])
def test_player_picks_the_layout_and_follows_dependent_ranges(tmp_path, width):
    explorer = explorers.tiling_explorer(seq_lens=(8, 16), blocks=(4, 8))
    frames = json.loads(re.search(r'class="ac-frames">(.*?)</script>', static_html(explorer)).group(1))
    player = tmp_path / "player.js"
    player.write_text(player_js())
    # start at L = 16, block 4, 2 blocks read; then block 8 (2 blocks there), then L = 8 (1 block)
    moves = [[1, 1], [0, 0]]
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"frames": frames, "start": [1, 0, 1], "moves": moves}))
    result = subprocess.run(["node", "-e", PLAYER_HARNESS, str(state), str(width), str(player)],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    states = json.loads(result.stdout)
    layout = "narrow" if width < BREAKPOINT_PX else "wide"
    for state in states:
        assert state["layout"] == layout and state["width"] == str(frames["layouts"][layout]["width"])
        assert state["minText"] == str(frames["layouts"][layout]["min_text_px"])
        assert state["valuetext"] == state["readouts"], "aria-valuetext is the value shown"
        assert state["src"] in frames["layouts"][layout]["images"]
    assert states[0]["readouts"] == ["16", "4", "2"] and states[0]["max"][2] == 3
    assert states[1]["readouts"] == ["16", "8", "2"] and states[1]["max"][2] == 1
    assert states[2]["readouts"] == ["8", "8", "1"] and states[2]["max"][2] == 0  # clamped
    assert len({s["src"] for s in states}) == 3


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_player_follows_a_toggle_and_a_drop_down(tmp_path):
    """Chapter 5's causal mask is a checkbox (on/off) and chapter 12's variant a drop-down:
    the player reads them as the sliders, and the frame follows."""
    explorer = explorers.masking_explorer(["the", "cat", "sat", "on", "the", "mat"], d_model=8)
    page = static_html(explorer)
    assert re.search(r'<label class="ac-control ac-toggle"><input type="checkbox" data-on="1" data-off="0" '
                     r'checked> <span>causal mask</span></label>', page)
    assert page.count('type="range"') == 2 and "<select" not in page
    frames = json.loads(re.search(r'class="ac-frames">(.*?)</script>', page).group(1))
    player = tmp_path / "player.js"
    player.write_text(player_js())
    state = tmp_path / "state.json"  # 6 tokens, 2 padded, causal on; then causal off, then 1 padded
    kinds = ["range", "range", "checkbox"]
    moves = [[2, 0], [1, 1]]
    state.write_text(json.dumps({"frames": frames, "start": [2, 2, 1], "kinds": kinds, "moves": moves}))
    result = subprocess.run(["node", "-e", PLAYER_HARNESS, str(state), "700", str(player)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    states = json.loads(result.stdout)
    index, images = frames["layouts"]["wide"]["index"], frames["layouts"]["wide"]["images"]
    assert [s["src"] for s in states] == [images[index[k]] for k in ("2,2,1", "2,2,0", "2,1,0")]
    assert states[1]["readouts"][:2] == ["6", "2"] and states[2]["readouts"][:2] == ["6", "1"]

    choices = explorers.kv_memory_explorer(contexts=(1024, 8192))
    page = static_html(choices)
    names = list(choices.controls["variant"])
    options = re.findall(r'<option value="(\d+)"( selected)?>([^<]*)</option>', page)
    assert [o[2] for o in options] == [html.escape(n) for n in names]
    assert [o[0] for o in options if o[1]] == [str(names.index(choices.values["variant"]))]
    assert '<label class="ac-control ac-choice"><span>variant</span> <select>' in page


def test_print_copies_only_for_the_frames_the_pdf_prints(monkeypatch):
    """Issue #47: a print copy (render.PRINT_SCALE times the pixels) costs several frames'
    time, so an explorer renders one only for each frame of its chapter's strip
    (explorers.strips), by the rule the PDF builder prints them; a strip that no longer matches
    its explorer fails the build when the chapter runs, naming the chapter."""
    explorer = explorers.tiling_explorer(seq_lens=(8, 16), blocks=(4, 8))
    data = json.loads(re.search(r'class="ac-frames">(.*?)</script>', static_html(explorer)).group(1))
    wide = data["layouts"]["wide"]
    chosen = strips.strip_frames("11_flash_attention", data["controls"], data["labels"], data["start"],
                                 wide["index"])
    assert data["chapter"] == "11_flash_attention"
    assert sorted(wide["print_images"]) == sorted(str(frame) for frame, _ in chosen)
    assert len(chosen) == 4 < len(wide["images"])
    uri = next(iter(wide["print_images"].values()))
    printed = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))
    assert printed.size == (round(wide["width"] * PRINT_SCALE), round(wide["height"] * PRINT_SCALE))
    explorer.chapter = None  # an explorer outside the book: each control at its ends
    data = json.loads(re.search(r'class="ac-frames">(.*?)</script>', static_html(explorer)).group(1))
    wide = data["layouts"]["wide"]
    chosen = strips.strip_frames(None, data["controls"], data["labels"], data["start"], wide["index"])
    assert sorted(wide["print_images"]) == sorted(str(frame) for frame, _ in chosen)
    explorer.chapter = "11_flash_attention"
    monkeypatch.setitem(strips.STRIPS, "11_flash_attention", [{"block": "5"}])
    with pytest.raises(strips.StripError, match=r"^11_flash_attention: STRIPS setting \{'block': '5'\}"):
        static_html(explorer)
