"""vrs_helpers.evaluate.tables.scores: score tables from files and run folders, and every bad input named."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vrs_helpers.evaluate.tables.scores import InputError, load_scores, validate


def _table(n_sys=2, n_seed=3, n_item=20, seed=0):
    rng = np.random.default_rng(seed)
    rows = [{"system": f"S{s}", "seed": str(r), "item": f"i{i}", "score": float(rng.normal())}
            for s in range(n_sys) for r in range(n_seed) for i in range(n_item)]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet", ".jsonl", ".csv.gz"])
def test_file_formats_round_trip(tmp_path, suffix):
    df = _table()
    path = tmp_path / f"scores{suffix}"
    if suffix == ".parquet":
        df.to_parquet(path)
    elif suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_csv(path, sep="\t" if suffix == ".tsv" else ",", index=False)
    got = load_scores(path)
    got["seed"] = got["seed"].astype(str)
    pd.testing.assert_frame_equal(got[df.columns], df, check_dtype=False)


def _write_runs(tmp_path, df, plain=False):
    for (s, r), part in df.groupby(["system", "seed"]):
        folder = tmp_path / "runs" / s / f"seed={r}"
        folder.mkdir(parents=True)
        if plain:
            (folder / "scores.txt").write_text("\n".join(repr(v) for v in part["score"]) + "\n")
        else:
            part[["item", "score"]].to_csv(folder / "scores.tsv", sep="\t", index=False)


def _fields_as_text(got, fields=("system", "seed")):
    """The pattern fields of a loaded run folder: categorical text labels (one per file); as plain text."""
    for f in fields:
        assert isinstance(got[f].dtype, pd.CategoricalDtype)
        assert all(isinstance(c, str) for c in got[f].cat.categories)
    return got.astype({f: str for f in fields})


def test_run_folder_of_tables(tmp_path):
    df = _table()
    _write_runs(tmp_path, df)
    got = _fields_as_text(load_scores(str(tmp_path / "runs/{system}/seed={seed}/scores.tsv")))
    assert list(got.columns) == ["system", "seed", "item", "score"]
    key = ["system", "seed", "item"]
    pd.testing.assert_frame_equal(got.sort_values(key).reset_index(drop=True),
                                  df.sort_values(key).reset_index(drop=True), check_dtype=False)


def test_run_folder_of_plain_score_files(tmp_path):
    df = _table(n_item=7)
    _write_runs(tmp_path, df, plain=True)
    got = load_scores(str(tmp_path / "runs/{system}/seed={seed}/scores.txt"))
    assert list(got.columns) == ["system", "seed", "item", "score"]
    first = got[(got["system"] == "S1") & (got["seed"] == "2")]
    assert first["item"].tolist() == list(range(1, 8))   # item = line number
    expect = df[(df["system"] == "S1") & (df["seed"] == "2")]["score"].to_numpy()
    assert np.array_equal(first["score"].to_numpy(), expect)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_sys=st.integers(1, 3), n_seed=st.integers(1, 3), n_item=st.integers(1, 6), seed=st.integers(0, 10**6))
def test_run_folders_round_trip(tmp_path_factory, n_sys, n_seed, n_item, seed):
    tmp = tmp_path_factory.mktemp("runs")
    df = _table(n_sys, n_seed, n_item, seed)
    _write_runs(tmp, df)
    got = _fields_as_text(load_scores(str(tmp / "runs/{system}/seed={seed}/scores.tsv")))
    key = ["system", "seed", "item"]
    pd.testing.assert_frame_equal(got.sort_values(key).reset_index(drop=True)[df.columns],
                                  df.sort_values(key).reset_index(drop=True), check_dtype=False)


def test_pattern_errors(tmp_path):
    with pytest.raises(InputError, match="matches no file.*nearest existing folder"):
        load_scores(str(tmp_path / "nothing/{system}/x.tsv"))
    df = _table(n_sys=2, n_seed=1)
    _write_runs(tmp_path, df)
    odd = tmp_path / "runs" / "S1" / "seed=0" / "scores.tsv"
    odd.write_text("item\tbleu\ni0\t0.5\n")
    with pytest.raises(InputError, match="disagree on their columns.*bleu"):
        load_scores(str(tmp_path / "runs/{system}/seed={seed}/scores.tsv"))
    clash = tmp_path / "c" / "S0"
    clash.mkdir(parents=True)
    (clash / "s.csv").write_text("system,item,score\nA,1,0.5\n")
    with pytest.raises(InputError, match="also fields of the pattern"):
        load_scores(str(tmp_path / "c/{system}/s.csv"))
    bad = tmp_path / "p" / "S0"
    bad.mkdir(parents=True)
    (bad / "s.txt").write_text("0.5\nnot-a-number\n")
    with pytest.raises(InputError, match="line 2.*not a number"):
        load_scores(str(tmp_path / "p/{system}/s.txt"))
    with pytest.raises(InputError, match="No file"):
        load_scores(tmp_path / "missing.csv")


def test_validate_ok_and_summary():
    df = _table()
    clean, info = validate(df, response="score", system="system", item="item", replications=["seed"])
    assert info.n_rows == 120 and info.n_items == 20 and info.n_systems == 2
    assert info.runs_per_system == {"S0": 3, "S1": 3} and info.replications == {"seed": 3}
    assert "120 rows" in repr(info) and len(info.to_frame())


def test_validate_errors():
    df = _table()
    kw = dict(response="score", system="system", item="item", replications=["seed"])
    with pytest.raises(InputError, match="'scores' is not in the data.*Did you mean 'score'"):
        validate(df, **{**kw, "response": "scores"})
    with pytest.raises(InputError, match="two roles"):
        validate(df, **{**kw, "replications": ["item"]})
    with pytest.raises(InputError, match="must be numeric.*row 4: 'n/a'"):
        validate(df.assign(score=df["score"].astype(object).where(df.index != 3, "n/a")), **kw)
    with pytest.raises(InputError, match="2 missing value.*--dropna"):
        validate(df.assign(score=df["score"].where(~df.index.isin([0, 5]))), **kw)
    clean, info = validate(df.assign(score=df["score"].where(~df.index.isin([0, 5]))), dropna=True, **kw)
    assert info.n_dropped_nan == 2 and len(clean) == 118
    with pytest.raises(InputError, match="single level within every system.*not estimable"):
        validate(df[df["seed"] == "0"], **kw)
    with pytest.raises(InputError, match="not scored on the same items.*S1 lacks 1 \\(e.g. i3\\)"):
        validate(df[~((df["system"] == "S1") & (df["item"] == "i3"))], **kw)
    with pytest.raises(InputError, match="repeat a \\(system, run, item\\).*replication column"):
        validate(df, response="score", system="system", item="item")
    with pytest.raises(InputError, match="property 'const' has a single value"):
        validate(df.assign(const=1.0), properties=["const"], **kw)
    # numbers given as text are accepted
    clean, _ = validate(df.assign(score=df["score"].map(repr)), **kw)
    assert clean["score"].dtype == float


def test_semicolon_and_tab_separated_csv_are_read_with_their_delimiter(tmp_path):
    """A spreadsheet export named .csv but separated by semicolons (decimal commas) or tabs: the delimiter of the
    header is used, and recorded; the numbers are numbers."""
    df = _table(n_sys=2, n_seed=2, n_item=3)
    semi = tmp_path / "semi.csv"
    semi.write_text("system;seed;item;score\n" + "".join(
        f"{r.system};{r.seed};{r.item};{r.score:.6f}".replace(".", ",") + "\n" for r in df.itertuples()))
    got = load_scores(semi)
    assert list(got.columns) == ["system", "seed", "item", "score"] and got.attrs["delimiter"] == ";"
    np.testing.assert_allclose(got["score"], df["score"].round(6), atol=1e-12)
    tab = tmp_path / "tab.csv"
    df.to_csv(tab, sep="\t", index=False)
    got = load_scores(tab)
    assert list(got.columns) == list(df.columns) and got.attrs["delimiter"] == "\t" and len(got) == len(df)
    _, info = validate(got, response="score", system="system", item="item", replications=["seed"])
    assert "read as tab-separated" in info.design   # the report's caption says how the file was read
    both = tmp_path / "both.csv"
    both.write_text("system;seed\titem\nA;1\t2\n")
    with pytest.raises(InputError, match="several possible delimiters.*semicolon.*tab"):
        load_scores(both)


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_header_only_file_says_no_data_rows(tmp_path, suffix):
    path = tmp_path / f"empty{suffix}"
    path.write_text({".csv": "system,seed,item,score\n", ".tsv": "system\tseed\titem\tscore\n", ".jsonl": "\n"}[suffix])
    with pytest.raises(InputError, match="no data rows"):
        load_scores(path)


def test_malformed_json_lines_name_the_file_and_line(tmp_path):
    path = tmp_path / "scores.jsonl"
    path.write_text('{"system": "A", "item": 1, "score": 0.5}\n\n{"system": "A", "item": 2, "score": }\n')
    with pytest.raises(InputError, match=r"scores\.jsonl, line 3: not valid JSON.*one JSON object per line"):
        load_scores(path)
    path.write_text('{"system": "A", "item": 1, "score": 0.5}\n[1, 2]\n')
    with pytest.raises(InputError, match=r"line 2: a JSON list, not an object"):
        load_scores(path)
    path.write_text('{"system": "A", "item": 1, "score": 0.5}\n{"system": "A", "item": 2, "score": 0.25}\n')
    assert load_scores(path)["score"].tolist() == [0.5, 0.25]


def test_repeats_are_independent_draws_per_item_within_a_run():
    """A (system, run, item) may have several rows, one per repeat (Inspect epochs); a repeat given twice is still
    a duplicate; the design says how many repeats each item has."""
    df = pd.concat([_table().assign(epoch=str(e)) for e in range(3)], ignore_index=True)
    kw = dict(response="score", system="system", item="item", replications=["seed"])
    clean, info = validate(df, repeats=["epoch"], **kw)
    assert info.n_rows == 360 and "repeats per item 3 over epoch" in info.design and "epoch" in clean.columns
    with pytest.raises(InputError, match="repeat a \\(system, run, item\\)"):
        validate(df, **kw)   # the repeats not named: duplicates
    with pytest.raises(InputError, match="repeat a \\(system, run, repeat, item\\)"):
        validate(pd.concat([df, df.head(1)]), repeats=["epoch"], **kw)
    with pytest.raises(InputError, match="two roles"):
        validate(df, repeats=["seed"], **kw)


@pytest.mark.parametrize("change, phrase", [
    (lambda d: d.assign(score=0.25), "is constant \\(every score is 0.25\\)"),
    (lambda d: d.assign(score=d["score"] * 1e300), "squares overflow.*Rescale"),
    (lambda d: d[d["item"] == "i0"], "single item \\(item = 'i0'\\)"),
    (lambda d: d.assign(score=np.nan), "missing value"),
])
def test_data_no_model_can_be_fitted_to_are_named(change, phrase):
    kw = dict(response="score", system="system", item="item", replications=["seed"])
    with pytest.raises(InputError, match=phrase):
        validate(change(_table()), **kw)
    if "missing" in phrase:
        with pytest.raises(InputError, match="No data rows left after dropping"):
            validate(change(_table()), dropna=True, **kw)


@settings(max_examples=25, deadline=None)
@given(labels=st.sampled_from(["int", "text", "categorical int", "categorical text"]), seed=st.integers(0, 10**6))
def test_validated_keys_are_text_labels_coded_once(labels, seed):
    """validate returns the system, item and run columns as categoricals of text labels whose values are the text
    of the input's (so every later grouping reads codes); the rows and scores are those given."""
    df = _table(n_sys=2, n_seed=3, n_item=5, seed=seed)
    df["item"] = df["item"].str[1:].astype(int)   # 0..4
    if labels == "text":
        df["item"] = df["item"].astype(str)
    elif labels.startswith("categorical"):
        df["item"] = df["item"].astype(str if labels.endswith("text") else int).astype("category")
    out, _ = validate(df, response="score", system="system", item="item", replications=["seed"])
    for c in ("system", "item", "seed"):
        assert isinstance(out[c].dtype, pd.CategoricalDtype)
        assert all(isinstance(v, str) for v in out[c].cat.categories)
        assert out[c].astype(str).tolist() == df[c].astype(str).tolist()
    assert np.array_equal(out["score"].to_numpy(), df["score"].to_numpy())


# ------------------------------------------------------------------ issue 37: missing keys, near-duplicate labels

KW = dict(response="score", system="system", item="item", replications=["seed"])


@pytest.mark.parametrize("column, role", [("system", "system"), ("item", "item"), ("seed", "replication"),
                                          ("length", "property")])
@pytest.mark.parametrize("empty", [np.nan, None, "", "  "])
def test_an_empty_key_cell_names_its_column_and_rows(column, role, empty):
    """An empty (or blank) system, item, run or property cell is an error naming the column and the 1-based data
    rows, before anything else; --dropna drops those rows (and says how many)."""
    df = _table().assign(length=lambda d: d["item"].str[1:].astype(int) % 4)
    if empty in ("", "  ") and column == "length":
        empty = np.nan   # a numeric property has no blank text
    df[column] = df[column].astype(object)
    df.loc[[4, 9, 70], column] = empty   # data rows 5, 10 and 71
    kw = {**KW, "properties": ["length"]}
    with pytest.raises(InputError, match=f"the {role} column '{column}' in 3 rows \\(data rows 5, 10, 71\\).*"
                                         "--dropna"):
        validate(df, **kw)
    clean, info = validate(df, dropna=True, **kw)
    assert len(clean) == 117 and info.n_dropped_keys == 3 and "3 rows with a missing key dropped" in info.design
    assert "" not in set(clean[column].astype(str).str.strip())


def test_empty_cells_in_several_key_columns_are_named_together():
    df = _table().astype({"system": object, "item": object})
    df.loc[0, "system"] = np.nan
    df.loc[[1, 2], "item"] = np.nan
    with pytest.raises(InputError, match="system column 'system' in 1 row \\(data row 1\\); the item column 'item' "
                                         "in 2 rows \\(data rows 2, 3\\)"):
        validate(df, **KW)
    _, info = validate(df, dropna=True, **KW)
    assert info.n_dropped_keys == 3


def _variant(label: str, how: int) -> str:
    """A label written differently but naming the same thing: case, surrounding spaces, doubled inner blanks, or
    full-width letters (NFKC maps them back)."""
    if how == 0:
        return label.swapcase()
    if how == 1:
        return f" {label}  "
    if how == 2:
        return label.replace(" ", "  ") if " " in label else label.upper() + "\t"
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in label)   # full-width forms


_words = st.text(alphabet="abcdefgxyz0123-", min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(labels=st.lists(_words, min_size=1, max_size=6, unique=True), pick=st.integers(0, 5),
       how=st.integers(0, 3), joined=st.booleans())
def test_near_duplicates_find_a_label_written_twice(labels, pick, how, joined):
    from vrs_helpers.evaluate.tables.scores import near_duplicates

    labels = [f"{a} {a}" if joined else a for a in labels]   # some labels with an inner blank
    assert near_duplicates(labels) == []   # distinct lowercase labels without spaces around them: no group
    label = labels[pick % len(labels)]
    twin = _variant(label, how)
    if twin == label:   # digits and '-' have no case
        return
    groups = near_duplicates(labels + [twin])
    assert groups == [sorted([label, twin])]


def test_near_duplicate_labels_are_refused_in_system_and_run_columns():
    df = _table()
    df.loc[df["system"] == "S1", "system"] = np.where(df.loc[df["system"] == "S1", "seed"] == "0", "s1 ", "S1")
    with pytest.raises(InputError, match="system column 'system'.*'S1' and 's1 '.*different systems"):
        validate(df, **KW)
    df = _table()
    df.loc[(df["system"] == "S0") & (df["seed"] == "2"), "seed"] = " 2"
    df.loc[(df["system"] == "S1") & (df["seed"] == "1"), "seed"] = "1 "   # ' 2' and '2' both occur
    with pytest.raises(InputError, match="replication column 'seed'.*' 2' and '2'.*'1' and '1 '.*different runs"):
        validate(df, **KW)


def test_items_differing_in_case_are_items_but_not_in_spaces():
    df = _table()
    df.loc[df["item"] == "i1", "item"] = "I0"   # beside 'i0', in every system and run
    clean, info = validate(df, **KW)   # items that differ in case are different items (words, sentences)
    assert info.n_items == 20 and {"i0", "I0"} <= set(clean["item"].cat.categories)
    df = _table()
    df.loc[(df["system"] == "S1") & (df["item"] == "i3"), "item"] = "i3 "
    with pytest.raises(InputError, match="item column 'item'.*'i3' and 'i3 '"):
        validate(df, **KW)


def test_empty_keys_and_near_duplicates_on_a_dask_table():
    """The same rules on a dask DataFrame (vrs analyze --dask): the same message as in memory (rows 3 and 8 of the
    frame are data rows 4 and 9 below a header), --dropna, and the near-duplicates among the labels of its cells."""
    dd = pytest.importorskip("dask.dataframe")
    df = _table().astype({"item": object})
    df.loc[[3, 8], "item"] = None
    with pytest.raises(InputError, match="the item column 'item' in 2 rows \\(data rows 4, 9\\)\\. Every row"):
        validate(dd.from_pandas(df, npartitions=3), **KW)
    clean, info = validate(dd.from_pandas(df, npartitions=3), dropna=True, **KW)
    assert info.n_dropped_keys == 2 and info.n_rows == 118 and len(clean.compute()) == 118
    df = _table()
    df.loc[(df["system"] == "S1") & (df["seed"] == "0"), "system"] = "s1"
    with pytest.raises(InputError, match="'S1' and 's1'"):
        validate(dd.from_pandas(df, npartitions=3), **KW)


def test_an_empty_key_cell_in_a_run_folder_names_its_file(tmp_path):
    """In a table read from a run-folder pattern the rows are named by file and data row within it."""
    df = _table().astype({"item": object})
    df.loc[(df["system"] == "S1") & (df["seed"] == "2") & (df["item"] == "i3"), "item"] = None   # data row 4
    _write_runs(tmp_path, df)
    data = load_scores(str(tmp_path / "runs/{system}/seed={seed}/scores.tsv"))
    want = str(tmp_path / "runs" / "S1" / "seed=2" / "scores.tsv")
    with pytest.raises(InputError, match=f"item column 'item' in 1 row \\({want} data row 4\\)"):
        validate(data, **KW)
