"""Full-text vectors built in Python: the `fts` value PostgreSQL computes, without stemming every row.

The database computes a message's vector as `to_tsvector('english', fts_en) || to_tsvector('simple', fts_zh)`
(textsearch.TSVECTOR_SQL; staging.FTS). Most chat text is plain for PostgreSQL's default parser: runs of
ASCII letters and digits between spaces and common punctuation. For such text the vector follows from the
tokens alone: every token takes the next position (stopwords too), separators take none, and a token's
lexeme depends only on the lowercased token. So each distinct word's lexeme is asked once from the
database's own dictionaries (ts_debug, which also confirms the token type and that the word is one token)
and cached for the process, and the vector is written as a tsvector literal (`lexeme:position ...`; the
tsvector input function sorts and merges it as to_tsvector does). The Chinese half is jieba's tokens
under 'simple', shifted by the English half's last position (what `||` does).

Anything else gets None and the database computes the vector as before: characters that start other token
types (- + & / < @ ~: hyphenated words, signed numbers, entities, paths, tags, e-mail addresses, URLs), a dot
before a letter, digit or underscore (hosts, decimals, versions, file names), a '..' starting a token (a
path), digits then e/E then a digit (scientific notation), non-ASCII characters other than separators the
database confirms (curly quotes, CJK punctuation), control characters, tokens too long to index, a lexeme
with more positions than a vector keeps, or a text search configuration that maps these token types to
anything but one snowball or simple dictionary. tests/ingest/test_fulltext.py compares every vector with
the database's on generated and sampled texts and on invented two-person dialogs.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Iterable
from itertools import compress
from operator import add
from typing import Any

from sqlalchemy import Connection, Engine, text

logger = logging.getLogger(__name__)

ENGLISH_TYPES = ("asciiword", "numword", "uint")  # the only token types plain text can produce
CHINESE_TYPES = ("word",)
# Characters that leave the plain class (module docstring). Non-ASCII characters pass here and are checked
# one by one against the database's separators.
UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9 \t\n\r!\"#$%'()*,.:;=>?\[\\\]^_`{|}\x80-\U0010ffff]")
# Sequences that leave it: a dot before a letter, digit or underscore, or '..' where a token starts (not
# '...'); a token of digits, e or E, and a digit. DOTS and EXPONENT are cheaper scans that find every match.
DOTS = re.compile(r"\.[A-Za-z0-9_.]")
UNSAFE_DOTS = re.compile(r"\.[A-Za-z0-9_]|(?<![^A-Za-z0-9])\.\.(?!\.)")
DIGIT = re.compile(r"[0-9]")
EXPONENT = re.compile(r"[0-9][eE][0-9]")
UNSAFE_EXPONENT = re.compile(r"(?<![A-Za-z0-9])[0-9]+[eE][0-9]")
LONG_TOKEN = re.compile(r"[A-Za-z0-9]{2047}")  # the parser drops tokens this long
# ASCII letters and digits to lowercase, every other byte (UTF-8 bytes of separators too) to a space.
TOKENS = bytes(c + 32 * (65 <= c <= 90) if chr(c).isascii() and chr(c).isalnum() else 32 for c in range(256))
NON_ASCII = re.compile(r"[^\x00-\x7f]")
MAX_POSITIONS = 255  # to_tsvector keeps this many positions of one lexeme (a tsvector literal keeps 256)
MAX_POSITION = 16383  # positions above are clamped
MAX_CACHED = 200_000  # distinct words, separators and Chinese tokens kept per process
POSITIONS = tuple(f":{n}" for n in range(1, MAX_POSITION))  # ":1", ":2", ...

# Each (token, type, dictionaries' templates) of the configurations the vectors come from.
SELECT_MAPPING = text(
    """
    select c.cfgname, t.alias, array_agg(tm.tmplname order by m.mapseqno) as templates,
           bool_and(coalesce(d.dictinitoption, '') not ilike '%stopwords%') as no_stopwords,
           bool_and(p.prsname = 'default') as default_parser
    from pg_ts_config as c
    join pg_ts_parser as p on p.oid = c.cfgparser
    join pg_ts_config_map as m on m.mapcfg = c.oid
    join ts_token_type('default') as t on t.tokid = m.maptokentype
    join pg_ts_dict as d on d.oid = m.mapdict
    join pg_ts_template as tm on tm.oid = d.dicttemplate
    where c.oid in (cast('english' as regconfig), cast('simple' as regconfig))
    group by 1, 2
    """
)
# How the configuration tokenises and normalises each text: one row per token, in order.
DEBUG_TOKENS = text(
    """
    select w.n, d.alias, d.token, d.lexemes
    from unnest(cast(:texts as text[])) with ordinality as w(body, n)
    cross join lateral ts_debug(cast(:config as regconfig), w.body)
        with ordinality as d(alias, description, token, dictionaries, dictionary, lexemes, k)
    order by w.n, d.k
    """
)


class UnknownWords(Exception):
    """Raised inside vector(): the text has words not looked up yet (collected in Lexicon.pending)."""


class Lexicon:
    """Per-process cache of lexemes and separators for one database; vector() builds literals from it.

    The caches only grow from learn(), which asks the database; everything else only reads them, so the
    preparation thread is the only writer.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.words: dict[bytes, str] = {}  # lowercased ASCII token -> lexeme ('' for a stopword)
        self.unsafe: set[bytes | str] = set()  # tokens the database does not index as one plain token
        self.separators: dict[str, bool] = {}  # non-ASCII character -> a plain separator in the database
        self.chinese: dict[str, str] = {}  # jieba token -> its 'simple' lexeme ('' for a stopword)
        self.pending: set[bytes] = set()  # English tokens to look up
        self.pending_chars: set[str] = set()
        self.pending_chinese: set[str] = set()
        self.identity = False  # digits-only tokens are their own lexeme (no lookup needed)
        self.enabled = self._check_configuration()

    def _check_configuration(self) -> bool:
        with self.engine.connect() as conn:
            rows = conn.execute(SELECT_MAPPING).all()
        mapping = {(r.cfgname, r.alias): r for r in rows}
        needed = [("english", alias) for alias in ENGLISH_TYPES] + [("simple", "word")]
        for key in needed:
            row = mapping.get(key)
            if row is None or not row.default_parser or len(row.templates) != 1:
                logger.info("full-text vectors stay in the database: %s %s is mapped unusually", *key)
                return False
            if row.templates[0] not in ("snowball", "simple"):
                logger.info("full-text vectors stay in the database: %s %s uses %s", *key, row.templates)
                return False
        uint = mapping[("english", "uint")]
        self.identity = uint.templates == ["simple"] and bool(uint.no_stopwords)
        return True

    def vector(self, english: str, chinese: str = "") -> str | None:
        """The tsvector literal of TSVECTOR_SQL for (english, chinese), or None when the database must
        compute it. Raises UnknownWords when words need looking up first (learn(), then call again)."""
        if not self.enabled or UNSAFE_CHAR.search(english):
            return None
        if DOTS.search(english) and UNSAFE_DOTS.search(english):
            return None
        if DIGIT.search(english) and EXPONENT.search(english) and UNSAFE_EXPONENT.search(english):
            return None
        if len(english) >= 2047 and LONG_TOKEN.search(english):
            return None
        unknown = False
        if not english.isascii():
            for char in set(NON_ASCII.findall(english)):
                separator = self.separators.get(char)
                if separator is None:
                    self.pending_chars.add(char)
                    unknown = True
                elif not separator:
                    return None
        tokens = english.encode().translate(TOKENS).split()
        pieces = chinese.split(" ") if chinese else []
        if len(tokens) + len(pieces) >= MAX_POSITION:
            return None
        lexemes = list(map(self.words.get, tokens))
        if None in lexemes:
            if not self._missing(tokens, lexemes, self.pending):
                return None
            unknown = True
        zh = list(map(self.chinese.get, pieces))
        if None in zh:
            if not self._missing(pieces, zh, self.pending_chinese):
                return None
            unknown = True
        if unknown:
            raise UnknownWords
        if len(tokens) > MAX_POSITIONS and _crowded(lexemes) or len(pieces) > MAX_POSITIONS and _crowded(zh):
            return None
        # "lexeme:position" for every token that is not a stopword (lexeme '').
        literal = " ".join(map(add, compress(lexemes, lexemes), compress(POSITIONS, lexemes)))
        if not pieces:
            return literal
        # `a || b` shifts b's positions by a's largest position (its last token that is not a stopword).
        shift = next((n for n in range(len(lexemes), 0, -1) if lexemes[n - 1]), 0)
        tail = " ".join(f"{lexeme}:{shift + n}" for n, lexeme in enumerate(zh, 1) if lexeme)
        return f"{literal} {tail}" if literal and tail else literal or tail

    def _missing(self, tokens: list[Any], lexemes: list[str | None], pending: set[Any]) -> bool:
        """Note the tokens without a lexeme for learn(); False when one of them can never have one."""
        missing = {token for token, lexeme in zip(tokens, lexemes, strict=True) if lexeme is None}
        if not missing.isdisjoint(self.unsafe):
            return False
        pending.update(missing)
        return True

    def learn(self) -> None:
        """Look up the pending words, separators and Chinese tokens in the database (one round trip)."""
        words = sorted(word.decode() for word in self.pending - self.words.keys())
        chars = sorted(self.pending_chars - self.separators.keys())
        chinese = sorted(self.pending_chinese - self.chinese.keys())
        self.pending.clear()
        self.pending_chars.clear()
        self.pending_chinese.clear()
        if self.identity:  # digits only: a uint, its own lexeme under the simple dictionary
            for word in [w for w in words if w.isdigit()]:
                self.words[word.encode()] = word
            words = [w for w in words if not w.isdigit()]
        if len(self.words) + len(self.chinese) + len(self.separators) > MAX_CACHED:
            self.words.clear()
            self.chinese.clear()
            self.unsafe.clear()
        with self.engine.connect() as conn:
            if words:
                for word, lexeme in self._learn_tokens(conn, "english", words, ENGLISH_TYPES):
                    self.words[word.encode()] = lexeme
            if chinese:
                self.chinese.update(self._learn_tokens(conn, "simple", chinese, CHINESE_TYPES))
            if chars:
                # A separator splits words and numbers, and is not a letter, digit or mark there.
                found = _debug(conn, "english", [f"a{char}a1{char}a" for char in chars])
                for char, tokens in zip(chars, found, strict=True):
                    expected = [("asciiword", "a"), ("blank", char), ("numword", "a1"), ("blank", char)]
                    expected.append(("asciiword", "a"))
                    self.separators[char] = [(alias, token) for alias, token, _ in tokens] == expected

    def _learn_tokens(
        self, conn: Connection, config: str, words: list[str], types: tuple[str, ...]
    ) -> list[tuple[str, str]]:
        """(word, lexeme or '' for a stopword) of the words that are one token of these types."""
        learned = []
        for word, tokens in zip(words, _debug(conn, config, words), strict=True):
            if len(tokens) == 1:
                alias, token, lexemes = tokens[0]
                if alias in types and token == word and lexemes is not None and len(lexemes) <= 1:
                    learned.append((word, lexemes[0] if lexemes else ""))
                    continue
            self.unsafe.add(word.encode() if config == "english" else word)
        return learned


def _crowded(lexemes: Iterable[str | None]) -> bool:
    """Whether one lexeme has more positions than to_tsvector keeps."""
    counts = Counter(lexeme for lexeme in lexemes if lexeme)
    return bool(counts) and max(counts.values()) > MAX_POSITIONS


def _debug(conn: Connection, config: str, texts: list[str]) -> list[list[tuple[str, str, list[str] | None]]]:
    """ts_debug's (alias, token, lexemes) rows for each text, in order."""
    found: list[list[tuple[str, str, list[str] | None]]] = [[] for _ in texts]
    result = conn.execute(DEBUG_TOKENS, {"texts": texts, "config": config})
    for n, alias, token, lexemes in result:
        found[n - 1].append((alias, token, lexemes))
    return found


_lexicons: dict[str, Lexicon] = {}
_lexicons_lock = threading.Lock()


def lexicon_for(engine: Engine) -> Lexicon:
    """The process's Lexicon for this database (its caches persist across ingests)."""
    key = engine.url.render_as_string(hide_password=True)
    with _lexicons_lock:
        lexicon = _lexicons.get(key)
        if lexicon is None:
            lexicon = _lexicons[key] = Lexicon(engine)
        return lexicon
