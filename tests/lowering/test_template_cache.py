"""The compiled-template cache (templates/environment.py): a later process loads the templates' compiled code from
disk instead of compiling them again, and a damaged file or an unwritable directory only costs a compile."""
import jinja2
import pytest

from tt_backend.templates.environment import environment, cache_dir

TEMPLATE, CTX = "link.ld.j2", {"origin": 0x1000, "length": 0x2000}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def fresh_render(monkeypatch, compiles: list) -> str:
    """Render TEMPLATE in a new environment (as a new process would), counting the templates it compiles."""
    env = environment()
    real = env.compile
    monkeypatch.setattr(env, "compile", lambda *a, **k: compiles.append(a) or real(*a, **k))
    return env.get_template(TEMPLATE).render(CTX)


def test_a_new_environment_loads_the_compiled_template_from_disk(cache, monkeypatch):
    first, second = [], []
    text = fresh_render(monkeypatch, first)
    assert len(first) == 1 and len(list(cache_dir().glob("*.jinja"))) == 1
    assert fresh_render(monkeypatch, second) == text and second == []


def test_a_damaged_compiled_template_is_compiled_again(cache, monkeypatch):
    text = fresh_render(monkeypatch, [])
    (entry,) = cache_dir().glob("*.jinja")
    entry.write_bytes(entry.read_bytes()[:20])
    again = []
    assert fresh_render(monkeypatch, again) == text and len(again) == 1


def test_a_cache_directory_that_cannot_be_written_still_renders(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("TT_CACHE_DIR", str(tmp_path / "file"))
    compiles = []
    expected = jinja2.Environment(loader=environment().loader, undefined=jinja2.StrictUndefined)
    assert fresh_render(monkeypatch, compiles) == expected.get_template(TEMPLATE).render(CTX) and len(compiles) == 1
