"""A category's name and description in each language a person may see them in.

`Category.labels` holds `{"ru": {"label": "…", "description": "…"}}`: one entry per
language of settings.LANGUAGES, each text bounded. A person's preference center, the
inbox's preferences tab and the unsubscribe page show the entry of the person's language;
without one, the category's `description` (written in LANGUAGE_CODE's language) or,
lacking that, its key. Admin edits the entries as one pair of fields per language
(`CategoryLabelsForm`); the categories API returns them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

if TYPE_CHECKING:
    from notify.models import Category

# A label is a table row's heading; a description one or two sentences under it (as long
# as the category's own description may be).
LABEL_MAX_CHARS = 100
DESCRIPTION_MAX_CHARS = 300
TEXT_KEYS = {"label": LABEL_MAX_CHARS, "description": DESCRIPTION_MAX_CHARS}


def language_codes() -> list[str]:
    """The languages a category may be labelled in: settings.LANGUAGES."""
    return [code for code, _ in settings.LANGUAGES]


def labels_problems(value: object) -> list[str]:
    """What is wrong with a `labels` value (empty: nothing)."""
    if value in (None, {}):
        return []
    if not isinstance(value, dict):
        return ['labels are given per language, e.g. {"ru": {"label": "…"}}.']
    known = language_codes()
    problems = []
    for code, texts in value.items():
        if code not in known:
            problems.append(f"“{str(code)[:20]}”: a language is one of {', '.join(known)}.")
        elif not isinstance(texts, dict) or not set(texts) <= set(TEXT_KEYS):
            problems.append(f"“{code}”: give “label” and/or “description”, nothing else.")
        else:
            for key, text in texts.items():
                if not isinstance(text, str) or len(text) > TEXT_KEYS[key]:
                    problems.append(f"“{code}” {key}: text of at most {TEXT_KEYS[key]} characters.")
    return problems


def validate_category_labels(value: object) -> None:
    """The model field's validator (admin, and any caller that saves labels)."""
    problems = labels_problems(value)
    if problems:
        raise ValidationError(problems)


@dataclass(frozen=True)
class CategoryText:
    """What a person reads about a category, in one language."""

    label: str
    description: str  # "" when there is none in that language


def humanized(key: str) -> str:
    """`promo.weekly` → `Promo weekly`: a key as a last resort, readable."""
    words = " ".join(key.replace("_", " ").replace("-", " ").split("."))
    return words[:1].upper() + words[1:]


def category_text(category: Category, *, language: str) -> CategoryText:
    """The category's label and description in `language` (a code of settings.LANGUAGES).

    The label falls back to the default language's entry, then `description`, then the
    key (a row needs a name); the description does not fall back across languages, so a
    person is not shown a paragraph in a language they did not choose.
    """
    labels = category.labels if isinstance(category.labels, dict) else {}
    own = labels.get(language) or {}
    default = labels.get(settings.LANGUAGE_CODE.split("-")[0]) or {}
    label = own.get("label") or default.get("label") or category.description
    description = own.get("description") or ""
    return CategoryText(label=label or humanized(category.key), description=description)


def _text_fields() -> dict[str, forms.Field]:
    fields: dict[str, forms.Field] = {}
    for code, name in settings.LANGUAGES:
        fields[f"label_{code}"] = forms.CharField(
            label=f"Label ({name})",
            max_length=LABEL_MAX_CHARS,
            required=False,
            help_text="What a person sees as the category's name in this language.",
        )
        fields[f"description_{code}"] = forms.CharField(
            label=f"Description ({name})",
            max_length=DESCRIPTION_MAX_CHARS,
            required=False,
            widget=forms.Textarea(attrs={"rows": 2}),
        )
    return fields


class _LabelsFormBase(forms.ModelForm):
    """A category form's `labels`, edited as a label and a description per language."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        labels = self.instance.labels if isinstance(self.instance.labels, dict) else {}
        for code in language_codes():
            for key in TEXT_KEYS:
                self.initial.setdefault(f"{key}_{code}", (labels.get(code) or {}).get(key, ""))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        labels = {}
        for code in language_codes():
            texts = {key: (data.get(f"{key}_{code}") or "").strip() for key in TEXT_KEYS}
            texts = {key: text for key, text in texts.items() if text}
            if texts:
                labels[code] = texts
        self.instance.labels = labels
        return data


# The per-language fields are declared on the class (built from settings.LANGUAGES), so
# the admin lays them out like any other field.
CategoryLabelsForm = type(_LabelsFormBase)(
    "CategoryLabelsForm",
    (_LabelsFormBase,),
    {**_text_fields(), "__module__": __name__, "__doc__": _LabelsFormBase.__doc__},
)
