"""Registry of the real data the book uses: pinned upstream URL + SHA256, fetched and checked.

Every file is identified by its path relative to a *mirror root* laid out like the upstream
repositories (``empirical_methods/...`` for StatNLP/empirical_methods, ``hans_berts_of_a_feather/...``
for tommccoy1/hans). Files are found, in this order:

1. ``VRS_DATA_DIR`` (environment variable): a local mirror with the same relative paths. Nothing is
   downloaded; a missing file is an error that says so.
2. The user cache (``VRS_CACHE_DIR`` or the platform cache dir, via :mod:`pooch`): downloaded on first
   use from the pinned upstream URL.

Every file is SHA256-checked before it is read; a mismatch refuses to load.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ..errors import VRSError

EMPIRICAL_METHODS_COMMIT = "ddcaccd35850f9097cbe4327c8e99a3dd507acb9"
HANS_COMMIT = "7299f6f657089ce06a0f98e7e81f8d0f5b7741ce"

_EM_URL = f"https://raw.githubusercontent.com/StatNLP/empirical_methods/{EMPIRICAL_METHODS_COMMIT}/"
_HANS_URL = f"https://raw.githubusercontent.com/tommccoy1/hans/{HANS_COMMIT}/"

ENV_DATA_DIR = "VRS_DATA_DIR"
ENV_CACHE_DIR = "VRS_CACHE_DIR"


class DataError(VRSError, RuntimeError):
    """A registered data file is unknown, missing, corrupted or unreadable."""


@dataclass(frozen=True)
class DataFile:
    """One registered file: where it lives upstream, its hash, licence and use in the book."""

    name: str
    path: str  # relative path in the mirror (and in ../shared/data)
    upstream: str  # raw URL at the pinned commit
    sha256: str
    licence: str
    used_for: str
    reader: str  # rds | hans_tsv | hans_csv | tsv_noheader | feather | text
    description: str = ""
    options: dict = field(default_factory=dict)

    @property
    def loadable(self) -> bool:
        return self.reader != "text"


def _em(name, rel, sha, used_for, reader="rds", description=""):
    return DataFile(name, "empirical_methods/" + rel, _EM_URL + rel, sha, "Apache-2.0", used_for, reader,
                    description)


def _hans(name, rel, upstream_rel, sha, used_for, reader, description=""):
    return DataFile(name, "hans_berts_of_a_feather/" + rel, _HANS_URL + upstream_rel, sha, "MIT", used_for,
                    reader, description)


_FILES = [
    # --- machine translation (chapters 3 and 4)
    _em("mt_annotation", "machine_translation_example/data/data_annotation.rds",
        "70f4fa0c33bc29fb95b9aaa6b5b172f92618fd5858d2b8a22e2c4152e563141c",
        "Tables 3.1, 3.2; Figures 3.2, 3.3",
        description="5 sentences x 10 raters x 3 occasions x 2 modes; score = share of marked/edited words"),
    _em("mt_grid_partial", "machine_translation_example/data/data_hyperparameter-marking_partial.rds",
        "f40012836d4f3f07b0e247106e9a1690782f8883039bd8d8e6756b79b27d1d2f", "Tables 3.8, 3.9",
        description="TER per test sentence, partial meta-parameter grid of fine-tuned NMT models"),
    _em("mt_grid_full", "machine_translation_example/data/data_hyperparameter-marking_full.rds",
        "78e29c3722ce4877b1bfe3a84f5a11049e04e2e93a8c29c2d590599531daab6d", "Tables 3.10, 3.11; Figure 3.5",
        description="TER per test sentence, full meta-parameter grid"),
    _em("mt_ter", "machine_translation_example/data/data_ter.rds",
        "b642b1c152353b6e1a5219f6e6be895e9430eb98cc5d759c17cdfb0258e26093", "Tables 4.1-4.3; Figures 4.4-4.7",
        description="TER of Baseline / Marking / PostEdit (3 replications) on 1,041 sentences"),
    # --- liver SOFA (chapters 2 and 3)
    _em("liver_grid", "liver_sofa_example/data/reliability_gridsearch_results.rds",
        "aabb62cd9598041eb7f99507e69d64f120f8c1b7bfae65a3b46e9abd2a9e9cc7", "Table 3.4; Figure 3.4",
        description="test accuracy of 12,150 MLP configurations (7 meta-parameters)"),
    _em("liver_sofa_test", "liver_sofa_example/data/test_set_with_sofa_predictions.rds",
        "8d5b247cfa1f459537131677047613dd3f54f879431234a345f51fe6659d4732",
        "Section 2.4.3; Table 2.6; Figures 2.9, 2.10, 2.18, 2.19",
        description="45 clinical measurements, liver SOFA target, teacher predictions with/without bilirubin"),
    _em("liver_sofa_ablation", "liver_sofa_example/data/ablation_set_with_sofa_predictions.rds",
        "a15907469da7ae42afbef390e8baf4fae89c5d312906b93f7861e793fd8cbc86", "Section 2.4.3",
        description="as liver_sofa_test, with bilirubin zeroed"),
    _em("liver_test_std", "liver_sofa_example/data/dataset-test_std.rds",
        "56978406f04c9e426158fe7ecc026f41360c0c03f7cc9597a3be36cd98027d38", "Section 2.4.3"),
    _em("liver_test_nostd", "liver_sofa_example/data/dataset-test_nostd.rds",
        "ab350d9b107b8ec3459e84783f57afe2f932c345a9aa972d573e645d084a3094", "Section 2.4.3"),
    _em("liver_test_std_nocirc", "liver_sofa_example/data/dataset-test_std_nocirc.rds",
        "e5859c64e1d1d22d690594689894e3aff765d08f13bf4f646e004dd65b5839da", "Section 2.4.3"),
    _em("liver_ablation_zerobili_std", "liver_sofa_example/data/dataset-ablation_zeroBili_std.rds",
        "5bcedd6145bf54062a71febf97becfb622d8a7b0970cecfb296fbbddcc3d2064", "Section 2.4.3"),
    _em("liver_pred_test_circ", "liver_sofa_example/predictions/test_circular_model.rds",
        "db4fc6061022d72fda514f984ca9adc7b71cb427b08c49492b56f187674da9eb", "Section 2.4.3", reader="prediction"),
    _em("liver_pred_test_nocirc", "liver_sofa_example/predictions/test_non_circular_model.rds",
        "7b43d0b960a95517cf9e658e1d6858d155266b51b9c295d61a9941a33ba00431", "Section 2.4.3", reader="prediction"),
    _em("liver_pred_ablation_circ", "liver_sofa_example/predictions/ablation_circular_model.rds",
        "5755e21a3c6f3ec2ef1b70ba445a088f236ade763d4602510fe74086deea0ee8", "Section 2.4.3", reader="prediction"),
    _em("liver_model_specs", "liver_sofa_example/train-pytorch/model_specifications.feather",
        "3144be4cb9ebe632e7c91f1e8154baa221e50cd23a86c3093fc1d4bb77a258d7", "Section 2.4.3", reader="feather"),
    # --- kidney SOFA (chapter 2)
    _em("kidney_sofa_test", "kidney_sofa_example/data/test_set_with_sofa_predictions.rds",
        "c27fe266f0503f2e95a1d9007e7b6aaa27d17614859bcd72c6f77ee5acfc810c",
        "Section 2.4.3; Table 2.7; Figures 2.11-2.14, 2.20, 2.21",
        description="the teacher columns look swapped or mislabelled (workbook 02, kidney teachers): sofa_nocirc, "
                    "'trained without the circular features', is explained by crea + urine24 alone at D2 89.8 % (k = "
                    "10), more than sofa_circ (86.5 %), and has the book's top-5 correlated features in its order "
                    "and an accuracy of 92.56 % (the book, for the teacher with all features: 92.2 %; sofa_circ "
                    "90.56 %); predictions/ablation_circular_model.rds is byte-identical to test_circular_model.rds"),
    _em("kidney_test_std", "kidney_sofa_example/data/dataset-test_std.rds",
        "db73c6cd4d32c3be9b861161cd44ccc915997547eac92cae9828f07085eafeb4", "Section 2.4.3"),
    _em("kidney_test_nostd", "kidney_sofa_example/data/dataset-test_nostd.rds",
        "06959c7530d522f9cbaeebefbfb66a5e8832972a22de7a1c75a487bef97dc815", "Section 2.4.3"),
    _em("kidney_test_std_nocirc", "kidney_sofa_example/data/dataset-test_std_nocirc.rds",
        "aff2a394c6d1c64da45952bf575c946df8ddf656d9799db00c861e91b8f917a0", "Section 2.4.3"),
    _em("kidney_ablation_zerocreaurine24_std", "kidney_sofa_example/data/dataset-ablation_zeroCreaUrine24_std.rds",
        "db73c6cd4d32c3be9b861161cd44ccc915997547eac92cae9828f07085eafeb4", "Section 2.4.3",
        description="upstream file is byte-identical to dataset-test_std.rds"),
    _em("kidney_pred_test_circ", "kidney_sofa_example/predictions/test_circular_model.rds",
        "c5df53ca2286b1812445127dbf15d5ba65aec0d8dc875f0e4cc9e2b361915e94", "Section 2.4.3", reader="prediction"),
    _em("kidney_pred_test_nocirc", "kidney_sofa_example/predictions/test_non_circular_model.rds",
        "ae621355f18c9641f8af632225cafc425e7133e7927a112df0615ff240d247a6", "Section 2.4.3", reader="prediction"),
    _em("kidney_pred_ablation_circ", "kidney_sofa_example/predictions/ablation_circular_model.rds",
        "c5df53ca2286b1812445127dbf15d5ba65aec0d8dc875f0e4cc9e2b361915e94", "Section 2.4.3", reader="prediction",
        description="upstream file is byte-identical to test_circular_model.rds"),
    _em("kidney_model_specs", "kidney_sofa_example/train-pytorch/model_specifications.feather",
        "28fddee65cc69ae1becb0ea086b6e14de73afb3282e20a8f82dec0a60d6b86db", "Section 2.4.3", reader="feather"),
    # --- patent prior-art retrieval (chapter 2)
    _em("ir_test", "ir_example/data/ir_testset.rds",
        "1f28cd1dbf5cb31f0b9ee13fbeb2861e02d42b87811777bb7f3c4a28e8ab83a1",
        "Section 2.4.3; Tables 2.3-2.5; Figures 2.7, 2.8, 2.15-2.17",
        description="patent prior-art retrieval: relevance 0-3, neural and tf-idf scores, citation features"),
    _em("empirical_methods_licence", "LICENSE.txt",
        "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30", "licence of empirical_methods/",
        reader="text"),
    # --- BERTs of a feather / HANS (McCoy et al.)
    _hans("mnli_dev_bert_correct", "mnli_development_set_number_of_correct_responses.txt",
          "berts_of_a_feather/mnli_development_set_number_of_correct_responses.txt",
          "d4f852835e0a2b57dae7da09c23a1c2031bebe3ffea900642d91833677e18051",
          "Section 2.4.1 (in-domain NLI data); per-item variability of 100 BERT runs", reader="hans_tsv",
          description="MNLI matched dev (9,815 pairs) with the number of 100 BERT runs that got each right"),
    _hans("bert_runs_accuracy", "berts_of_a_feather_accuracies_by_run.csv",
          "berts_of_a_feather/berts_of_a_feather_accuracies_by_run.csv",
          "307a98e15c1e85e81694887f85b99fdc5b6de2b0e3108b989ac4d0ae0fd4a40d",
          "seed-variance reliability analyses beyond the book", reader="hans_csv",
          description="accuracy of 100 BERT fine-tuning runs on MNLI dev and each HANS heuristic/subcase"),
    _hans("mnli_contradicting", "mnli_contradicting_examples.tsv", "mnli_contradicting_examples",
          "6bb2dd7cb1f9640e53f1c75b76fef32ed392c4643f6c698292d735cc9ae4e940",
          "Section 2.4.1 (counter-examples)", reader="tsv_noheader",
          description="MNLI pairs whose hypothesis is a subsequence of the premise, labelled contradiction"),
    _hans("hans_licence", "LICENSE.md", "LICENSE.md",
          "ece363d4ea0a01bc3dbe0b7fba5ff6c8d81d5866fea8948a1f353642cdb750fa", "licence of hans_berts_of_a_feather/",
          reader="text"),
]

REGISTRY: dict[str, DataFile] = {f.name: f for f in _FILES}


def names(include_text: bool = False) -> list[str]:
    """Names of the registered datasets (licence texts only with ``include_text=True``)."""
    return [n for n, f in REGISTRY.items() if include_text or f.loadable]


def info(name: str) -> DataFile:
    """The registry entry for ``name``; unknown names raise with the list of known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, REGISTRY, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise DataError(f"Unknown dataset {name!r}.{hint} Known datasets: {', '.join(names())}.") from None


def to_frame() -> pd.DataFrame:
    """The registry as a table: name, path, licence, book sections, upstream URL, sha256."""
    return pd.DataFrame([
        {"name": f.name, "path": f.path, "licence": f.licence, "used_for": f.used_for,
         "upstream": f.upstream, "sha256": f.sha256} for f in _FILES
    ])


def sha256_of(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def data_dir() -> Path | None:
    """The local mirror named by ``VRS_DATA_DIR``, or None when the variable is unset or empty."""
    value = os.environ.get(ENV_DATA_DIR, "").strip()
    return Path(value).expanduser() if value else None


def cache_dir() -> Path:
    value = os.environ.get(ENV_CACHE_DIR, "").strip()
    if value:
        return Path(value).expanduser()
    import pooch

    return Path(pooch.os_cache("vrs-workbooks"))


def _check_hash(entry: DataFile, path: Path) -> None:
    actual = sha256_of(path)
    if actual != entry.sha256:
        raise DataError(
            f"Refusing to load {entry.name!r}: the file {path} has SHA256 {actual}, but the registry pins "
            f"{entry.sha256} (upstream {entry.upstream}). The file is corrupted or a different version; "
            f"delete it and fetch it again (`vrs data fetch {entry.name}`), or fix the local mirror."
        )


def path(name: str, download: bool = True) -> Path:
    """Local path of a registered file, hash-checked.

    With ``VRS_DATA_DIR`` set, the file must exist there (nothing is downloaded). Otherwise it is taken from
    the user cache, and downloaded from the pinned upstream URL when ``download`` is true.
    """
    entry = info(name)
    mirror = data_dir()
    if mirror is not None:
        local = mirror / entry.path
        if not local.is_file():
            raise DataError(
                f"Dataset {entry.name!r} is not in the local mirror: {local} does not exist. "
                f"{ENV_DATA_DIR}={mirror} must be laid out like the upstream repositories "
                f"(relative path {entry.path}); download it from {entry.upstream} or unset {ENV_DATA_DIR} "
                f"to use the download cache."
            )
        _check_hash(entry, local)
        return local
    cached = cache_dir() / entry.path
    if cached.is_file():
        _check_hash(entry, cached)
        return cached
    if not download:
        raise DataError(
            f"Dataset {entry.name!r} is not in the cache ({cached}) and downloading is off. Run "
            f"`vrs data fetch {entry.name}` with internet access, or set {ENV_DATA_DIR} to a local copy of the "
            f"data (relative path {entry.path}; upstream {entry.upstream})."
        )
    import pooch

    try:
        fetched = pooch.retrieve(entry.upstream, known_hash="sha256:" + entry.sha256,
                                 fname=Path(entry.path).name, path=cached.parent, progressbar=False)
    except ValueError as exc:  # pooch raises ValueError on a hash mismatch
        raise DataError(f"Refusing to load {entry.name!r}: the download from {entry.upstream} does not "
                        f"match the pinned SHA256 ({exc}).") from exc
    except Exception as exc:  # network errors of all kinds
        raise DataError(
            f"Could not download dataset {entry.name!r} from {entry.upstream} ({type(exc).__name__}: {exc}). "
            f"Without internet access, set {ENV_DATA_DIR} to a local copy of the data laid out like the "
            f"upstream repositories (relative path {entry.path})."
        ) from exc
    return Path(fetched)


# ----------------------------------------------------------------------------------------------- readers

def _is_text(s: pd.Series) -> bool:
    return s.dtype == object or pd.api.types.is_string_dtype(s.dtype) and not isinstance(s.dtype, pd.CategoricalDtype)


def _tidy(df: pd.DataFrame) -> pd.DataFrame:
    """Numbers stored as text become floats; text with few distinct values becomes categorical."""
    df = df.reset_index(drop=True)
    df.columns = [str(c) for c in df.columns]
    for col in df.columns:
        s = df[col]
        if not _is_text(s) or len(s) == 0:
            continue
        numeric = pd.to_numeric(s, errors="coerce")
        if numeric.notna().sum() == s.notna().sum():
            df[col] = numeric.astype(float)
        elif s.nunique() <= max(50, len(s) // 20):
            df[col] = s.astype("category")
    return df


def _read_rds(p: Path) -> pd.DataFrame:
    import warnings

    import rdata

    with warnings.catch_warnings():  # tibble / data.table classes are read as plain data frames, as intended
        warnings.filterwarnings("ignore", message="Missing constructor for R class", category=UserWarning)
        obj = rdata.read_rds(p, default_encoding="utf-8")
    if isinstance(obj, pd.DataFrame):
        return obj
    if isinstance(obj, dict):  # a list of columns
        return pd.DataFrame({k: np.asarray(v) for k, v in obj.items()})
    return pd.DataFrame(np.asarray(obj))


def _read_hans_tsv(p: Path) -> pd.DataFrame:
    df = pd.read_csv(p, sep="\t", quoting=3, keep_default_na=False, dtype={"premise": str, "hypothesis": str})
    df = df.rename(columns={"number of correct responses (out of 100)": "n_correct"})
    df["gold_label"] = df["gold_label"].astype("category")
    return df.set_index("index", drop=False).rename_axis(None)


def _read_hans_csv(p: Path) -> pd.DataFrame:
    df = pd.read_csv(p, encoding="utf-8-sig")
    # the file ends in summary rows (Minimum, Maximum, ...) and rows of bare commas: keep the runs only
    df = df[df["Run"].astype(str).str.match(r"Run \d+$")].rename(columns={"Run": "run"})
    df["run"] = df["run"].str.replace("Run ", "", regex=False).astype(int)
    df = df.dropna(axis=1, how="all")
    return df.astype({c: float for c in df.columns if c != "run"})


def _read_tsv_noheader(p: Path) -> pd.DataFrame:
    df = pd.read_csv(p, sep="\t", header=None, quoting=3, keep_default_na=False,
                     names=["premise", "hypothesis", "gold_label"], dtype=str)
    df["gold_label"] = df["gold_label"].astype("category")
    return df


_READERS: dict[str, Callable[[Path], pd.DataFrame]] = {
    "rds": _read_rds,
    "hans_tsv": _read_hans_tsv,
    "hans_csv": _read_hans_csv,
    "tsv_noheader": _read_tsv_noheader,
    "feather": pd.read_feather,
    "prediction": lambda p: _read_rds(p).set_axis(["prediction"], axis=1),
}


def load(name: str, download: bool = True) -> pd.DataFrame:
    """Load a registered dataset as a tidy DataFrame (categoricals as categoricals, numbers as numbers).

    >>> df = load("mt_annotation")      # doctest: +SKIP
    """
    entry = info(name)
    if not entry.loadable:
        raise DataError(f"{name!r} is a licence text, not a dataset; its file is at "
                        f"vrs_helpers.book.data.path({name!r}).")
    p = path(name, download=download)
    try:
        df = _READERS[entry.reader](p)
        if entry.options.get("columns"):
            df.columns = entry.options["columns"]
    except Exception as exc:
        raise DataError(f"Could not read dataset {name!r} from {p} ({type(exc).__name__}: {exc}). The hash matched, "
                        f"so the reader for format {entry.reader!r} may need a newer version of its library.") from exc
    return df if entry.reader in ("hans_tsv", "tsv_noheader") else _tidy(df)


@dataclass
class VerifyRow:
    name: str
    path: str
    status: str  # ok | missing | mismatch
    detail: str = ""


def verify(download: bool = False) -> pd.DataFrame:
    """Check every registered file against its pinned SHA256. Returns one row per file with a status."""
    rows = []
    for entry in _FILES:
        try:
            p = path(entry.name, download=download)
            rows.append(VerifyRow(entry.name, entry.path, "ok", str(p)))
        except DataError as exc:
            status = "mismatch" if "Refusing" in str(exc) else "missing"
            rows.append(VerifyRow(entry.name, entry.path, status, str(exc)))
    return pd.DataFrame([r.__dict__ for r in rows])


# ------------------------------------------------------------------------------------ small data we ship

def book_table(name: str) -> dict:
    """A small table typed in from the book (``data/book/<name>.json``, shipped in the package), e.g.
    ``book_table("agreement_3_3_1")``."""
    import json

    from ..resources import book_dir

    folder = book_dir()
    p = folder / f"{name}.json"
    if not p.is_file():
        known = sorted(q.stem for q in folder.glob("*.json"))
        raise DataError(f"No book table {name!r} in {folder}; known: {', '.join(known) or 'none'}.")
    return json.loads(p.read_text(encoding="utf-8"))


def coverage() -> "pd.DataFrame":
    """Every numbered table and figure of book sections 2.4, 3.3 and 4.1-4.3 with its status (``data/book/
    coverage.csv``): reproduced, partly, not reproduced (a finding), not reproducible (data not public),
    definition or illustration (nothing to reproduce), the workbook and a note."""
    import pandas as pd

    from ..resources import book_dir

    return pd.read_csv(book_dir() / "coverage.csv", keep_default_na=False)

