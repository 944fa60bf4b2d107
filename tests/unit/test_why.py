"""A result file's "Why" part, from a search result and its details alone: where the
query's words are, as a reader would find them, and what is said to be whose."""

from __future__ import annotations

from kg_fuse.client.models import ConceptDetail, ConceptHit, Evidence
from kg_fuse.client.why import MatchedWord, ServerWhy
from kg_fuse.fs.queries.why import explain, listing, query_words, summarise, summary_lines


def hit(why: ServerWhy | None = None, score: float = 0.6) -> ConceptHit:
    return ConceptHit("c1", "gzip.GzipFile", "The GzipFile class compresses data.", score,
                      ("Compression",), why)


DETAIL = ConceptDetail("c1", "gzip.GzipFile", "The GzipFile class compresses data.",
                       ("Compression",), (Evidence("Reads compressed files.", "Compression", 1),),
                       (), "GzipFile(filename=None, mode=None)")


def test_query_words_leave_out_function_words_and_letters() -> None:
    assert query_words("Compress THE data, with a gzip & a b 42") == ("compress", "data",
                                                                     "gzip")


def test_a_word_is_found_in_its_forms_and_in_split_names() -> None:
    ctx = listing("compress a file with gzip", 0.5, True, [hit()], ())
    why = explain(hit(), DETAIL, ctx)
    assert why.text.splitlines()[1] == ("- words: compress in the description and "
                                        "evidence; file in the label, signature and evidence; gzip "
                                        "in the label and signature")
    assert "by meaning alone" not in why.text and "not in its text" not in why.text
    assert why.text.splitlines()[0].startswith("Why it is listed (the server does not say")


def test_a_reading_the_server_matched_is_named_with_its_relation() -> None:
    server = ServerWhy(0.5, 0.1, 0.4, 0.9,
                       (MatchedWord("squeeze", "compresses", "meaning", "broader", 0.1),))
    ctx = listing("squeeze", 0.3, False, [hit(server, 0.6), hit(None, 0.7)], ())
    why = explain(hit(server), DETAIL, ctx).text.splitlines()
    assert why[0] == "Why it is listed:"
    assert why[1] == ("- read as: squeeze as compresses (WordNet: a broader term) in the "
                      "description")
    assert why[2] == ("- score: 0.6000 = meaning 0.5000 (the model's similarity x0.90: not "
                      "every word is the documents' own) + words 0.1000 (squeeze 0.1000)")
    assert why[3] == ("- threshold: 0.3 (this query's own), passed by 0.3000; 0.1000 below "
                      "the best listed (0.7000)")


def test_the_summary_counts_words_readings_and_meaning_alone() -> None:
    alone = ServerWhy(0.4, 0.0, 0.0, 1.0, ())
    ctx = listing("gzip spreadsheet", 0.3, True, [hit()], ())
    whys = [explain(hit(), DETAIL, ctx), explain(
        ConceptHit("c2", "csv.excel", "Excel dialect.", 0.4, (), alone), None, ctx)]
    assert summary_lines(summarise(whys, ctx, by_server=True)) == [
        "words found: gzip in 1 of 2", "words in no result: spreadsheet",
        "by meaning alone: 1 of 2 (the query's words added nothing to their scores)"]
