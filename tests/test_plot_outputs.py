"""Charts are new files only: a plot never replaces a file or writes through a symlink (audit s29).

``calibrate --plot`` and ``demo --plots`` used matplotlib's ``savefig`` on the name given:
an existing file was silently replaced and a symlink followed — a ledger named as the
chart became a PNG. Now an existing name is refused before any work (exit 2, nothing
spent, the file byte-identical); ``demo --fresh`` replaces only the demo's own earlier
PNG charts (a regular file starting with PNG's signature, never a symlink).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dpledger import InvalidInput, Ledger, Policy
from dpledger.cli.main import main
from dpledger.planning.clip import calibrate_clip, plot_candidates
from dpledger.sim.demo import DEFAULT_POLICY
from dpledger.sim.plots import PLOT_NAMES

pytest.importorskip("matplotlib")

CLIENTS = "1540"  # the shipped policy's smallest publishable demo


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def a_ledger(tmp_path: Path) -> Path:
    """A real ledger file: what must never become a chart."""
    path = tmp_path / "real.db"
    with Ledger.open(path, Policy.load(DEFAULT_POLICY), mode="create") as ledger:
        ledger.init()
    return path


@pytest.fixture
def held_out(tmp_path: Path) -> Path:
    path = tmp_path / "held_out.csv"
    path.write_text("loss\n" + "\n".join(str(0.01 * i) for i in range(500)) + "\n")
    return path


def _calibrate(held_out: Path, plot: Path) -> int:
    return main(
        ["calibrate", "--held-out", str(held_out), "--epsilon", "1", "--cohort", "2000",
         "--plot", str(plot)]
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["file", "symlink to a ledger", "dangling symlink"])
def test_calibrate_never_replaces_what_its_plot_names(
    kind: str, held_out: Path, a_ledger: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 before the table is computed; the named file and its target unchanged."""
    target = tmp_path / "chart.png"
    if kind == "file":
        target.write_bytes(b"keep me")
    elif kind == "symlink to a ledger":
        target.symlink_to(a_ledger)
    else:
        target.symlink_to(tmp_path / "nowhere.png")
    before = _digest(a_ledger), target.is_symlink()
    kept = target.read_bytes() if kind == "file" else None
    assert _calibrate(held_out, target) == 2
    out, err = capsys.readouterr()
    assert "exists" in err
    assert "never replaces" in err
    assert out == ""  # refused before any work
    assert (_digest(a_ledger), target.is_symlink()) == before
    if kept is not None:
        assert target.read_bytes() == kept
    assert not (tmp_path / "nowhere.png").exists()


def test_calibrate_writes_a_new_chart_in_the_format_its_suffix_names(
    held_out: Path, tmp_path: Path
) -> None:
    assert _calibrate(held_out, tmp_path / "c.png") == 0
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert _calibrate(held_out, tmp_path / "c.svg") == 0
    assert b"<svg" in (tmp_path / "c.svg").read_bytes()[:400]


def test_plot_candidates_refuses_an_existing_name_and_leaves_nothing_on_a_bad_format(
    tmp_path: Path,
) -> None:
    result = calibrate_clip([0.01 * i for i in range(500)], epsilon=1.0, cohort=2000)
    taken = tmp_path / "taken.png"
    taken.write_bytes(b"x")
    with pytest.raises(InvalidInput, match="exists"):
        plot_candidates(result, taken)
    assert taken.read_bytes() == b"x"
    with pytest.raises(InvalidInput, match="cannot write the plot"):
        plot_candidates(result, tmp_path / "chart.nosuchformat")
    assert not (tmp_path / "chart.nosuchformat").exists()  # only what it created, removed


def test_demo_plots_never_write_through_a_symlink_and_refuse_before_spending(
    tmp_path: Path, a_ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plots = tmp_path / "plots"
    plots.mkdir()
    (plots / "error_histogram.png").symlink_to(a_ledger)
    before = _digest(a_ledger)
    db = tmp_path / "demo.db"
    for fresh in ([], ["--fresh"]):  # --fresh replaces PNG charts, never a symlink
        args = ["demo", "--clients", CLIENTS, "--ledger", str(db), "--plots", str(plots)]
        assert main([*args, *fresh, "--quiet"]) == 2
        assert "error_histogram.png exists" in capsys.readouterr().err
        assert not db.exists()  # nothing spent, no ledger
    assert _digest(a_ledger) == before


def test_demo_plots_naming_a_file_is_exit_2_before_the_epoch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was exit 3 "internal error: FileExistsError" after the demo had committed."""
    not_a_dir = tmp_path / "file"
    not_a_dir.write_bytes(b"keep")
    db = tmp_path / "demo.db"
    args = ["demo", "--clients", CLIENTS, "--ledger", str(db), "--plots", str(not_a_dir)]
    assert main([*args, "--quiet"]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert not db.exists()
    assert not_a_dir.read_bytes() == b"keep"


def test_a_second_demo_replaces_its_charts_only_with_fresh(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plots, db = tmp_path / "plots", tmp_path / "demo.db"
    args = ["demo", "--clients", CLIENTS, "--ledger", str(db), "--plots", str(plots), "--quiet"]
    assert main(args) == 0
    first = {name: _digest(plots / name) for name in PLOT_NAMES}
    capsys.readouterr()
    assert main([*args, "--fresh"]) == 0  # the demo's own ledger and PNG charts, replaced
    assert all((plots / name).read_bytes()[:4] == b"\x89PNG" for name in PLOT_NAMES)
    assert set(first) == set(PLOT_NAMES)
    (plots / PLOT_NAMES[0]).write_bytes(b"not a chart")
    capsys.readouterr()
    assert main([*args, "--fresh"]) == 2  # a file that is not a PNG chart: never replaced
    assert (plots / PLOT_NAMES[0]).read_bytes() == b"not a chart"


@pytest.mark.parametrize("parent", ["a file", "a dangling symlink"])
def test_demo_plots_under_something_that_is_not_a_directory_is_exit_2_first(
    parent: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review s29b: ``--plots FILE/sub`` passed the up-front check and failed after the
    epoch had committed (exit 3)."""
    above = tmp_path / "above"
    if parent == "a file":
        above.write_bytes(b"keep")
    else:
        above.symlink_to(tmp_path / "nowhere")
    db = tmp_path / "demo.db"
    args = ["demo", "--clients", CLIENTS, "--ledger", str(db), "--plots", str(above / "sub")]
    assert main([*args, "--quiet"]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert not db.exists()


def test_a_failed_write_is_typed_and_removes_only_the_file_it_created(tmp_path: Path) -> None:
    from dpledger._files import write_new

    def fail(f: object) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(InvalidInput, match="No space left"):
        write_new(tmp_path / "c.png", fail, "--plot")
    assert not (tmp_path / "c.png").exists()

    def swap(f: object) -> None:  # another process renames a file onto the name meanwhile
        (tmp_path / "other").write_bytes(b"theirs")
        (tmp_path / "other").replace(tmp_path / "d.png")
        raise OSError(5, "I/O error")

    with pytest.raises(InvalidInput):
        write_new(tmp_path / "d.png", swap, "--plot")
    assert (tmp_path / "d.png").read_bytes() == b"theirs"  # not ours: left alone


def test_demo_refuses_a_ledger_named_as_one_of_its_charts_before_the_epoch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review s29b: ``--ledger plots/ratio_by_region.png --plots plots`` committed the epoch,
    then met its own ledger as a taken chart name (exit 2 after the spend, no report)."""
    plots = tmp_path / "plots"
    plots.mkdir()
    db = plots / PLOT_NAMES[0]
    args = ["demo", "--clients", CLIENTS, "--ledger", str(db), "--plots", str(plots), "--quiet"]
    assert main(args) == 2
    assert "is the chart" in capsys.readouterr().err
    assert not db.exists()


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_calibrate_refuses_a_chart_named_like_a_ledgers_sqlite_file(
    suffix: str, held_out: Path, a_ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review s29b: ``--plot X-wal`` beside a ledger X was written; X then refused to open."""
    target = a_ledger.with_name(a_ledger.name + suffix)
    assert _calibrate(held_out, target) == 2
    assert "SQLite keeps beside" in capsys.readouterr().err
    assert not target.exists()
    with Ledger.open(a_ledger, Policy.load(DEFAULT_POLICY), mode="read") as ledger:
        assert ledger.entries() == []


@pytest.mark.parametrize("plots", ["same", "same/charts"])
def test_demo_refuses_plots_at_or_under_its_ledger_before_the_epoch(
    plots: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review s30: ``--ledger same --plots same`` committed the epoch, then could not make
    the directory (the ledger file stood there): exit 2 after the spend, no values shown."""
    db = tmp_path / "same"
    args = ["demo", "--clients", CLIENTS, "--ledger", str(db), "--plots", str(tmp_path / plots)]
    assert main([*args, "--quiet"]) == 2
    assert "would be the ledger" in capsys.readouterr().err
    assert not db.exists()


def test_a_chart_that_fails_after_the_commit_still_shows_the_released_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release that spent always returns its value: a chart failing after the commit (a
    full disk, a file put in the way meanwhile) prints the report, then says so (exit 1)."""
    import dpledger.cli.demo as demo_cli

    def full_disk(*_: object, **__: object) -> list[Path]:
        raise OSError(28, "No space left on device")  # not even wrapped: values still shown

    monkeypatch.setattr(demo_cli, "write_plots", full_disk)
    db = tmp_path / "demo.db"
    args = ["demo", "--clients", CLIENTS, "--ledger", str(db), "--plots", str(tmp_path / "p")]
    assert main([*args, "--quiet"]) == 1
    out, err = capsys.readouterr()
    assert "eu-west" in out  # the released values
    assert "are committed" in err
    assert "No space left" in err
    assert db.exists()


def test_the_sidecar_rule_refuses_only_a_name_beside_a_database_file(tmp_path: Path) -> None:
    """Review s30: a name that is only the suffix crashed (``Path.with_name('')``), and a
    name beside a directory of the stem's name was refused."""
    from dpledger._files import check_new

    assert check_new(tmp_path / "-wal", "--plot") == tmp_path / "-wal"
    (tmp_path / "results").mkdir()
    assert check_new(tmp_path / "results-journal", "--plot").name == "results-journal"
    (tmp_path / "l.db").write_bytes(b"")
    with pytest.raises(InvalidInput, match="SQLite keeps beside"):
        check_new(tmp_path / "l.db-WAL", "--plot")
