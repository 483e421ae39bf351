"""Chapter 01's masking of sensitive information, scored on a labelled set of lines (tests/fixtures/sensitive_lines.tsv:
`line<TAB>expected`, or a line alone when nothing in it is sensitive).

The score counts items, not lines. Each placeholder (<phone>, <id>, <email>) of an expected line is one item: the
span of characters of the line it stands for, and its rule. A span the rules find (`sensitive_spans`) is right only
when an item has exactly its characters and its rule; a span that is too short, too long or of the wrong rule is both
a wrong span and a missed item.

    precision = right spans / spans found        (what was masked and should have stayed lowers it)
    recall    = right spans / items              (what was missed lowers it)
"""
from collections import Counter
import pytest
from conftest import ROOT
from llmpt_nb.corpus import SENSITIVE_RULES, mask_sensitive
from llmpt_nb.sensitive_scores import gold_spans, masking_scores, read_masking_set

LABELLED = ROOT / "tests" / "fixtures" / "sensitive_lines.tsv"


def test_the_labelled_set_is_large_and_balanced():
    "At least 100 lines; as many lines with nothing sensitive as with something; every rule with many items."
    rows = read_masking_set(LABELLED)
    negatives = [line for line, expected in rows if line == expected]
    items = [rule for line, expected in rows for *_, rule in gold_spans(line, expected)]
    assert len(rows) >= 100 and len(negatives) >= 50 and len(rows) - len(negatives) >= 50, (len(rows), len(negatives))
    assert all(items.count(rule) >= 15 for rule in SENSITIVE_RULES), {rule: items.count(rule) for rule in SENSITIVE_RULES}


def test_masking_precision_and_recall():
    s = masking_scores(read_masking_set(LABELLED))
    wrong = "\n".join(f"{line}\n    masked:   {masked}\n    expected: {expected}" for line, masked, expected in s["wrong"])
    assert s["precision"] >= 0.95 and s["recall"] >= 0.95, (
        f"precision {s['precision']:.3f} ({s['right']} of {s['found']} spans found are right), recall {s['recall']:.3f} "
        f"({s['right']} of {s['items']} items found); the lines masked wrongly:\n{wrong}")


def test_the_score_counts_items_by_their_exact_span():
    "A hand-counted case: one right span, one too short, one where nothing is sensitive, one missed."
    rows = [("电话 138-1234-5678", "电话 <phone>"),
            ("售价 13800 元", "售价 13800 元"),
            ("邮箱 a.b@example.com，电话 010-62751234", "邮箱 <email>，电话 <phone>")]
    found = {rows[0][0]: [(3, 11, "phone")],                       # 138-1234 only: wrong, and the item is missed
             rows[1][0]: [(3, 8, "phone")],                        # an amount: wrong
             rows[2][0]: [(3, 18, "email")]}                       # the e-mail right, the landline missed
    s = masking_scores(rows, spans=lambda line: found[line])
    assert (s["items"], s["found"], s["right"]) == (3, 3, 1)
    assert s["precision"] == pytest.approx(1 / 3) and s["recall"] == pytest.approx(1 / 3)
    assert [w[1] for w in s["wrong"]] == ["电话 <phone>-5678", "售价 <phone> 元", "邮箱 <email>，电话 010-62751234"]
    right = masking_scores(rows)                                   # and the chapter's own rules on the same lines
    assert (right["precision"], right["recall"], right["wrong"]) == (1, 1, [])


def test_gold_spans_read_placeholders_back_to_characters():
    assert gold_spans("请拨打 138 1234 5678 或 a@example.com", "请拨打 <phone> 或 <email>") == [(4, 17, "phone"), (20, 33, "email")]
    assert gold_spans("售价 13800 元", "售价 13800 元") == []
    with pytest.raises(ValueError, match="is not a masking of"):
        gold_spans("电话 010-62751234", "手机 <phone>")
    with pytest.raises(ValueError, match="ambiguous"):
        gold_spans("138 1234 5678 139 1234 5678", "<phone> <phone>")


def test_full_width_forms_are_masked():
    "Full-width forms are found, and the text outside the placeholders is kept as it was written; counts are per rule."
    counts = Counter()
    text = "电话（０１０）６２７５１２３４，邮箱 li＠example.com，身份证 １１０１０５１９４９１２３１００２Ｘ。"
    assert mask_sensitive(text, counts) == "电话<phone>，邮箱 <email>，身份证 <id>。"
    assert counts == Counter(phone=1, id_card=1, email=1)
