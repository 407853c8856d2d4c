"""Every threshold and weight the answer decides with, in one place, each with where it was
calibrated. Settings a deployment may change (PORTAL_ANSWER_*) live in portal/settings.py and
are read as `settings.ANSWER_*`; these are the project's own calibration, changed only with a
new measurement on the public evaluation (bench/README.md says which run).
"""

from __future__ import annotations

# --- The evidence reader (answering.reader) -------------------------------------------
# Weights of a candidate sentence's features. Calibrated on the public evaluation's English
# questions (bench/reader.py --grid on 66 answerable ones, 2026-12-04: the evidence holds every
# answer key for 0.500 of them with these, 0.455 with all weights 1 and similarity off the
# grid's worst); the Chinese questions were held out to check them (bench/README.md).
READER_WEIGHTS: dict[str, float] = {
    "anchors": 1.0,
    "overlap": 2.0,
    "context": 0.3,
    "rank": 0.8,
    "similarity": 1.0,
    "adds": 0.6,
}
READER_CANDIDATES = 8  # kept, best first: what the model may choose among
# The best candidates by the other features that the embedder rescores: 8 hold the same
# answers as 24 on the English questions (0.455 both) at a third of the time (about 30 ms a
# sentence on one thread).
READER_EMBED = 8
# e5's cosine between a question and an unrelated sentence lies about here; only what is
# above it counts.
READER_SIMILARITY_FLOOR = 0.75
READER_WINDOW_CHARS = 160  # a quote grows by the next unit until it has this many characters
READER_SHORT_UNIT = 40  # a unit shorter than this above the best is its header: quoted with it
# A second passage's best candidate is quoted too when it scores this share of the best:
# 0.5-0.7 hold every key for 0.530 of the English questions, 0.85 for 0.500 (bench/reader.py).
READER_SECOND_SHARE = 0.7
READER_CONFIDENCE_SCALE = 1.0  # confidence = 1 - exp(-score / scale)
# Above this share of the question's words (not its anchors) mentioned in no passage, the
# passages are about the question's topic but not what it asks: declined as "unmentioned".
# By the question's language. English: set on the public evaluation's English questions
# (2026-12-05). Chinese: only when no word is mentioned at all (公司的股票代码 in a staff
# handbook): jieba cuts a question and a passage differently, and a Chinese question words its
# attribute otherwise than the passages (坐标 for a table's latitude); at 0.5 it declined 8
# answerable Chinese questions of the public evaluation for 1 unanswerable (bench/README.md,
# 2026-12-06), and none of them has every word unmentioned.
READER_ABSENT_MAX = {"en": 0.5, "zh": 0.99}
# A remembered fact answers instead of the passages when it is more about the question than
# their best sentence (both by `reader.relevance`) and at least this much: a fact that shares
# a word or two with the question is not its answer.
READER_MEMORY_MIN = 0.5
# Below this best score the reader finds no evidence: the answer is declined as low evidence.
READER_ANSWER_MIN = 0.0

# --- The short judge (answering.modes.confirmed) --------------------------------------
# Below this P(yes) - P(no) of the model reading the quotes alone, the evidence answer is
# declined (mode `confirm`; not asked about a picture: modes.confirmable). Set with
# bench/reader.py --confirm on the whole public set (2026-12-06, bench/README.md): at -0.6 it
# declines 2 more of the 28 unanswerable questions (correct abstention 0.50 -> 0.57) and no
# answerable one (false 0.075); at -0.2, 0.68 and 0.10; at 0.0, 0.71 and 0.16. Its "no" falls
# mostly on answers that would be wrong (median P(yes) - P(no): 0.36 where the evidence holds
# every key, 0.13 where it does not, -0.09 for unanswerable questions), but not apart enough
# for a threshold to reach 0.75 with false declines under 0.08.
CONFIRM_MIN = -0.6

# --- The model's choice (answering.choose) --------------------------------------------
CHOICE_NONE_MARGIN = 0.0  # "none" wins when its probability exceeds the best candidate's by this

# --- The judge (answering.writing; PORTAL_ANSWER_JUDGE is the declining threshold) ------
# The judge's P(yes) - P(no) from which a refusal of the model is overruled by a quote of the
# best passage: above the declining threshold, so that a doubtful judgement (a photo with no
# text, whose passages are about something else) still lets the model refuse.
QUOTE_AFTER_REFUSAL = 0.0

# --- Citations (answering.answer) -----------------------------------------------------
# A clause the model wrote without [n] is attributed to the passage that holds this share of
# its character pairs (small models put one [n] after two facts).
INFERRED_MIN_SHARE = 0.6
CLOSEST_PASSAGES = 3  # listed when the portal declines
