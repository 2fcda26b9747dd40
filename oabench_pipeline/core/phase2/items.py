"""OAB-Bench's items (`question.jsonl`) and the examiners' answer standards (`guidelines.jsonl`), parsed.

An area-exam (edition × area) has one procedural piece (`..._peca_praticoprofissional`: one turn, 5.00
points) and four discursive questions (`..._questao_1`..`_4`: two turns, sub-items A and B, 1.25 points
together). Each standard's turn ends with the distribution table (`| ITEM | PONTUAÇÃO |`): one row per
criterion, its text and the points an examiner may give it (`0,00/0,10/0,20`); rows whose points are `nan`
are section headings (`Pedidos`, `Fechamento`). Anything else is refused with a `Phase2DataError` naming the
item, the sub-item and the row.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

ItemKind = Literal["piece", "question"]

PIECE_SUFFIX = "peca_praticoprofissional"
_QUESTION_SUFFIX = re.compile(r"questao_([1-4])")
_CATEGORY = re.compile(r"(\d+)_([a-z_]+)")
_POINTS_VALUE = re.compile(r"\d+[.,]\d+")
# A points cell is values separated by slashes and/or spaces ("0,00/0,20/0,30 0,40/0,50", "0.00/0,55").
_POINTS_CELL = re.compile(r"\d+[.,]\d+(?:\s*/?\s*\d+[.,]\d+)*")
_HEADING_POINTS = "nan"
_ANNULLED = re.compile(r"\(\s*anulad[ao]\s*\)", re.IGNORECASE)
AREA_EXAM_POINTS = 10.0
PIECE_POINTS = 5.0
QUESTION_POINTS = 1.25


class Phase2DataError(ValueError):
    """A phase-2 file that does not say what this parser expects; the message names the file, item and row."""


@dataclass(frozen=True)
class Phase2Item:
    item_id: str
    edition: int
    area: str
    kind: ItemKind
    number: int | None
    statement: str
    system: str
    turn_prompts: tuple[str, ...]
    turn_points: tuple[float, ...]

    @property
    def max_points(self) -> float:
        return round(sum(self.turn_points), 2)

    @property
    def area_exam(self) -> tuple[int, str]:
        return self.edition, self.area


@dataclass(frozen=True)
class Criterion:
    text: str
    max_points: float
    allowed: tuple[float, ...]


@dataclass(frozen=True)
class SubItemStandard:
    item_id: str
    edition: int
    area: str
    turn: int
    standard: str
    points: float
    criteria: tuple[Criterion, ...]
    annulled: bool


def jsonl_records(text: str, what: str) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-empty line; a line that is not a JSON object is refused.

    Lines end at "\n" only: `str.splitlines` would also split at U+2028 or U+0085, which JSON strings in
    these files hold raw."""
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise Phase2DataError(f"{what} line {number}: not JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise Phase2DataError(f"{what} line {number}: not a JSON object")
        yield number, record


def _field(record: dict, name: str, kind: type, where: str) -> object:
    value = record.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise Phase2DataError(f"{where}: field '{name}' missing or not {kind.__name__}")
    return value


def split_item_id(item_id: str, category: str, where: str) -> tuple[int, str, ItemKind, int | None]:
    """(edition, area, kind, question number) of `39_direito_civil_questao_2` in category `39_direito_civil`."""
    category_match = _CATEGORY.fullmatch(category)
    if not category_match or not item_id.startswith(category + "_"):
        raise Phase2DataError(
            f"{where}: id {item_id!r} is not '<edition>_<area>_...' of category {category!r}"
        )
    edition, area = int(category_match[1]), category_match[2]
    suffix = item_id[len(category) + 1 :]
    if suffix == PIECE_SUFFIX:
        return edition, area, "piece", None
    if question := _QUESTION_SUFFIX.fullmatch(suffix):
        return edition, area, "question", int(question[1])
    raise Phase2DataError(f"{where}: id {item_id!r} is neither the piece nor questao_1..4")


def parse_items(text: str, what: str = "question.jsonl") -> list[Phase2Item]:
    """Every item of OAB-Bench's `question.jsonl`, in file order."""
    items, seen = [], set()
    for number, record in jsonl_records(text, what):
        where = f"{what} line {number}"
        item_id = str(_field(record, "question_id", str, where))
        where = f"{what} item {item_id}"
        if item_id in seen:
            raise Phase2DataError(f"{where}: listed twice")
        seen.add(item_id)
        edition, area, kind, question_number = split_item_id(
            item_id, str(_field(record, "category", str, where)), where
        )
        turns = _field(record, "turns", list, where)
        values = _field(record, "values", list, where)
        assert isinstance(turns, list) and isinstance(values, list)
        expected_turns = 1 if kind == "piece" else 2
        if len(turns) != expected_turns or len(values) != expected_turns:
            raise Phase2DataError(
                f"{where}: a {kind} has {expected_turns} turn(s) and as many values; "
                f"got {len(turns)} turn(s), {len(values)} value(s)"
            )
        # The piece's one turn is empty in OAB-Bench: its statement holds the whole task.
        if not all(isinstance(t, str) for t in turns) or (
            kind == "question" and not all(t.strip() for t in turns)
        ):
            raise Phase2DataError(f"{where}: a turn is not text, or a question's sub-item is empty")
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in values):
            raise Phase2DataError(f"{where}: values {values} are not positive points")
        items.append(
            Phase2Item(
                item_id=item_id,
                edition=edition,
                area=area,
                kind=kind,
                number=question_number,
                statement=str(_field(record, "statement", str, where)),
                system=str(_field(record, "system", str, where)),
                turn_prompts=tuple(turns),
                turn_points=tuple(round(float(v), 2) for v in values),
            )
        )
    if not items:
        raise Phase2DataError(f"{what}: no items")
    return items


def parse_points_cell(cell: str) -> tuple[float, ...]:
    """`0,00/0,10/ 0,20` → (0.0, 0.1, 0.2): comma or dot decimals, slashes and/or spaces between values,
    strictly increasing. Raises `ValueError` saying what is wrong."""
    cleaned = cell.strip()
    if not _POINTS_CELL.fullmatch(cleaned):
        raise ValueError(f"points {cell.strip()!r} are not values like 0,00/0,10/0,20")
    allowed = tuple(round(float(v.replace(",", ".")), 2) for v in _POINTS_VALUE.findall(cleaned))
    if any(b <= a for a, b in pairwise(allowed)):
        raise ValueError(f"points {cleaned!r} do not increase")
    return allowed


def _table_rows(turn_text: str, where: str) -> list[tuple[str, str]]:
    """The distribution table's body rows as (item, points) cells; the header and rule lines dropped."""
    lines = [line.strip() for line in turn_text.split("\n")]
    table = [i for i, line in enumerate(lines) if line.startswith("|")]
    if not table:
        raise Phase2DataError(f"{where}: no distribution table (| ITEM | PONTUAÇÃO |)")
    if table != list(range(table[0], table[-1] + 1)):
        raise Phase2DataError(f"{where}: the distribution table is interrupted by text")
    header = [c.strip() for c in lines[table[0]].strip("|").split("|")]
    if [c.upper() for c in header] != ["ITEM", "PONTUAÇÃO"]:
        raise Phase2DataError(f"{where}: the table's header is {header}, not ITEM | PONTUAÇÃO")
    rows = []
    for index in table[2:]:
        cells = [c.strip() for c in lines[index].strip("|").split("|")]
        if len(cells) != 2:
            raise Phase2DataError(f"{where}: table row {lines[index][:80]!r} has {len(cells)} cells, not 2")
        rows.append((cells[0], cells[1]))
    return rows


def parse_criteria(turn_text: str, where: str) -> tuple[Criterion, ...]:
    """The criteria of one sub-item's distribution table; heading rows (`nan`) are skipped."""
    criteria = []
    for text, points in _table_rows(turn_text, where):
        if points.lower() == _HEADING_POINTS:
            continue
        if not text:
            raise Phase2DataError(f"{where}: a criterion with points {points!r} has no text")
        try:
            allowed = parse_points_cell(points)
        except ValueError as error:
            raise Phase2DataError(f"{where}: criterion {text[:60]!r}: {error}") from None
        criteria.append(Criterion(text=text, max_points=allowed[-1], allowed=allowed))
    if not criteria:
        raise Phase2DataError(f"{where}: the distribution table has no criterion")
    return tuple(criteria)


def parse_standards(
    text: str, items: Mapping[str, Phase2Item], what: str = "guidelines.jsonl"
) -> list[SubItemStandard]:
    """One standard per sub-item of every item in `items` (by id), each with its parsed criteria."""
    standards, seen = [], set()
    for number, record in jsonl_records(text, what):
        item_id = str(_field(record, "question_id", str, f"{what} line {number}"))
        where = f"{what} item {item_id}"
        item = items.get(item_id)
        if item is None:
            raise Phase2DataError(f"{where}: no such item in question.jsonl")
        if item_id in seen:
            raise Phase2DataError(f"{where}: listed twice")
        seen.add(item_id)
        choices = _field(record, "choices", list, where)
        assert isinstance(choices, list)
        turns = choices[0].get("turns") if choices and isinstance(choices[0], dict) else None
        if not isinstance(turns, list) or len(turns) != len(item.turn_points):
            raise Phase2DataError(
                f"{where}: choices[0].turns must hold one standard per sub-item ({len(item.turn_points)})"
            )
        for turn, (standard, points) in enumerate(zip(turns, item.turn_points, strict=True), start=1):
            if not isinstance(standard, str) or not standard.strip():
                raise Phase2DataError(f"{where} sub-item {turn}: empty standard")
            standards.append(
                SubItemStandard(
                    item_id=item_id,
                    edition=item.edition,
                    area=item.area,
                    turn=turn,
                    standard=standard,
                    points=points,
                    criteria=parse_criteria(standard, f"{where} sub-item {turn}"),
                    annulled=bool(_ANNULLED.search(standard)),
                )
            )
    missing = sorted(set(items) - seen)
    if missing:
        raise Phase2DataError(f"{what}: no standard for {len(missing)} item(s), e.g. {missing[0]}")
    return standards


# -- checks (the assets' asset checks run these) ----------------------------------------------------------


def area_exam_problems(items: list[Phase2Item]) -> list[str]:
    """Area-exams that are not one piece of 5.00 and questions 1-4 of 1.25, 10.00 in all."""
    problems = []
    exams: dict[tuple[int, str], list[Phase2Item]] = {}
    for item in items:
        exams.setdefault(item.area_exam, []).append(item)
    for (edition, area), members in sorted(exams.items()):
        name = f"{edition}_{area}"
        pieces = [i for i in members if i.kind == "piece"]
        numbers = sorted(i.number for i in members if i.number is not None)
        if len(pieces) != 1 or numbers != [1, 2, 3, 4]:
            problems.append(f"{name}: {len(pieces)} piece(s) and questions {numbers}, not 1 and 1-4")
        total = round(sum(i.max_points for i in members), 2)
        if total != AREA_EXAM_POINTS:
            problems.append(f"{name}: points sum to {total:.2f}, not {AREA_EXAM_POINTS:.2f}")
        for item in members:
            expected = PIECE_POINTS if item.kind == "piece" else QUESTION_POINTS
            if item.max_points != expected:
                problems.append(f"{item.item_id}: {item.max_points:.2f} points, not {expected:.2f}")
    return problems


def criterion_problems(standards: list[SubItemStandard]) -> list[str]:
    """Criteria whose maximum is not one of their allowed values."""
    problems = []
    for standard in standards:
        for criterion in standard.criteria:
            where = f"{standard.item_id} sub-item {standard.turn} criterion {criterion.text[:50]!r}"
            if criterion.max_points not in criterion.allowed:
                problems.append(f"{where}: maximum {criterion.max_points} not in {list(criterion.allowed)}")
    return problems


def criteria_total_problems(standards: list[SubItemStandard]) -> list[str]:
    """Sub-items whose criteria's maxima do not add up to the sub-item's points: the source's own tables
    disagree with its items in 3 sub-items (docs/phase2.md), so this is a warning, not a refusal."""
    problems = []
    for standard in standards:
        total = round(sum(c.max_points for c in standard.criteria), 2)
        if total != standard.points:
            problems.append(
                f"{standard.item_id} sub-item {standard.turn}: criteria add up to {total:.2f}, "
                f"the sub-item has {standard.points:.2f}"
            )
    return problems


def items_from_rows(rows: list[dict]) -> dict[str, Phase2Item]:
    """`phase2_items` rows (as `DataFrame.to_dicts()` gives them) back into items, by id."""
    return {
        row["item_id"]: Phase2Item(
            item_id=row["item_id"],
            edition=int(row["edition"]),
            area=row["area"],
            kind=row["kind"],
            number=row["number"],
            statement=row["statement"],
            system=row["system"],
            turn_prompts=tuple(row["turn_prompts"]),
            turn_points=tuple(row["turn_points"]),
        )
        for row in rows
    }
