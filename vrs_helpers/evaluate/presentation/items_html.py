"""The body of an item-analysis report (:func:`items_body`; issue 55), from a :class:`~.result.Result` of kind
``"items"``: the benchmark's reliability for comparing models and its decision study, the flagged items with their
ids (untrusted text: every value escaped by :func:`~.html.table`), then - collapsed - every item, the models, the
variance components and the notes. Also the plain-text lines of the console and summary.txt (:func:`items_lines`,
:func:`items_summary_lines`)."""

from __future__ import annotations

from ...literal import html_text
from .html import bullets, details, num, table

FLAG_TEXT = {"negative_discrimination": "Negative discrimination: the better models get these wrong (mislabelled or "
                                        "ambiguous? read them)",
             "no_information": "No information: every model scores the same",
             "flips_across_runs": "Flips across runs: the result differs between runs for half of the models or more"}
ITEM_COLUMNS = ["item", "p_value", "difficulty", "difficulty_se", "discrimination", "discrimination_se",
                "item_rest", "flip_rate", "flags"]
HEADERS = {"p_value": "share correct", "difficulty": "difficulty (Rasch)", "difficulty_se": "SE",
           "discrimination_se": "SE", "item_rest": "item-rest r", "flip_rate": "flip rate"}


def _need(v) -> str:
    """Items or runs needed; None (infinite in the analysis): no number of them reaches the target."""
    return "not reachable" if v is None or v == float("inf") else num(v)


def reliability_rows(rel: dict) -> list:
    """The reliability's headline numbers as (quantity, value) records."""
    rows = [("φ (absolute: the share of the models' variance in their scores)",
             num(rel.get("phi"), 3) + f" ({rel.get('interpretation', '')})"),
            ("relative coefficient E ρ² (rankings)", num(rel.get("relative"), 3)),
            ("items (runs)", f"{rel.get('n_items')} ({num(rel.get('n_runs'), 3)})")]
    for key, name in (("phi", "φ"), ("relative", "E ρ²")):
        for t in ("80", "90"):
            rows.append((f"items needed for {name} ≥ 0.{t[0]}", _need(rel.get(f"items_needed_{key}_{t}"))))
            if f"runs_needed_{key}_{t}" in rel:
                rows.append((f"runs needed for {name} ≥ 0.{t[0]}", _need(rel.get(f"runs_needed_{key}_{t}"))))
    rows += [(f"smallest difference resolved (α = {num(rel.get('alpha'))})", num(rel.get("smallest_difference"), 3)),
             ("smallest difference detected with 80 % power", num(rel.get("smallest_difference_power80"), 3)),
             ("signal-to-noise (Heineman et al. 2025)", num(rel.get("signal_to_noise"), 3) or "needs runs"),
             ("saturation (items every top model solves)", num(rel.get("saturation"), 3))]
    return [{"quantity": q, "value": v} for q, v in rows]


def _reliability(data: dict) -> str:
    rel = data.get("reliability")
    if not rel:
        return "<h2>Reliability</h2><p>One model: the reliability for comparing models needs two or more.</p>"
    comps = details("Variance components (" + str(rel.get("formula", "")) + ")",   # details() escapes it
                    table(rel.get("components") or []))
    study = details("Decision study: φ and E ρ² by items (and runs)", table(rel.get("decision_study") or [],
                                                                             headers={"phi": "φ",
                                                                                      "relative": "E ρ²"}))
    return "<h2>How reliably the benchmark ranks the models</h2>" + table(reliability_rows(rel)) + comps + study


def _flagged(data: dict) -> str:
    rows = data.get("items") or []
    out = ["<h2>Flagged items</h2>"]
    any_flag = False
    for flag, text in FLAG_TEXT.items():
        hit = [r for r in rows if flag in (r.get("flags") or [])]
        if not hit:
            continue
        any_flag = True
        out.append(details(f"{text} ({len(hit)})", table(hit, ITEM_COLUMNS, HEADERS),
                           open_=flag == "negative_discrimination"))
    if not any_flag:
        out.append("<p>No item is flagged.</p>")
    return "".join(out)


def _subset(data: dict) -> str:
    sub = data.get("subset")
    if not sub:
        return ""
    n = sub.get("n_recommended")
    head = (f"<p>{num(n)} items chosen by difficulty strata keep the ranking with Spearman's ρ ≥ 0.95 on "
            "held-out models:</p>" if n else "<p>No subset size in the grid keeps Spearman's ρ ≥ 0.95.</p>")
    return details("A smaller benchmark that keeps the ranking", head + table(
        sub.get("rows") or [], headers={"rmse": "RMSE", "n_items": "items"})
        + f'<p class="caption">{html_text(sub.get("method", ""))}.</p>'
        + (details("The chosen items", table(sub.get("chosen") or [])) if n else ""))


def items_body(data: dict) -> str:
    """The sections of an item-analysis report (after its title, the warnings and the answer)."""
    rasch = data.get("rasch") or {}
    caption = (f'<p class="caption">Difficulty: Rasch, {html_text(rasch.get("formula", ""))} '
               f'({html_text(rasch.get("scale", ""))}). Discrimination: the {html_text(data.get("discrimination"))}.'
               "</p>") if rasch else ""
    return (_reliability(data) + _flagged(data) + _subset(data)
            + details("Every item", table(data.get("items") or [], ITEM_COLUMNS, HEADERS) + caption)
            + details("The models", table(data.get("models") or []))
            + details("Notes", bullets(data.get("notes") or [])))


def how_to_read_items() -> str:
    return ("<p>φ is the share of the variance of the models' benchmark scores that is true differences between "
            "the models, the rest being the sampling of items (and runs): φ ≥ 0.8 is good. The relative "
            "coefficient counts only what can change a ranking. The decision study says how many items (runs) "
            "would reach 0.8 or 0.9. An item whose item-rest correlation is significantly negative (Benjamini-"
            "Hochberg over the items) is answered correctly by the worse models and wrongly by the better: read "
            "it.</p>")


def items_lines(data: dict) -> list:
    """The console lines after the answer: the reliability in one line and the flag counts."""
    rel = data.get("reliability") or {}
    lines = []
    if rel:
        lines.append(f"Reliability: phi = {num(rel.get('phi'), 3)}, relative = {num(rel.get('relative'), 3)}; items "
                     f"needed for phi >= 0.8: {_need(rel.get('items_needed_phi_80'))}, for 0.9: "
                     f"{_need(rel.get('items_needed_phi_90'))}.")
    counts = {f: len(v) for f, v in (data.get("flagged") or {}).items() if v}
    if counts:
        lines.append("Flagged items: " + ", ".join(f"{f} {n}" for f, n in counts.items()) + ".")
    return lines


def items_summary_lines(data: dict, text_table) -> list:
    """summary.txt's tables: the reliability and every flagged item."""
    lines = []
    rel = data.get("reliability")
    if rel:
        lines += ["", "Reliability for comparing models:", *text_table(reliability_rows(rel))]
    flagged = [r for r in data.get("items") or [] if r.get("flags")]
    if flagged:
        lines += ["", "Flagged items:", *text_table([{**r, "flags": ", ".join(r["flags"])} for r in flagged],
                                                   ITEM_COLUMNS)]
    lines += [f"Note: {n}" for n in data.get("notes") or []]
    return lines
