"""Text statistics: a sample module for the pokeralph demo."""


def word_count(text: str) -> int:
    """How many words ``text`` holds."""
    raise NotImplementedError


def top_words(text: str, n: int = 3) -> list[tuple[str, int]]:
    """The ``n`` most frequent words with their counts, most frequent first."""
    raise NotImplementedError
