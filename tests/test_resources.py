"""vrs_helpers.resources: workbooks and book tables found by name, copies that never overwrite."""

from pathlib import Path

import pytest

from vrs_helpers import resources
from vrs_helpers.errors import VRSError

ROOT = Path(__file__).resolve().parent.parent


def test_checkout_folders_win_in_a_checkout():
    assert resources.workbooks_dir() == ROOT / "notebooks"
    assert resources.book_dir() == ROOT / "data" / "book"
    assert [p.name for p in resources.workbooks()] == sorted(p.name for p in (ROOT / "notebooks").glob("0*.ipynb"))


@pytest.mark.parametrize("name", ["03", "03_krippendorff_paradoxes", "03_krippendorff_paradoxes.ipynb",
                                  str(ROOT / "notebooks" / "03_krippendorff_paradoxes.ipynb")])
def test_find_workbook_by_number_name_or_path(name):
    assert resources.find_workbook(name).resolve() == (ROOT / "notebooks" / "03_krippendorff_paradoxes.ipynb")


@pytest.mark.parametrize("name", ["99", "krippendorff", "no/such/03.ipynb"])
def test_unknown_workbook_lists_the_known_ones(name):
    with pytest.raises(VRSError, match="07_your_evaluation"):
        resources.find_workbook(name)


def test_copy_refuses_to_overwrite_and_copies_nothing(tmp_path):
    dest = tmp_path / "wb"
    written = resources.copy_workbooks(dest)
    assert len(written) == len(resources.workbooks()) + 1  # + the scorecard baseline
    victim = dest / "05_glrt_interactions.ipynb"
    victim.write_text("mine")
    (dest / "01_nli_dataset_bias.ipynb").unlink()
    with pytest.raises(VRSError, match="nothing was copied"):
        resources.copy_workbooks(dest)
    assert victim.read_text() == "mine" and not (dest / "01_nli_dataset_bias.ipynb").exists()
    resources.copy_workbooks(dest, force=True)
    assert victim.read_bytes() == (ROOT / "notebooks" / victim.name).read_bytes()


def test_copy_into_a_file_is_an_error(tmp_path):
    f = tmp_path / "x"
    f.write_text("")
    with pytest.raises(VRSError, match="not a folder"):
        resources.copy_workbooks(f)
