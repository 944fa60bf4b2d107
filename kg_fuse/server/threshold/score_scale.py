"""A model's scores put on one scale, so every tuned score holds for any model (ADR-508):
the line measured for a model, and kept in its store.

Sentence models spread their cosines differently: all-MiniLM-L6-v2 scores unrelated texts
near 0.03 and a query against its answer near 0.56 (the pairs below), while e5 or nomic
put nearly everything between 0.7 and 0.9. Every score the search is tuned in (the keyword lift, the
familiarity discount, the near-miss floor, the presets' steps, the calibration's margin,
the mount's cut) was chosen on MiniLM's spread. So the model's cosine is mapped onto
MiniLM's, by the straight line that takes this model's mean cosine of unrelated pairs to
MiniLM's and its mean cosine of related pairs to MiniLM's:

    score = gain * cosine + offset
    gain  = (related_ref - unrelated_ref) / (related - unrelated)
    offset = unrelated_ref - gain * unrelated

measured once per store and model (:func:`ensure`: the same query/passage pairs,
embedded as queries and documents with the model's own prompts), stored with the
calibration, and rounded to three decimals so that MiniLM itself gets gain 1 and offset 0
exactly: today's model scores as before, to the bit. The noise floor and the default are
then calibrated on the mapped scores, as before. The pairs are everyday questions and the
sentences that answer them, across topics no eval set is about; they do not tune
anything, they only measure how far apart this model puts related and unrelated text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np

from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.search import tuning
from kg_fuse.server.search.scale import IDENTITY, ScoreScale
from kg_fuse.server.storage.store import Store
from kg_fuse.server.threshold.keys import SCALE_KEY

log = logging.getLogger(__name__)

#: MiniLM's mean cosine of the pairs below: unrelated (every query against the other
#: queries' passages) and related (each query against its own passage).
UNRELATED_REF, RELATED_REF = tuning.SCORE_SCALE_REFERENCE.value
#: A model that puts related pairs less than this above unrelated ones cannot rank:
#: its gain is capped rather than amplifying noise without bound.
LEAST_SPREAD = tuning.SCORE_SCALE_LEAST_SPREAD.value

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


def measure(encode_queries: Callable[[Sequence[str]], np.ndarray],
            encode_documents: Callable[[Sequence[str]], np.ndarray],
            model: str = "") -> ScoreScale:
    """This model's scale, from the pairs' cosines (a few dozen short texts: ~0.1 s)."""
    queries = encode_queries([q for q, _ in PAIRS]).astype(np.float64)
    passages = encode_documents([p for _, p in PAIRS]).astype(np.float64)
    queries /= np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    passages /= np.maximum(np.linalg.norm(passages, axis=1, keepdims=True), 1e-12)
    cosines = queries @ passages.T
    related = float(np.mean(np.diag(cosines)))
    n = len(PAIRS)
    unrelated = float((cosines.sum() - np.trace(cosines)) / (n * n - n))
    spread = related - unrelated
    if spread < LEAST_SPREAD:
        log.warning("model %s scores related texts only %.3f above unrelated ones: it "
                    "cannot rank well; its scores are stretched at most %.0fx", model,
                    spread, (RELATED_REF - UNRELATED_REF) / LEAST_SPREAD)
        spread = LEAST_SPREAD
    gain = round((RELATED_REF - UNRELATED_REF) / spread, 3)
    offset = round(UNRELATED_REF - gain * unrelated, 3)
    return ScoreScale(gain=gain, offset=offset, unrelated=round(unrelated, 6),
                      related=round(related, 6), model=model)


def stored(store: Store) -> ScoreScale:
    """The scale the store keeps (the identity for a store that keeps none)."""
    return ScoreScale.from_json(store.get_setting(SCALE_KEY)) or IDENTITY


def ensure(store: Store, embedder: Embedder) -> ScoreScale:
    """The model's score scale for this store: stored, or measured now and stored."""
    key = f"{embedder.name}@{embedder.spec.digest}"
    held = ScoreScale.from_json(store.get_setting(SCALE_KEY))
    if held is not None and held.model == key:
        return held
    measured = measure(embedder.encode_queries, embedder.encode, model=key)
    log.info("score scale of %s: unrelated pairs %.3f, related %.3f -> gain %.3f, "
             "offset %.3f%s", embedder.name, measured.unrelated, measured.related,
             measured.gain, measured.offset,
             " (the reference model's own)" if measured.identity else "")
    store.set_setting(SCALE_KEY, measured.to_json())
    return measured
