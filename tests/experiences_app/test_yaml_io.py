"""Experience files (handcrafted_exp_*.yaml): parse, validate, dump, round-trip, zip archives. No database."""

from __future__ import annotations

import io
import string
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiences_app import yaml_io
from experiences_app.yaml_io import (
    MAX_FILE_BYTES,
    MAX_ZIP_MEMBERS,
    ExperienceData,
    ExperienceFileError,
    ExperienceValidationError,
    FileError,
    ZipArchiveError,
    dump_experience_file,
    parse_experience_file,
    parse_experience_files,
    read_zip,
    validate_experience,
    write_zip,
)

# The experience file format's example (file-validation), byte for byte.
SEED_FILE = b"""exp_id: file-validation
who:
  - CodeInterpreter
when: |
  Use when user requests file operations or FileNotFoundError occurred.
what: |
  Always check os.path.exists() before reading files.
"""
SEED_EXPERIENCE = ExperienceData(
    exp_id="file-validation",
    who=["CodeInterpreter"],
    when="Use when user requests file operations or FileNotFoundError occurred.",
    what="Always check os.path.exists() before reading files.",
)


def error_of(name: str, data: bytes) -> FileError:
    with pytest.raises(ExperienceFileError) as caught:
        parse_experience_file(name, data)
    assert caught.value.error.name == name
    return caught.value.error


# --- parsing ------------------------------------------------------------------------------------


def test_the_example_file_parses_and_dumps_back_to_the_same_bytes():
    assert parse_experience_file("handcrafted_exp_anything.yaml", SEED_FILE) == SEED_EXPERIENCE
    assert dump_experience_file(SEED_EXPERIENCE) == ("handcrafted_exp_file-validation.yaml", SEED_FILE)


def test_legacy_experience_text_fills_both_when_and_what():
    data = b"exp_id: old-one\nexperience_text: |\n  Prefer pandas for CSV files.\n"
    exp = parse_experience_file("handcrafted_exp_old.yaml", data)
    assert exp == ExperienceData("old-one", [], "Prefer pandas for CSV files.", "Prefer pandas for CSV files.")


def test_legacy_text_with_when_or_what_is_ambiguous():
    data = b"exp_id: a\nexperience_text: x\nwhen: y\nwhat: z\n"
    error = error_of("handcrafted_exp_a.yaml", data)
    assert (error.line, "cannot be combined" in error.message) == (2, True)


@pytest.mark.parametrize(
    ("who_yaml", "roles"),
    [
        ("who:\n  - Planner\n  - CodeInterpreter\n", ["Planner", "CodeInterpreter"]),
        ("who: Planner\n", ["Planner"]),  # a single string is one role
        ("who: []\n", []),  # empty = every role
        ("who:\n", []),  # null = every role
        ("", []),  # missing = every role
        ("who: ['  Planner ', Planner]\n", ["Planner"]),  # trimmed, repeats dropped
    ],
)
def test_who_forms(who_yaml: str, roles: list[str]):
    data = f"exp_id: a\n{who_yaml}when: w\nwhat: x\n".encode()
    assert parse_experience_file("handcrafted_exp_a.yaml", data).who == roles


@pytest.mark.parametrize(
    ("who_yaml", "fragment"),
    [("who: 3\n", "must be a list"), ("who: [Planner, 3]\n", "role 2 is a number"), ("who: ['', x]\n", "empty")],
)
def test_bad_who_is_rejected_on_its_line(who_yaml: str, fragment: str):
    error = error_of("handcrafted_exp_a.yaml", f"exp_id: a\n{who_yaml}when: w\nwhat: x\n".encode())
    assert fragment in error.message
    assert error.line == 2


def test_broken_yaml_reports_the_line():
    data = b"exp_id: a\nwho: []\nwhen: |\n  fine\nwhat: x: y\n"
    error = error_of("handcrafted_exp_a.yaml", data)
    assert error.line == 5
    assert error.message.startswith("invalid YAML: ")
    assert str(error) == f"handcrafted_exp_a.yaml, line 5: {error.message}"


def test_unknown_keys_are_rejected_by_name():
    data = b"exp_id: a\nwhen: w\nwhat: x\nexp_embedding: [0.1]\nauthor: me\n"
    error = error_of("handcrafted_exp_a.yaml", data)
    assert "'author', 'exp_embedding'" in error.message
    assert error.line == 4


def test_a_repeated_key_is_rejected_rather_than_silently_overwritten():
    error = error_of("handcrafted_exp_a.yaml", b"exp_id: a\nwhen: w\nwhat: x\nwhat: y\n")
    assert (error.line, error.message) == (4, "key 'what' appears twice (first on line 3)")


def test_oversize_files_are_rejected_before_parsing():
    data = b"exp_id: a\nwhen: w\nwhat: |\n" + b"  x\n" * (MAX_FILE_BYTES // 4)
    error = error_of("handcrafted_exp_a.yaml", data)
    assert (error.line, f"limit {MAX_FILE_BYTES}" in error.message) == (None, True)


@pytest.mark.parametrize(
    "name", ["handcrafted_exp_a.yml", "exp_a.yaml", "handcrafted_exp_a.yaml.bak", "dir/handcrafted_exp_a.yaml"]
)
def test_names_other_than_the_loader_glob_are_not_experience_files(name: str):
    assert "handcrafted_exp_*.yaml" in error_of(name, SEED_FILE).message


@pytest.mark.parametrize(
    ("data", "line", "fragment"),
    [
        (b"exp_id: 007\nwhen: w\nwhat: x\n", 1, "'exp_id' must be text, not a number"),
        (b"exp_id: has space\nwhen: w\nwhat: x\n", 1, "must be a slug"),
        (b"exp_id: a\nwhat: x\n", None, "'when' is required"),
        (b"exp_id: a\nwhen: '  '\nwhat: x\n", 2, "'when' must not be empty"),
        (b"when: w\nwhat: x\n", 1, "'exp_id' is required"),
        (b"- a\n- b\n", 1, "must hold a mapping"),
        (b"", None, "the file is empty"),
        (b'exp_id: a\nwhen: w\nwhat: "nul \\0 here"\n', 3, "control character"),
        (b"exp_id: a\nwhen: w\nwhat: \xff\n", None, "not UTF-8"),
        (b'exp_id: a\nwhen: w\nwhat: "lone \\ud800 surrogate"\n', 3, "lone UTF-16 surrogate"),
        (b'exp_id: a\nwho: ["\\udfff"]\nwhen: w\nwhat: x\n', 2, "lone UTF-16 surrogate"),
        (b"exp_id: a\n---\nexp_id: b\n", 2, "invalid YAML"),
        (b"exp_id: !!python/object:os.system a\nwhen: w\nwhat: x\n", 1, "invalid YAML"),  # safe loader only
    ],
)
def test_invalid_contents_name_field_and_line(data: bytes, line: int | None, fragment: str):
    error = error_of("handcrafted_exp_a.yaml", data)
    assert fragment in error.message
    assert error.line == line


def test_validation_reports_every_field_for_forms():
    with pytest.raises(ExperienceValidationError) as caught:
        validate_experience(exp_id="-bad", who="Planner", when="", what=None)
    assert set(caught.value.fields) == {"exp_id", "when", "what"}


def test_text_is_stored_with_plain_line_breaks_and_no_trailing_blanks():
    exp = validate_experience(exp_id="a", who=[], when=" one  \r\ntwo\rthree\u2028four \n\n", what="x")
    assert exp.when == "one\ntwo\nthree\nfour"


# --- many files ---------------------------------------------------------------------------------


def test_a_batch_keeps_good_files_and_reports_bad_ones_and_later_duplicates():
    files = [
        ("handcrafted_exp_1.yaml", SEED_FILE),
        ("handcrafted_exp_legacy.yaml", b"exp_id: legacy\nexperience_text: Old text\n"),
        ("handcrafted_exp_broken.yaml", b"exp_id: b\nwhen: [unclosed\n"),
        ("handcrafted_exp_copy.yaml", b"when: again\nwhat: again\nexp_id: file-validation\n"),
        ("notes.txt", b"hello"),
        ("handcrafted_exp_1.yaml", b"exp_id: other\nwhen: w\nwhat: x\n"),
    ]
    parsed, errors = parse_experience_files(files)
    assert [(name, exp.exp_id) for name, exp in parsed] == [
        ("handcrafted_exp_1.yaml", "file-validation"),
        ("handcrafted_exp_legacy.yaml", "legacy"),
    ]
    assert [(e.name, e.line) for e in errors] == [
        ("handcrafted_exp_broken.yaml", 3),
        ("handcrafted_exp_copy.yaml", 3),
        ("notes.txt", None),
        ("handcrafted_exp_1.yaml", None),
    ]
    assert errors[1].message == "duplicate exp_id 'file-validation': already defined by handcrafted_exp_1.yaml"
    assert "came earlier" in errors[3].message


# --- dump and round trip --------------------------------------------------------------------------


def test_dump_writes_the_experience_file_layout_for_all_roles_and_multiline_text():
    exp = ExperienceData("multi_1", [], "line one\nline two", "step 1:\n  - indented {braces} 'quotes' # hash")
    name, data = dump_experience_file(exp)
    assert name == "handcrafted_exp_multi_1.yaml"
    assert data.decode() == (
        "exp_id: multi_1\n"
        "who: []\n"
        "when: |\n  line one\n  line two\n"
        "what: |\n  step 1:\n    - indented {braces} 'quotes' # hash\n"
    )
    assert parse_experience_file(name, data) == exp


def test_dump_quotes_ids_and_roles_yaml_would_read_as_other_types():
    exp = ExperienceData("2024", ["true", "null", "Role: x"], "w", "x")
    name, data = dump_experience_file(exp)
    assert parse_experience_file(name, data) == exp


def test_dump_refuses_invalid_data():
    with pytest.raises(ExperienceValidationError):
        dump_experience_file(ExperienceData("bad id", [], "w", "x"))


_id_strategy = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,30}", fullmatch=True)
# YAML's syntax characters, every kind of line break and blank, and any other printable character.
_text_strategy = st.text(
    alphabet=st.one_of(
        st.sampled_from(" \t\n\r\x85\u2028\u00a0{}[]:#'\"|>-&*!%@`,?~=" + string.digits),
        st.characters(blacklist_categories=("Cs", "Cc")),
    ),
    min_size=1,
    max_size=200,
)


@settings(max_examples=300, deadline=None)
@given(exp_id=_id_strategy, who=st.lists(_text_strategy, max_size=4), when=_text_strategy, what=_text_strategy)
def test_round_trip_is_byte_stable(exp_id: str, who: list[str], when: str, what: str):
    try:
        exp = validate_experience(exp_id=exp_id, who=who, when=when, what=what)
    except ExperienceValidationError:
        return  # a text or role of blanks only: not an experience
    name, data = dump_experience_file(exp)
    assert parse_experience_file(name, data) == exp
    assert dump_experience_file(parse_experience_file(name, data)) == (name, data)


# --- zip archives ---------------------------------------------------------------------------------


def make_zip(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return buffer.getvalue()


def test_write_zip_is_deterministic_and_read_zip_reads_it_back():
    files = [("handcrafted_exp_b.yaml", b"b"), ("handcrafted_exp_a.yaml", b"a")]
    archive = write_zip(files)
    assert write_zip(list(reversed(files))) == archive
    assert read_zip(archive) == sorted(files)
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        assert [info.date_time for info in opened.infolist()] == [(1980, 1, 1, 0, 0, 0)] * 2


def test_write_zip_refuses_paths_and_duplicates():
    with pytest.raises(ValueError, match="plain file name"):
        write_zip([("../x.yaml", b"")])
    with pytest.raises(ValueError, match="duplicate"):
        write_zip([("a", b""), ("a", b"")])


def test_read_zip_keeps_base_names_only_and_skips_folders_and_metadata():
    archive = make_zip(
        [
            ("../../etc/handcrafted_exp_a.yaml", b"a"),
            ("/abs/handcrafted_exp_b.yaml", b"b"),
            ("nested\\win\\handcrafted_exp_c.yaml", b"c"),
            ("folder/", b""),
            ("__MACOSX/._handcrafted_exp_a.yaml", b"junk"),
            (".hidden", b"h"),
        ]
    )
    assert read_zip(archive) == [
        ("handcrafted_exp_a.yaml", b"a"),
        ("handcrafted_exp_b.yaml", b"b"),
        ("handcrafted_exp_c.yaml", b"c"),
    ]


def test_read_zip_limits_members_and_reads_big_members_only_far_enough_to_reject_them():
    with pytest.raises(ZipArchiveError, match="members"):
        read_zip(make_zip([(f"f{i}", b"") for i in range(MAX_ZIP_MEMBERS + 1)]))
    bomb = make_zip([("handcrafted_exp_bomb.yaml", b"\0" * (50 * MAX_FILE_BYTES))])
    assert len(bomb) < MAX_FILE_BYTES  # compresses well
    [(name, data)] = read_zip(bomb)
    assert len(data) == MAX_FILE_BYTES + 1
    assert "limit" in error_of(name, data).message


def test_read_zip_limits_the_total_bytes_read(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(yaml_io, "MAX_ZIP_TOTAL_BYTES", 10)
    assert read_zip(make_zip([("a", b"12345"), ("b", b"12345")])) == [("a", b"12345"), ("b", b"12345")]
    with pytest.raises(ZipArchiveError, match="more than 10 bytes"):
        read_zip(make_zip([("a", b"12345"), ("b", b"123456")]))


def test_read_zip_refuses_a_non_zip():
    with pytest.raises(ZipArchiveError, match="not a readable zip"):
        read_zip(b"plain bytes")


def test_export_then_import_round_trips_through_a_zip():
    exps = [SEED_EXPERIENCE, ExperienceData("b", ["Planner"], "when b", "what b\nline 2")]
    archive = write_zip([dump_experience_file(exp) for exp in exps])
    parsed, errors = parse_experience_files(read_zip(archive))
    assert errors == []
    assert [exp for _, exp in parsed] == [exps[1], SEED_EXPERIENCE]  # sorted by file name
