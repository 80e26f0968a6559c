"""Import and export of experience files (handcrafted_exp_*.yaml) through the API (multipart files or a zip)."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from experiences_app import selectors
from experiences_app.models import Experience
from experiences_app.yaml_io import read_zip, write_zip

pytestmark = pytest.mark.django_db

FILE_VALIDATION = b"""exp_id: file-validation
who:
  - CodeInterpreter
when: |
  Use when user requests file operations or FileNotFoundError occurred.
what: |
  Always check os.path.exists() before reading files.
"""
LEGACY_FILE = b"exp_id: legacy-tip\nexperience_text: Keep answers short.\n"
DUPLICATE_FILE = b"exp_id: file-validation\nwhen: other\nwhat: other\n"
BROKEN_FILE = b"exp_id: broken\nwhen: [unclosed\nwhat: x\n"
EXPERIENCE_DIRECTORY = {
    "handcrafted_exp_a_file.yaml": FILE_VALIDATION,
    "handcrafted_exp_b_legacy.yaml": LEGACY_FILE,
    "handcrafted_exp_c_duplicate.yaml": DUPLICATE_FILE,
    "handcrafted_exp_d_broken.yaml": BROKEN_FILE,
}


def upload(client, files: dict[str, bytes], **fields):
    uploads = [SimpleUploadedFile(name, content) for name, content in files.items()]
    return client.post("/api/v1/experiences/import/", {"files": uploads, **fields}, format="multipart")


def exp_ids(report, kind):
    return [entry["exp_id"] for entry in report[kind]]


def test_import_reports_created_legacy_duplicate_and_broken_files(api):
    response = upload(api, EXPERIENCE_DIRECTORY)
    assert response.status_code == 200, response.content
    report = response.json()
    assert exp_ids(report, "created") == ["file-validation", "legacy-tip"]
    assert report["updated"] == report["unchanged"] == []
    rejected = {entry["file"]: entry for entry in report["rejected"]}
    assert set(rejected) == {"handcrafted_exp_c_duplicate.yaml", "handcrafted_exp_d_broken.yaml"}
    assert rejected["handcrafted_exp_c_duplicate.yaml"]["line"] == 1
    assert "handcrafted_exp_a_file.yaml" in rejected["handcrafted_exp_c_duplicate.yaml"]["error"]
    assert rejected["handcrafted_exp_d_broken.yaml"]["line"] == 3
    legacy = Experience.objects.get(exp_id="legacy-tip")
    assert legacy.when == legacy.what == "Keep answers short." and legacy.status == "draft"
    assert legacy.revisions.get().note == "imported from handcrafted_exp_b_legacy.yaml"


def test_a_dry_run_reports_without_writing(api):
    report = upload(api, EXPERIENCE_DIRECTORY, dry_run="true").json()
    assert report["dry_run"] is True and exp_ids(report, "created") == ["file-validation", "legacy-tip"]
    assert not Experience.objects.exists()


def test_reimport_updates_changed_files_and_approve_needs_an_admin_key(api, admin_api):
    upload(api, {"handcrafted_exp_x.yaml": FILE_VALIDATION})
    assert upload(api, {"handcrafted_exp_x.yaml": FILE_VALIDATION}, approve="true").status_code == 403
    changed = FILE_VALIDATION.replace(b"Always check", b"Always verify")
    report = upload(admin_api, {"handcrafted_exp_x.yaml": changed}, approve="true").json()
    assert exp_ids(report, "updated") == ["file-validation"]
    experience = Experience.objects.get()
    assert experience.status == "approved" and experience.what.startswith("Always verify")
    assert experience.revision == 2 and experience.reviewer == "key:alpha-admin"


def test_export_then_import_round_trips_byte_for_byte(api):
    upload(api, EXPERIENCE_DIRECTORY)
    exported = api.get("/api/v1/experiences/export/")
    assert exported.status_code == 200
    assert exported["Content-Type"] == "application/zip"
    assert "attachment" in exported["Content-Disposition"]
    files = dict(read_zip(exported.content))
    assert files["handcrafted_exp_file-validation.yaml"] == FILE_VALIDATION  # the experience file format exactly
    assert set(files) == {"handcrafted_exp_file-validation.yaml", "handcrafted_exp_legacy-tip.yaml"}

    archive = SimpleUploadedFile("experiences.zip", exported.content, content_type="application/zip")
    report = api.post("/api/v1/experiences/import/", {"archive": archive}, format="multipart").json()
    assert exp_ids(report, "unchanged") == ["file-validation", "legacy-tip"]
    assert report["created"] == report["updated"] == report["rejected"] == []
    assert api.get("/api/v1/experiences/export/").content == exported.content


def test_export_can_keep_one_status(api, admin_api):
    upload(api, EXPERIENCE_DIRECTORY)
    admin_api.post("/api/v1/experiences/legacy-tip/approve/")
    names = [name for name, _ in read_zip(api.get("/api/v1/experiences/export/", {"status": "approved"}).content)]
    assert names == ["handcrafted_exp_legacy-tip.yaml"]


def test_a_zip_upload_is_unpacked_and_a_bad_archive_refused(api):
    archive = write_zip([("handcrafted_exp_b_legacy.yaml", LEGACY_FILE), ("README.md", b"# notes")])
    report = upload(api, {"bundle.zip": archive}).json()
    assert exp_ids(report, "created") == ["legacy-tip"]
    assert [entry["file"] for entry in report["rejected"]] == ["README.md"]

    broken = upload(api, {"bundle.zip": b"not a zip"})
    assert broken.status_code == 400 and "archive" in broken.json()["fields"]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as handle:
        handle.writestr("handcrafted_exp_big.yaml", b"x" * 200_000)
    too_big = upload(api, {"big.zip": buffer.getvalue()}).json()
    assert "bytes" in too_big["rejected"][0]["error"]


def test_an_import_without_files_is_refused(api):
    response = api.post("/api/v1/experiences/import/", {}, format="multipart")
    assert response.status_code == 400 and "files" in response.json()["fields"]


def test_a_changed_approved_experience_is_reported_as_awaiting_review_and_stays_selected(api, admin_api):
    plot = b"exp_id: plot-style\nwhen: Use when plotting.\nwhat: Label axes.\n"
    upload(admin_api, {"handcrafted_exp_a.yaml": FILE_VALIDATION, "handcrafted_exp_b.yaml": plot}, approve="true")
    note = b"exp_id: note\nwhen: Use when noting.\nwhat: Note.\n"
    upload(api, {"handcrafted_exp_c.yaml": note})  # a draft
    changed = {
        "handcrafted_exp_a.yaml": FILE_VALIDATION.replace(b"Always check", b"Always verify"),
        "handcrafted_exp_b.yaml": plot,
        "handcrafted_exp_c.yaml": note.replace(b"Note.", b"Note it."),
        "handcrafted_exp_d.yaml": b"exp_id: fresh\nwhen: Use when fresh.\nwhat: Fresh.\n",
    }
    waiting = {
        "file": "handcrafted_exp_a.yaml",
        "exp_id": "file-validation",
        "previous_status": "approved",
        "status": "draft",
        "left_selection": False,
        "awaiting_review": True,
    }

    dry = upload(api, changed, dry_run="true").json()
    assert dry["awaiting_review"] == [waiting] and dry["left_selection"] == []
    assert Experience.objects.get(exp_id="file-validation").status == "approved"  # nothing written

    report = upload(api, changed).json()
    assert report["updated"] == [
        waiting,
        {
            "file": "handcrafted_exp_c.yaml",
            "exp_id": "note",
            "previous_status": "draft",
            "status": "draft",
            "left_selection": False,
            "awaiting_review": False,
        },
    ]
    assert report["awaiting_review"] == [waiting] and report["left_selection"] == []
    assert report["unchanged"] == [{"file": "handcrafted_exp_b.yaml", "exp_id": "plot-style", "status": "approved"}]
    assert report["created"] == [{"file": "handcrafted_exp_d.yaml", "exp_id": "fresh", "status": "draft"}]
    assert Experience.objects.get(exp_id="file-validation").status == "draft"
    team = Experience.objects.get(exp_id="file-validation").team
    served = selectors.experience_candidates(team=team, role="CodeInterpreter")
    assert [(c.exp_id, c.pending) for c in served] == [("file-validation", True), ("plot-style", False)]
    assert "Always check" in served[0].what  # the approved text, until the change is approved

    # Approving what the import changes keeps it in selection (and brings a draft in).
    again = {"handcrafted_exp_a.yaml": FILE_VALIDATION, "handcrafted_exp_c.yaml": note}
    approved = upload(admin_api, again, approve="true").json()
    assert approved["left_selection"] == []
    assert [(e["exp_id"], e["previous_status"], e["status"]) for e in approved["updated"]] == [
        ("file-validation", "draft", "approved"),
        ("note", "draft", "approved"),
    ]
