"""experiences_app.word_diff: changed lines paired and marked word by word."""

from __future__ import annotations

from experiences_app.word_diff import MAX_TOKENS, DiffRow, Segment, diff_lines, diff_text, tokens, word_pair


def marked(row: DiffRow) -> list[str]:
    return [segment.text for segment in row.segments if segment.changed]


def test_equal_texts_have_no_rows():
    assert diff_text("same\ntext", "same\ntext") == []


def test_a_one_word_change_marks_only_that_word_in_the_changed_line():
    rows = diff_text("Always check os.path.exists() first.", "Always verify os.path.exists() first.")
    assert [row.kind for row in rows] == ["del", "add"]
    assert marked(rows[0]) == ["check"] and marked(rows[1]) == ["verify"]
    assert rows[0].text == "Always check os.path.exists() first."
    assert rows[1].text == "Always verify os.path.exists() first."


def test_punctuation_is_its_own_token_so_a_call_change_marks_the_name_only():
    assert tokens("os.path.exists()") == ["os", ".", "path", ".", "exists", "(", ")"]
    minus, plus = word_pair("os.path.exists()", "os.path.isfile()")
    assert marked(minus) == ["exists"] and marked(plus) == ["isfile"]


def test_unchanged_lines_appear_once_and_added_lines_whole():
    rows = diff_lines(["keep", "old line"], ["keep", "new line", "extra"])
    assert [(row.kind, row.text) for row in rows] == [
        ("same", "keep"),
        ("del", "old line"),
        ("add", "new line"),
        ("add", "extra"),
    ]
    assert marked(rows[2]) == ["new"] and rows[3].segments == [Segment("extra", True)]


def test_a_removed_line_is_one_deleted_row():
    rows = diff_lines(["a", "gone", "b"], ["a", "b"])
    assert [(row.kind, marked(row)) for row in rows] == [("same", []), ("del", ["gone"]), ("same", [])]


def test_neighbouring_changed_tokens_are_merged_into_one_segment():
    minus, plus = word_pair("print the path", "show each file path")
    assert marked(minus) == ["print the"] and marked(plus) == ["show each file"]


def test_very_long_lines_are_shown_as_whole_line_changes():
    old, new = "a " * MAX_TOKENS, "b " * MAX_TOKENS
    minus, plus = word_pair(old, new)
    assert minus.segments == [Segment(old, True)] and plus.segments == [Segment(new, True)]
