"""The one measurement of a model for a store: 32 everyday questions and the sentences
that answer them, each question against its own answer (related) and against the 31
others (unrelated), embedded as queries and documents with the model's own prompts.

Two things are read from the same cosines (:func:`measure`, a few dozen short texts:
~0.1 s with the model loaded):

- **the score scale** (:mod:`.scale`, ADR-508). Sentence models spread their cosines
  differently: all-MiniLM-L6-v2 scores unrelated texts near 0.03 and a query against its
  answer near 0.56, while e5 or nomic put nearly everything between 0.7 and 0.9. Every
  score the search is tuned in (the keyword lift, the familiarity discount, the
  near-miss floor, the presets' steps, the calibration's margin, the mount's cut) was
  chosen on MiniLM's spread. So the model's cosine is mapped onto MiniLM's by the
  straight line that takes this model's mean cosine of unrelated pairs to MiniLM's and
  of related pairs to MiniLM's::

      gain  = (related_ref - unrelated_ref) / (related - unrelated)
      offset = unrelated_ref - gain * unrelated

  rounded to three decimals so that MiniLM itself gets gain 1 and offset 0 exactly.
- **the grade** (:mod:`.grade`): how wide the unrelated pairs spread around their mean,
  which the scale's two means do not say.

The pairs are across topics no eval set is about; they tune nothing, they only measure
how far apart this model puts related and unrelated text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from kg_fuse.server.store_model.grade import CAP, Grade
from kg_fuse.server.store_model.scale import ScoreScale

log = logging.getLogger(__name__)

#: all-MiniLM-L6-v2's mean cosine of unrelated and of related pairs below (measured:
#: 0.029327 and 0.555873 on ONNX Runtime), rounded so that model maps to itself exactly;
#: the search's table of tuned numbers shows it (``tuning.SCORE_SCALE_REFERENCE``).
UNRELATED_REF, RELATED_REF = 0.0293, 0.5559
#: A model that puts related pairs less than this above unrelated ones cannot rank: its
#: gain is capped rather than amplifying noise without bound (random weights: ~0.001).
LEAST_SPREAD = 0.02
#: Bumped whenever the measurement changes: a store measured by an older one is measured
#: again at its next start.
RECIPE = "pairs32-p99-v1"

PAIRS: tuple[tuple[str, str], ...] = (
    ("how do I boil an egg", "Place the eggs in boiling water for seven minutes, then cool "
     "them in cold water."),
    ("repair a flat bicycle tyre", "Remove the inner tube, find the puncture, roughen the "
     "rubber and glue a patch over the hole."),
    ("what causes the seasons", "The tilt of the Earth's axis changes how directly sunlight "
     "strikes each hemisphere during the year."),
    ("cheap flights to Lisbon", "Budget airlines fly to Portugal's capital from most "
     "European cities for a low fare."),
    ("water my tomato plants", "Tomatoes need deep watering at the base two or three times "
     "a week in dry weather."),
    ("reset a forgotten password", "Click 'forgot password' on the sign-in page and follow "
     "the link sent to your email to choose a new one."),
    ("symptoms of the flu", "Influenza usually brings fever, aching muscles, a sore throat "
     "and tiredness that lasts several days."),
    ("train a puppy to sit", "Hold a treat above the puppy's nose and move it back until it "
     "sits, then reward it at once."),
    ("convert celsius to fahrenheit", "Multiply the temperature in degrees Celsius by nine "
     "fifths and add thirty-two."),
    ("why is the sky blue", "Air molecules scatter short blue wavelengths of sunlight more "
     "than red ones."),
    ("pay off a credit card", "Paying more than the minimum each month reduces the balance "
     "and the interest charged on it."),
    ("learn to play guitar chords", "Start with the open chords G, C and D, pressing the "
     "strings just behind the frets."),
    ("remove a red wine stain", "Blot the spill, cover it with salt or baking soda, then "
     "wash the cloth in cold water."),
    ("how long to sleep each night", "Most adults need between seven and nine hours of "
     "sleep to feel rested."),
    ("write a cover letter", "A cover letter introduces you to an employer and explains why "
     "your experience suits the job."),
    ("sort a list of numbers", "A sorting algorithm arranges the items of a sequence in "
     "ascending order."),
    ("send a file over the network", "The program opens a socket connection to the remote "
     "host and transfers the file's bytes."),
    ("compress a large folder", "Archive the directory into a single file and shrink it "
     "with a compression algorithm such as gzip."),
    ("schedule a meeting with the team", "Pick a time when everyone is free and send a "
     "calendar invitation with the agenda."),
    ("the capital of Japan", "Tokyo is the largest city of Japan and the seat of its "
     "government."),
    ("change a car's oil", "Drain the old engine oil, replace the filter and refill with "
     "fresh oil of the right grade."),
    ("bake sourdough bread", "Mix flour, water, salt and an active starter, let the dough "
     "rise slowly, then bake it in a hot oven."),
    ("a vaccine's side effects", "After an injection some people feel a sore arm, mild "
     "fever or fatigue for a day or two."),
    ("hang a picture on the wall", "Mark the height, drive a nail or screw into the wall "
     "and hang the frame on its hook."),
    ("count the words in a text", "Split the text on whitespace and count how many pieces "
     "there are."),
    ("save money on electricity", "Turning off unused appliances and insulating the home "
     "lowers the power bill."),
    ("the rules of chess castling", "The king moves two squares towards a rook, which then "
     "jumps to the square the king crossed."),
    ("read a date from a string", "The parser turns text such as 2024-05-01 into a date "
     "object with a year, month and day."),
    ("stop a dripping tap", "Shut off the water supply and replace the worn washer inside "
     "the faucet."),
    ("photosynthesis in plants", "Leaves use sunlight to turn carbon dioxide and water "
     "into sugar, releasing oxygen."),
    ("book a table at a restaurant", "Call the restaurant or use its website to reserve "
     "seats for a chosen evening."),
    ("encrypt a message", "A cipher transforms readable text into a form only the holder "
     "of the key can read."),
)


@dataclass(frozen=True)
class Measurement:
    """What the pairs say of one model: the line its scores are mapped by, and its grade."""

    scale: ScoreScale
    grade: Grade
    recipe: str = RECIPE


def _cosines(encode_queries: Callable[[Sequence[str]], np.ndarray],
             encode_documents: Callable[[Sequence[str]], np.ndarray]) -> np.ndarray:
    queries = encode_queries([q for q, _ in PAIRS]).astype(np.float64)
    passages = encode_documents([p for _, p in PAIRS]).astype(np.float64)
    queries /= np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    passages /= np.maximum(np.linalg.norm(passages, axis=1, keepdims=True), 1e-12)
    return queries @ passages.T


def measure(encode_queries: Callable[[Sequence[str]], np.ndarray],
            encode_documents: Callable[[Sequence[str]], np.ndarray],
            model: str = "") -> Measurement:
    """The model's scale and grade, from the pairs' cosines."""
    cosines = _cosines(encode_queries, encode_documents)
    related = np.diag(cosines)
    unrelated = cosines[~np.eye(len(PAIRS), dtype=bool)]
    gap = float(related.mean() - unrelated.mean())
    return Measurement(scale=_scale(float(unrelated.mean()), float(related.mean()), model),
                       grade=_grade(cosines, unrelated, gap))


def _scale(unrelated: float, related: float, model: str) -> ScoreScale:
    spread = related - unrelated
    if spread < LEAST_SPREAD:
        log.warning("model %s scores related texts only %.3f above unrelated ones: it "
                    "cannot rank well; its scores are stretched at most %.0fx", model,
                    spread, (RELATED_REF - UNRELATED_REF) / LEAST_SPREAD)
        spread = LEAST_SPREAD
    gain = round((RELATED_REF - UNRELATED_REF) / spread, 3)
    offset = round(UNRELATED_REF - gain * unrelated, 3)
    return ScoreScale(gain=gain, offset=offset, unrelated=round(unrelated, 6),
                      related=round(related, 6))


def _grade(cosines: np.ndarray, unrelated: np.ndarray, gap: float) -> Grade:
    spread = max(float(unrelated.std()), 1e-9)
    # the scale's line, unbounded here: a model that cannot rank maps its noise far out
    gain = (RELATED_REF - UNRELATED_REF) / max(gap, 1e-9)
    noise = UNRELATED_REF + gain * (float(np.percentile(unrelated, 99)) - unrelated.mean())
    first = int(np.sum(np.argmax(cosines, axis=1) == np.arange(len(PAIRS))))
    return Grade(separation=round(gap / spread, 2), noise=round(min(float(noise), CAP), 3),
                 first=first, pairs=len(PAIRS))
