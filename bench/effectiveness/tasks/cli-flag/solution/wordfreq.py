"""Count word frequencies in a text file: python -m wordfreq FILE."""

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

WORD = re.compile(r"[a-z']+")


def count_words(text: str) -> Counter[str]:
    """How often each word occurs, case-insensitively."""
    return Counter(WORD.findall(text.lower()))


def ranked(counts: Counter[str]) -> list[tuple[str, int]]:
    """Most frequent first; ties in alphabetical order."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wordfreq", description="Count words in a text file.")
    parser.add_argument("file", type=Path, help="the text file to read")
    parser.add_argument(
        "--top", type=positive, metavar="N", help="print only the N most frequent words"
    )
    return parser


def positive(value: str) -> int:
    """An argparse type: a positive integer, or a clear error."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"--top must be a positive integer, not {value!r}")
    return number


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    text = args.file.read_text(encoding="utf-8")
    words = ranked(count_words(text))
    if args.top is not None:
        words = words[: args.top]
    for word, count in words:
        print(f"{word} {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
