"""manage.py import_experiences / export_experiences."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from experiences_app.models import Experience
from tests.experiences_app.test_import_export import EXPERIENCE_DIRECTORY, FILE_VALIDATION, LEGACY_FILE

pytestmark = pytest.mark.django_db


@pytest.fixture
def experience_dir(tmp_path):
    directory = tmp_path / "experience"
    directory.mkdir()
    for name, content in EXPERIENCE_DIRECTORY.items():
        (directory / name).write_bytes(content)
    (directory / "notes.yaml").write_bytes(b"not: an experience")  # outside the handcrafted_exp_*.yaml glob
    return directory


def run(*args):
    out = StringIO()
    try:
        call_command(*args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), exc
    return out.getvalue(), None


def test_import_prints_the_report_and_fails_when_files_were_rejected(tenant, experience_dir):
    output, error = run("import_experiences", str(experience_dir), "--team", "alpha")
    assert error is not None and error.returncode == 1 and "2 file(s) rejected" in str(error)
    assert "created   file-validation (handcrafted_exp_a_file.yaml)" in output
    assert "created   legacy-tip (handcrafted_exp_b_legacy.yaml)" in output
    assert "rejected  handcrafted_exp_c_duplicate.yaml, line 1: " in output
    assert "rejected  handcrafted_exp_d_broken.yaml, line 3:" in output
    assert "team 'alpha': 2 created, 0 updated, 0 unchanged, 2 rejected" in output
    assert sorted(Experience.objects.values_list("exp_id", "status")) == [
        ("file-validation", "draft"),
        ("legacy-tip", "draft"),
    ]


def test_the_json_report_names_created_updated_unchanged_and_rejected_files(tenant, tmp_path):
    before = tmp_path / "before"
    before.mkdir()
    (before / "handcrafted_exp_a.yaml").write_bytes(FILE_VALIDATION)
    (before / "handcrafted_exp_b.yaml").write_bytes(
        b"exp_id: plot-style\nwhen: Use when plotting.\nwhat: Label axes.\n"
    )
    run("import_experiences", str(before), "--team", "alpha")

    directory = tmp_path / "experience"
    directory.mkdir()
    files = {
        "handcrafted_exp_1_same.yaml": FILE_VALIDATION,  # unchanged
        "handcrafted_exp_2_plot.yaml": b"exp_id: plot-style\nwhen: Use when plotting.\nwhat: Label both axes.\n",
        "handcrafted_exp_3_legacy.yaml": LEGACY_FILE,  # experience_text fills when and what
        "handcrafted_exp_4_again.yaml": FILE_VALIDATION,  # a duplicate exp_id in the same batch
        "handcrafted_exp_5_broken.yaml": b"exp_id: broken\nwhen: [unclosed\nwhat: x\n",
    }
    for name, content in files.items():
        (directory / name).write_bytes(content)
    output, error = run("import_experiences", str(directory), "--team", "alpha", "--json")

    assert error is not None and error.returncode == 1
    report = json.loads(output)
    assert report["dry_run"] is False
    assert report["created"] == [{"file": "handcrafted_exp_3_legacy.yaml", "exp_id": "legacy-tip", "status": "draft"}]
    assert report["updated"] == [
        {
            "file": "handcrafted_exp_2_plot.yaml",
            "exp_id": "plot-style",
            "previous_status": "draft",
            "status": "draft",
            "left_selection": False,
            "awaiting_review": False,
        }
    ]
    assert report["unchanged"] == [
        {"file": "handcrafted_exp_1_same.yaml", "exp_id": "file-validation", "status": "draft"}
    ]
    assert report["left_selection"] == []
    rejected = {entry["file"]: entry for entry in report["rejected"]}
    assert list(rejected) == ["handcrafted_exp_4_again.yaml", "handcrafted_exp_5_broken.yaml"]
    assert rejected["handcrafted_exp_4_again.yaml"]["line"] == 1
    assert "file-validation" in rejected["handcrafted_exp_4_again.yaml"]["error"]
    assert "handcrafted_exp_1_same.yaml" in rejected["handcrafted_exp_4_again.yaml"]["error"]
    assert rejected["handcrafted_exp_5_broken.yaml"]["line"] == 3
    legacy = Experience.objects.get(exp_id="legacy-tip")
    assert legacy.when == legacy.what == "Keep answers short."
    assert Experience.objects.get(exp_id="plot-style").what == "Label both axes."


def test_dry_run_and_approve(tenant, experience_dir):
    for name in ("handcrafted_exp_c_duplicate.yaml", "handcrafted_exp_d_broken.yaml"):
        (experience_dir / name).unlink()
    output, error = run("import_experiences", str(experience_dir), "--team", "alpha", "--dry-run")
    assert error is None and "[dry run] created" in output and not Experience.objects.exists()
    output, error = run("import_experiences", str(experience_dir), "--team", "alpha", "--approve")
    assert error is None
    assert set(Experience.objects.values_list("status", "reviewer")) == {("approved", "command:import_experiences")}


def test_the_printed_report_names_approved_experiences_whose_change_awaits_review(tenant, tmp_path):
    directory = tmp_path / "experience"
    directory.mkdir()
    (directory / "handcrafted_exp_a.yaml").write_bytes(FILE_VALIDATION)
    run("import_experiences", str(directory), "--team", "alpha", "--approve")
    (directory / "handcrafted_exp_a.yaml").write_bytes(FILE_VALIDATION.replace(b"Always check", b"Always verify"))

    output, error = run("import_experiences", str(directory), "--team", "alpha")
    assert error is None
    assert (
        "updated   file-validation (handcrafted_exp_a.yaml): approved -> draft, "
        "the approved text stays selected until the change is approved" in output
    )
    assert "team 'alpha': 0 created, 1 updated, 0 unchanged, 0 rejected (1 approved, change awaiting review)" in output
    assert Experience.objects.get().status == "draft"


def test_export_then_import_round_trips_byte_for_byte(tenant, experience_dir, tmp_path):
    run("import_experiences", str(experience_dir), "--team", "alpha")
    out_dir = tmp_path / "exported"
    output, error = run("export_experiences", str(out_dir), "--team", "alpha")
    assert error is None and "Wrote 2 experience file(s)" in output
    assert (out_dir / "handcrafted_exp_file-validation.yaml").read_bytes() == FILE_VALIDATION
    first = {path.name: path.read_bytes() for path in out_dir.iterdir()}

    output, error = run("import_experiences", str(out_dir), "--team", "alpha")
    assert error is None and "0 created, 0 updated, 2 unchanged, 0 rejected" in output
    again = tmp_path / "again"
    run("export_experiences", str(again), "--team", "alpha")
    assert {path.name: path.read_bytes() for path in again.iterdir()} == first


def test_an_unknown_team_is_an_error(db, experience_dir):
    _, error = run("import_experiences", str(experience_dir), "--team", "nobody")
    assert error is not None and "No team named 'nobody'" in str(error)
