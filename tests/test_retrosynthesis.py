"""Retrosynthesis suite: built-in data integrity, USPTO-50k loader, RDKit exact-match scorer, oracle runs."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from rdkit import Chem

from tests.helpers import needs_bwrap
from unscaffold.benchmarks import load_suite
from unscaffold.benchmarks.retrosynthesis.chem import CLASS_NAMES, RDKIT_VERSION, Gold, canonical, score_answer
from unscaffold.benchmarks.retrosynthesis.data import BUILTIN, load_reactions, parse_class, split_of
from unscaffold.benchmarks.retrosynthesis.suite import RetrosynthesisSuite, instruction
from unscaffold.errors import InputError
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run, select_tasks


@pytest.fixture(scope="module")
def suite() -> RetrosynthesisSuite:
    return RetrosynthesisSuite()


def elements(smiles: str) -> Counter[str]:
    return Counter(a.GetSymbol() for a in Chem.MolFromSmiles(smiles).GetAtoms())


# -- built-in data -------------------------------------------------------------------------------------


def test_builtin_split_is_80_40_over_all_ten_classes(suite: RetrosynthesisSuite) -> None:
    assert suite.splits() == ["train", "test"]
    train, test = suite.tasks("train"), suite.tasks("test")
    assert (len(train), len(test), len(suite.tasks())) == (80, 40, 120)
    assert {t.meta["class"] for t in train} == {t.meta["class"] for t in test} == set(range(1, 11))
    assert min(Counter(t.meta["class"] for t in test).values()) >= 3
    assert len({t.id for t in train + test}) == 120


def test_builtin_smiles_parse_and_every_product_heavy_atom_is_accounted_for(suite: RetrosynthesisSuite) -> None:
    for r in suite.reactions:
        for smiles in [*r.reactants.split("."), r.product]:
            mol = Chem.MolFromSmiles(smiles)
            assert mol is not None, (r.id, smiles)
            assert not any(a.GetAtomMapNum() for a in mol.GetAtoms()), r.id
        assert "." not in r.product, r.id
        missing = elements(r.product) - elements(r.reactants)
        assert not missing, f"{r.id}: product atoms {dict(missing)} come from no reactant"
        assert r.gold.product not in r.gold.reactants, r.id


def test_builtin_csv_uses_the_uspto50k_layout() -> None:
    for name in ("raw_train.csv", "raw_test.csv"):
        lines = (BUILTIN / name).read_text().splitlines()
        assert lines[0] == "id,class,reactants>reagents>production"
        assert all(line.count(">") == 2 and ">>" in line for line in lines[1:])


def test_instruction_states_type_and_canonical_product(suite: RetrosynthesisSuite) -> None:
    task = next(t for t in suite.tasks("test") if t.meta["class"] == 6)
    product = suite.reaction(task).gold.product
    assert f"The reaction type is {CLASS_NAMES[6]}.\nProduct SMILES: {product}\n" in task.instruction
    assert "`answer.txt`" in task.instruction and "separated by dots" in task.instruction
    example = task.instruction.split("(for example `")[1].split("`")[0]
    assert canonical(example) and ".".join(sorted(example.split("."))) not in {
        ".".join(r.gold.reactants) for r in suite.reactions}
    assert "The reaction type" not in instruction("CCO", None)


def test_leak_markers_hold_ids_and_gold_answers(suite: RetrosynthesisSuite) -> None:
    markers = set(suite.leak_markers())
    for r in suite.reactions:
        assert r.id in markers and r.recorded_answer() in markers and r.reactants in markers


# -- scorer ----------------------------------------------------------------------------------------------

AMIDE = Gold.of("O=C(O)c1ccc(Cl)cc1.C1CCNCC1", "O=C(c1ccc(Cl)cc1)N1CCCCC1")
PROLINE = Gold.of("CC(C)(C)OC(=O)N1CCC[C@H]1C(=O)O.NCc1ccccc1", "CC(C)(C)OC(=O)N1CCC[C@H]1C(=O)NCc1ccccc1")


@pytest.mark.parametrize(
    "gold,text,reward,reason,details",
    [
        (AMIDE, "C1CCNCC1.OC(=O)c1ccc(Cl)cc1\n", 1.0, None, {"exact": True, "jaccard": 1.0}),
        (AMIDE, "[CH2:1]1[CH2:2][CH2:3][NH:4][CH2:5][CH2:6]1.[OH:7][C:8](=[O:9])c1ccc(Cl)cc1", 1.0, None,
         {"exact": True}),
        (AMIDE, "O=C(Cl)c1ccc(Cl)cc1.C1CCNCC1", 0.0,
         "the reactants differ from the recorded ones: answered C1CCNCC1.O=C(Cl)c1ccc(Cl)cc1, expected "
         "C1CCNCC1.O=C(O)c1ccc(Cl)cc1",
         {"exact": False, "maxfrag": False, "stereo_free": False, "jaccard": 0.3333}),
        (AMIDE, "O=C(O)c1ccc(Cl)cc1.C1CCNCC1.[Na+]", 0.0,
         "the reactants differ from the recorded ones: answered C1CCNCC1.O=C(O)c1ccc(Cl)cc1.[Na+], expected "
         "C1CCNCC1.O=C(O)c1ccc(Cl)cc1",
         {"maxfrag": True, "jaccard": 0.6667}),
        (PROLINE, "CC(C)(C)OC(=O)N1CCC[C@@H]1C(=O)O.NCc1ccccc1", 0.0,
         "the reactants differ from the recorded ones: answered CC(C)(C)OC(=O)N1CCC[C@@H]1C(=O)O.NCc1ccccc1, "
         "expected CC(C)(C)OC(=O)N1CCC[C@H]1C(=O)O.NCc1ccccc1",
         {"exact": False, "stereo_free": True, "maxfrag": False}),
        (PROLINE, "CC(C)(C)OC(=O)N1CCCC1C(=O)O.NCc1ccccc1", 0.0,
         "the reactants differ from the recorded ones: answered CC(C)(C)OC(=O)N1CCCC1C(=O)O.NCc1ccccc1, "
         "expected CC(C)(C)OC(=O)N1CCC[C@H]1C(=O)O.NCc1ccccc1",
         {"stereo_free": True}),
        (AMIDE, "O=C(O)c1ccc(Cl)cc1.C1CCNCC1(", 0.0, "the answer is not valid SMILES", {}),
        (AMIDE, "CN(C)(C)(C)C", 0.0, "the answer is not valid SMILES", {}),
        (AMIDE, None, 0.0, "answer.txt not found", {}),
        (AMIDE, " \n\n", 0.0, "answer.txt is empty", {}),
        (AMIDE, "O=C(c1ccc(Cl)cc1)N1CCCCC1", 0.0, "the answer contains the product itself", {"exact": False}),
        (AMIDE, "O=C(O)c1ccc(Cl)cc1 . C1CCNCC1", 0.0, "the answer line holds whitespace (one line of "
         "dot-separated SMILES expected)", {}),
        (AMIDE, "O=C(O)c1ccc(Cl)cc1..C1CCNCC1", 0.0, "the answer has an empty fragment (stray dot)", {}),
        (AMIDE, "O=C(O)c1ccc(Cl)cc1.C1CCNCC1\nO=C(Cl)c1ccc(Cl)cc1.C1CCNCC1\n", 1.0, None, {"lines": 2}),
    ],
)
def test_scorer_cases(gold: Gold, text: str | None, reward: float, reason: str | None, details: dict) -> None:
    score = score_answer(text, gold)
    assert (score.reward, score.reason) == (reward, reason)
    assert score.details["rdkit_version"] == RDKIT_VERSION
    for key, value in details.items():
        assert score.details[key] == value, key


def test_scorer_keeps_repeated_reactants_as_a_multiset() -> None:
    gold = Gold.of("OCCO.OCCO", "C1COCCO1")  # a made-up 2:1 set: the count matters
    assert score_answer("OCCO", gold).reward == 0.0
    assert score_answer("OCCO.OCCO", gold).reward == 1.0


def test_suite_scores_the_workspace_file_on_the_host(suite: RetrosynthesisSuite, tmp_path: Path) -> None:
    task = suite.tasks("test")[0]
    config = suite.prepare(task, tmp_path, "local")
    assert config.workdir == "/workspace" and config.network is False
    assert (tmp_path / "workspace" / "product.smi").read_text() == suite.reaction(task).gold.product + "\n"
    assert suite.score(task, tmp_path, None, None).reason == "answer.txt not found"  # type: ignore[arg-type]
    (tmp_path / "workspace" / "answer.txt").write_text(suite.reaction(task).reactants[::-1][::-1] + "\n")
    score = suite.score(task, tmp_path, None, None)  # type: ignore[arg-type]
    assert score.reward == 1.0 and score.details["class"] == task.meta["class"]
    assert suite.prepare(task, tmp_path / "n", "none").workdir is None


def test_metrics_per_class_and_describe(suite: RetrosynthesisSuite) -> None:
    tasks = suite.tasks("test")
    rewards = {t.id: float(t.meta["class"] != 3) for t in tasks}
    metrics = suite.metrics(tasks, rewards)
    assert sorted(metrics) == sorted(f"pass_at_1_class_{c}" for c in range(1, 11))
    assert metrics["pass_at_1_class_3"] == 0.0 and metrics["pass_at_1_class_1"] == 100.0
    assert suite.describe() == {"rdkit_version": RDKIT_VERSION, "data": "built-in", "n_reactions": "120"}


# -- loader ----------------------------------------------------------------------------------------------

MAPPED = ("[CH3:1][C:2](=[O:3])[OH:4].[NH2:5][CH2:6][c:7]1[cH:8][cH:9][cH:10][cH:11][cH:12]1"
          ">>[CH3:1][C:2](=[O:3])[NH:5][CH2:6][c:7]1[cH:8][cH:9][cH:10][cH:11][cH:12]1")
MAPPED_DEPROTECTION = ("[CH3:1][C:2]([CH3:3])([CH3:4])[O:5][C:6](=[O:7])[NH:8][CH2:9][CH2:10][OH:11]"
                       ">>[NH2:8][CH2:9][CH2:10][OH:11]")


def test_loader_layout_id_class_rxn_with_atom_maps(tmp_path: Path) -> None:
    path = tmp_path / "raw_test.csv"
    path.write_text(f"id,class,reactants>reagents>production\nUS123A1,2,{MAPPED}\nUS456B2,6,{MAPPED_DEPROTECTION}\n")
    suite = load_suite("retrosynthesis", path)
    assert suite.splits() == ["test"]
    tasks = suite.tasks("test")
    assert [(t.id, t.meta["class"]) for t in tasks] == [("US123A1", 2), ("US456B2", 6)]
    assert "Product SMILES: CC(=O)NCc1ccccc1\n" in tasks[0].instruction
    product_line = next(line for line in tasks[0].instruction.splitlines() if line.startswith("Product SMILES: "))
    assert ":" not in product_line.split(": ", 1)[1] and "[" not in product_line
    assert "The reaction type is Acylation and related processes." in tasks[0].instruction
    assert suite.reaction(tasks[0]).recorded_answer() == "CC(=O)O.NCc1ccccc1"
    assert score_answer("NCc1ccccc1.CC(O)=O", suite.reaction(tasks[0]).gold).reward == 1.0
    assert "CC(=O)O.NCc1ccccc1" in suite.leak_markers()


def test_loader_layout_class_id_rxn_smiles_with_index_and_repeated_ids(tmp_path: Path) -> None:
    path = tmp_path / "uspto_valid.csv"
    path.write_text(f",class,id,rxn_smiles\n0,<RX_2>,US1,{MAPPED}\n1,6,US1,{MAPPED_DEPROTECTION}\n"
                    f"2,,US2,CCO>>CC=O\n")
    reactions = load_reactions(path)
    assert [(r.id, r.source_id, r.rclass, r.split) for r in reactions] == [
        ("val-2", "US1", 2, "val"), ("val-3", "US1", 6, "val"), ("val-4", "US2", None, "val")]
    assert reactions[1].gold.product == "NCCO"
    suite = load_suite("retrosynthesis", path)
    assert "The reaction type" not in suite.tasks()[2].instruction


def test_loader_folder_splits_and_bad_rows(tmp_path: Path) -> None:
    (tmp_path / "raw_train.csv").write_text(f"id,class,reactants>reagents>production\na,2,{MAPPED}\n"
                                            "b,1,C1CC(>>CC\nc,1,no reaction here\n")
    (tmp_path / "raw_test.csv").write_text(f"id,class,reactants>reagents>production\nd,6,{MAPPED_DEPROTECTION}\n")
    with pytest.warns(UserWarning) as seen:
        suite = RetrosynthesisSuite(tmp_path)
    assert [str(w.message) for w in seen] == [f"{tmp_path / 'raw_train.csv'}: skipped 1 row(s) that are not "
                                              "`reactants>reagents>product`: line 4 (id c)"]
    with pytest.warns(UserWarning) as seen:
        assert [t.id for t in suite.tasks("train")] == ["a"]
    assert [str(w.message) for w in seen] == [f"left out 1 reaction(s): {tmp_path / 'raw_train.csv'}: line 3: "
                                              "reaction 'b': SMILES that RDKit cannot parse"]
    assert [t.id for t in suite.tasks("test")] == ["d"]
    with pytest.raises(InputError) as err:  # asked for by name, the bad row is an error naming line and id
        suite.named_tasks(["a", "b"])
    assert str(err.value) == f"{tmp_path / 'raw_train.csv'}: line 3: reaction 'b': SMILES that RDKit cannot parse"
    assert [t.id for t in suite.named_tasks(["a", "d"])] == ["d", "a"]  # in the order of the data


def test_naming_tasks_canonicalises_only_those(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--tasks` on a large split makes only the named tasks: no other reaction reaches RDKit."""
    import unscaffold.benchmarks.retrosynthesis.data as data

    rows = "".join(f"r{i},1,{MAPPED}\n" for i in range(2000))
    (tmp_path / "raw_train.csv").write_text(f"id,class,reactants>reagents>production\n{rows}")
    made = []
    original = data.Gold.of
    monkeypatch.setattr(data.Gold, "of", classmethod(lambda cls, r, p: made.append(p) or original(r, p)))
    suite = RetrosynthesisSuite(tmp_path)
    summary_tasks = select_tasks(suite, RunConfig(suite="retrosynthesis", student="oracle", out=tmp_path / "r",
                                                  task_ids=["r1500", "r7"]))
    assert [t.id for t in summary_tasks] == ["r7", "r1500"]
    assert len(made) == 2


def test_loader_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.csv"
    bad.write_text("id,class,smiles\n1,2,CCO\n")
    with pytest.raises(InputError) as err:
        load_reactions(bad)
    assert str(err.value).startswith(f"{bad}: header: no reaction column")
    with pytest.raises(InputError, match="not found"):
        load_reactions(tmp_path / "missing.csv")


@pytest.mark.parametrize("value,expected", [("5", 5), ("<RX_10>", 10), ("3.0", 3), ("", None), ("11", None)])
def test_parse_class(value: str, expected: int | None) -> None:
    assert parse_class(value) == expected


@pytest.mark.parametrize("name,split", [("raw_train", "train"), ("raw_val", "val"), ("USPTO_50k_test", "test"),
                                        ("data_valid", "val"), ("reactions", None), ("attest", None)])
def test_split_from_file_name(name: str, split: str | None) -> None:
    assert split_of(Path(f"{name}.csv")) == split


# -- oracle, end to end -----------------------------------------------------------------------------------


def one_per_class(suite: RetrosynthesisSuite) -> list[str]:
    """Ten tasks, one per class, alternating splits: a fast end-to-end subset."""
    chosen = {}
    for t in suite.tasks():
        if t.meta["class"] not in chosen and t.split == ("test" if t.meta["class"] % 2 else "train"):
            chosen[t.meta["class"]] = t.id
    return sorted(chosen.values())


@needs_bwrap
def test_oracle_scores_100_on_a_subset_of_every_class(suite: RetrosynthesisSuite, tmp_path: Path) -> None:
    ids = one_per_class(suite)
    summary = run(RunConfig(suite="retrosynthesis", student="oracle", out=tmp_path, task_ids=ids, concurrency=2))
    assert summary.pass_at_1 == 100.0 and summary.n_tasks == 10 and summary.exceptions == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert {results[f"pass_at_1_class_{c}"] for c in range(1, 11)} == {100.0}
    result = json.loads((tmp_path / "trials" / ids[0] / "result.json").read_text())
    assert result["details"]["rdkit_version"] == RDKIT_VERSION and result["details"]["exact"] is True


@needs_bwrap
@pytest.mark.parametrize("split,n", [("train", 80), ("test", 40)])
def test_oracle_scores_100_on_both_splits(split: str, n: int, tmp_path: Path) -> None:
    summary = run(RunConfig(suite="retrosynthesis", student="oracle", split=split, out=tmp_path, concurrency=2))
    assert (summary.pass_at_1, summary.n_tasks, summary.exceptions) == (100.0, n, 0)
