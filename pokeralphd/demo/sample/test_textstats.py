import unittest

from textstats import top_words, word_count


class TextStatsTest(unittest.TestCase):
    def test_word_count(self) -> None:
        self.assertEqual(word_count("the cat sat on the mat"), 6)
        self.assertEqual(word_count(""), 0)
        self.assertEqual(word_count("don't stop"), 2)

    def test_top_words(self) -> None:
        text = "the cat and the hat and the bat"
        self.assertEqual(top_words(text, 2), [("the", 3), ("and", 2)])
        self.assertEqual(top_words("b a", 5), [("a", 1), ("b", 1)])


if __name__ == "__main__":
    unittest.main()
