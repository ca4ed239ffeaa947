"""Sibling pools: the pool file, materialised variants that load as banks, and bad input."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from unscaffold.errors import InputError
from unscaffold.knowledge.bank import load_bank
from unscaffold.rescue.pool import dump_toml, load_pool, materialise, shipped_pool


@pytest.mark.parametrize("suite", ["spreadsheet", "appworld_lite", "retrosynthesis"])
def test_shipped_pool_materialises_into_banks(suite: str, tmp_path: Path) -> None:
    pool = materialise(load_pool(shipped_pool(suite)), tmp_path / "pool")
    assert len(pool.banks) == 6
    for sibling in pool.spec.siblings:
        bank = load_bank(pool.banks[sibling.name])
        ids = {f"tool:{t.name}" for t in bank.manifest.tools} | {f"check:{c.name}" for c in bank.manifest.checks} \
            | {f"skill:{s.name}" for s in bank.manifest.skills} | {f"memory:{m.name}" for m in bank.manifest.memory}
        assert sibling.edit is not None
        assert ids == set(sibling.edit.keep) | {f"{a.kind}:{a.name}" for a in sibling.edit.add}
        assert 2 <= len(sibling.repairs) <= 3


def test_variant_edit_drops_a_remedy_whose_tool_is_gone(tmp_path: Path) -> None:
    pool = materialise(load_pool(shipped_pool("spreadsheet")), tmp_path / "pool")
    guarded = load_bank(pool.banks["guarded-write"])
    check = next(c for c in guarded.manifest.checks if c.name == "prefilled_guard")
    assert check.transcript_rule is not None and check.transcript_rule.remedy is None
    both = load_bank(pool.banks["guarded-verify"])
    check = next(c for c in both.manifest.checks if c.name == "prefilled_guard")
    assert check.transcript_rule is not None and check.transcript_rule.remedy.tool == "verify_output"
    added = load_bank(pool.banks["loop-breaker"])
    assert [s.name for s in added.manifest.skills] == ["step-back"]
    assert "Step back after repeated failures" in added.path(added.manifest.skills[0].path).read_text()


def test_toml_writer_round_trips() -> None:
    table = {"a": "x\"y\n", "b": [1, 2.5, True], "c": [{"k": {"z": "w"}}], "d": None}
    assert tomllib.loads(dump_toml(table)) == {k: v for k, v in table.items() if v is not None}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pool.toml"
    path.write_text(text)
    return path


HEAD = 'name = "p"\nsuite = "appworld_lite"\n'


def test_pool_errors_name_file_and_field(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"pool.toml: siblings.0: .*exactly one of `bank` and `edit`"):
        load_pool(write(tmp_path, HEAD + '[[siblings]]\nname = "a"\nparent = "base"\nrepairs = ["x"]\n'))
    with pytest.raises(InputError, match=r"siblings.0.parent: unknown parent 'zz'"):
        load_pool(write(tmp_path, HEAD + '[[siblings]]\nname = "a"\nparent = "zz"\nrepairs = ["x"]\nbank = "b"\n'))
    with pytest.raises(InputError, match=r"siblings.1.name: duplicate name 'a'"):
        load_pool(write(tmp_path, HEAD + '[[siblings]]\nname = "a"\nparent = "base"\nrepairs = ["x"]\nbank = "b"\n'
                        '[[siblings]]\nname = "a"\nparent = "base"\nrepairs = ["x"]\nbank = "b"\n'))
    pool = load_pool(write(tmp_path, HEAD + '[[siblings]]\nname = "a"\nparent = "base"\nrepairs = ["x"]\n'
                           '[siblings.edit]\nsource = "hstar"\nkeep = ["tool:nope"]\n'))
    with pytest.raises(InputError, match=r"siblings.0.edit.keep.0: 'tool:nope' is not a component of"):
        materialise(pool, tmp_path / "out")
    with pytest.raises(InputError, match=r"no pool ships for suite 'harbor' \(shipped: appworld, appworld_lite, "
                                         r"retrosynthesis, spreadsheet\)"):
        shipped_pool("harbor")
    nameless = HEAD.replace('suite = "appworld_lite"\n', "") + ('[[siblings]]\nname = "a"\nparent = "base"\n'
                                                                 'repairs = ["x"]\nbank = "b"\n')
    with pytest.raises(InputError) as err:
        load_pool(write(tmp_path, nameless))
    assert str(err.value) == (f"{tmp_path / 'pool.toml'}: suite: missing: this pool lies in no suite folder, so it "
                              "must name its suite")


def test_every_builtin_suite_ships_a_pool_whose_siblings_differ(tmp_path: Path) -> None:
    """A sibling changes what the student sees: its tools or its system prompt (skills, memory, checks),
    each different from the base harness and from every other sibling."""
    from unscaffold.knowledge.hstar import HStarHarness
    from unscaffold.minimal_harness.harness import MinimalHarness
    from unscaffold.suites import entries

    base = (repr(MinimalHarness().tools()), MinimalHarness().system_prompt())
    # harbor tasks bring their own environments and no bank; real AppWorld (which needs the user's data to
    # load) shares the app-world bank, and its pool is appworld_lite's siblings
    real, lite = load_pool(shipped_pool("appworld")), load_pool(shipped_pool("appworld_lite"))
    assert (real.suite, lite.suite) == ("appworld", "appworld_lite") and real.spec.siblings == lite.spec.siblings
    owned = [e.name for e in entries() if e.pool is not None and e.declaration.bank]  # a pool of its own bank
    assert {"appworld_lite", "retrosynthesis", "spreadsheet"} <= set(owned)
    for suite in owned:
        pool = materialise(load_pool(shipped_pool(suite)), tmp_path / suite)
        views = {name: (repr(h.tools()), h.system_prompt())
                 for name, h in ((n, HStarHarness(load_bank(b))) for n, b in pool.banks.items())}
        assert (pool.spec.suite, pool.suite) == (None, suite) and len(views) == 6
        assert base not in views.values() and len(set(views.values())) == 6, suite
