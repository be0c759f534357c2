"""qa.cast (2026-12-09): titles written short ("Mdlle."), names that hold another ("Frances Evans Henri"),
hyphened names ("Bide-the-Bent"), and the entries a reader can trust."""

from __future__ import annotations

from qa.cast import cast


def owners(text: str) -> dict[str, str]:
    """Each form of the text's cast -> the name of the entry it is in."""
    return {f: o["name"] for o in cast(text) for f in [o["name"], *o["aliases"]]}


def acts(name: str, n: int = 6, pronoun: str = "she") -> str:
    return " ".join(f"{name} said so; {pronoun} rose. Then {name} sat." for _ in range(n // 2))


def test_mdlle_is_a_daughters_title():
    """The Professor: "Mdlle." (100 times: "Mdlle. Reuter", "Mdlle. Henri") was read as a name of its own
    (111 mentions, an entry "Mdlle"); it is "Mademoiselle" written short."""
    text = " ".join([acts("Zoraide Reuter", 6), acts("Mdlle. Reuter", 10), acts("Zoraide", 6),
                     acts("Mr. Hunsden", 10, "he")])
    owner = owners(text)
    assert "Mdlle" not in owner and owner["Mademoiselle Reuter"] == owner["Zoraide Reuter"]
