"""A page's text signature: the same words say the same page, numbers and tokens do not count."""

from __future__ import annotations

from crawler_tasks.core.signature import text_signature

POST = ("Re: the new firmware bricked my router. Tried a reset twice and it still blinks red. "
        "Any idea what else to try before I send it back?")


def test_the_same_text_gives_the_same_signature_whatever_its_spacing_and_case():
    assert text_signature(POST) == text_signature("  " + POST.upper().replace(" ", "\n  ")) is not None


def test_counts_dates_times_and_tokens_with_digits_do_not_change_it():
    a = f"{POST} Views: 1,204. Posted 2026-11-28 09:14, 3 minutes ago. csrf a8f9e0b7c1"
    b = f"{POST} Views: 1,377. Posted 2026-11-28 09:14, 5 minutes ago. csrf 77d0c1e4aa"
    assert text_signature(a) == text_signature(b)


def test_an_edited_sentence_changes_it():
    assert text_signature(POST) != text_signature(POST.replace("still blinks red", "now blinks green"))


def test_no_words_no_signature():
    assert text_signature("") is None and text_signature(None) is None and text_signature("42 17") is None
