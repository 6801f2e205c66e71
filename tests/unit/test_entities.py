"""Names across sessions (core/entities.py): what the index takes for a name, how the hot
set brings in the nearest memories that name a query's names, and how ranking weighs them
(recall.w_entity)."""

from __future__ import annotations

import numpy as np
import pytest

from memray.config import RecallConfig
from memray.core.entities import Names
from memray.core.hotset import HotSet
from memray.core.ranking import rank
from memray.core.records import new_record
from memray.models import MemoryRecord, MemoryType, utcnow
from memray.store.base import StoredMemory, Where


def turn(content: str, session: str = "s1") -> MemoryRecord:
    return new_record(user_id="u", content=content, embedding_model="m", at=utcnow(),
                      type=MemoryType.MESSAGE, session_id=session)


def test_a_name_is_a_capitalised_word_the_user_never_writes_in_lower_case() -> None:
    names = Names(["Melanie: Wow, I took the kids camping near Sweden's lakes.",
                   "Caroline: wow! Pride was great, I felt such pride.",
                   "Melanie: What a day. Oliver the cat slept."])
    # "Wow" and "Pride" are written in lower case too; "What" and "I" are never names.
    assert names.named("Wow, what did Melanie and Caroline see at Pride?") == {
        "melanie", "caroline"}
    assert names.named("Where has Melanie's cat Oliver been? Sweden?") == {
        "melanie", "oliver", "sweden"}
    assert names.named("what did melanie do?") == frozenset()  # a name is capitalised
    assert names.named("Who is Bob?") == frozenset()  # not a name this user's memories name
    share = names.share(frozenset({"melanie", "oliver"}), 3)
    assert share.tolist() == [0.5, 0.0, 1.0]
    assert names.share(frozenset(), 3).tolist() == [0.0, 0.0, 0.0]


def test_names_in_any_latin_script_and_inside_chinese_text() -> None:
    names = Names(["Dinner with José and Zoë at McDonald's", "NASA called; I said OK",
                   "我姐姐Anna喜欢爵士乐", "O'Brien lent me a book"])
    assert names.named("Did José, Zoë or O'Brien come? And McDonald?") == {
        "josé", "zoë", "o'brien", "mcdonald"}
    assert names.named("Anna喜欢什么音乐？") == {"anna"}
    assert names.named("What did NASA say? OK?") == frozenset()  # all capitals: no name


def test_a_name_that_addresses_someone_is_not_what_the_memory_is_about() -> None:
    turns = ["John: Yeah, Maria. Taking time off matters.", "John: Hey Maria! Look at this.",
             "Caroline: Maria, did you see it?", "Melanie: Thanks, Maria!",
             "John: I visited Maria. Then Tom, Anna and Priya came.",
             "Maria: I took it at the beach."]
    names = Names(turns)
    share = names.share(names.named("When did Maria go to the beach?"), len(turns))
    # Spoken to in the first four; spoken of in the fifth; the sixth is hers (its label).
    assert share.tolist() == [0.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    assert names.named("Did Tom and Anna come?") == {"tom", "anna"}
    # Spoken of, though set off by commas: an apposition, a list, a title.
    said = Names(["Sam: My sister, Maria, is allergic to nuts.", "Sam: We saw Lisbon, Porto "
                  "and Faro.", "Sam: I met Dr. Smith.", "Sam: Wow, Caroline, that is great",
                  "Sam: That's so nice, Caroline!", "Sam: Then Braga, Evora, Lagos."])
    asked = said.named("Maria? Porto? Faro? Smith? Caroline? Lagos?")
    assert asked == {"maria", "porto", "faro", "smith", "lagos"}  # Caroline: spoken to only
    assert said.share(asked, 6).tolist() == pytest.approx([0.2, 0.4, 0.2, 0.0, 0.0, 0.2])
    # A stored fact is said to no one: a name before a comma is its subject.
    facts = Names(["Maria, my sister, is allergic to nuts", "Yeah, Maria."], [False, True])
    assert facts.share(facts.named("What is Maria allergic to?"), 2).tolist() == [1.0, 0.0]


def test_contractions_of_i_are_no_names_and_apostrophes_of_both_kinds_match() -> None:
    names = Names(["I'm tired, I've had a day with O'Brien", "I’ll call O’Brien"])
    assert names.named("I'm asking: what did O’Brien say? I'd like to know") == {"o'brien"}
    assert names.share(names.named("O'Brien?"), 2).tolist() == [1.0, 1.0]


def test_chinese_names_are_those_the_users_texts_introduce() -> None:
    # No capitals: a name is read where a text introduces it (core/names_zh.py).
    names = Names(["我朋友小明住在杭州", "小明下个月结婚", "杭州下雨了"])
    assert names.named("小明住在哪里？") == {"小明"}
    assert names.share(names.named("小明住在哪里？"), 3).tolist() == [1.0, 1.0, 0.0]
    assert names.named("杭州天气怎么样") == frozenset()  # a place nobody introduced
    assert Names(["我朋友住在杭州"]).named("小明住在哪里？") == frozenset()


def test_the_hot_set_brings_in_the_nearest_memories_that_name_the_query_names() -> None:
    # Axis 0 is the subject; the query's name is in the two turns furthest from it.
    texts = ["Caroline: I love painting", "Caroline: painting again", "Caroline: paint",
             "Melanie: I paint sometimes", "Melanie: we went camping"]
    rows = [turn(t, session=f"s{i}") for i, t in enumerate(texts)]
    vectors = np.array([[1, 0, 0], [0.9, 0.1, 0], [0.8, 0.2, 0], [0.5, 0.5, 0.5],
                        [0.1, 0.2, 0.9]], dtype=np.float32)
    stored = [StoredMemory(r, vectors[i]) for i, r in enumerate(rows)]
    query = np.array([1, 0, 0], dtype=np.float32)

    def got(names: bool, where: Where | None = None) -> dict[str, float]:
        found = HotSet(dim=3).hybrid("u", 1, query, "Did Melanie go camping?", 1,
                                     where or Where(), lambda: stored, names=names)
        assert found is not None
        return {c.record.content: c.named for c in found}

    # Without names: the nearest row, and the best keyword match (Melanie's camping turn).
    assert got(False) == {texts[0]: 0.0, texts[4]: 0.0}
    # With them, also the nearest row among those naming Melanie; each carries its share.
    assert got(True) == {texts[0]: 0.0, texts[4]: 1.0, texts[3]: 1.0}
    only = Where(ids=tuple(r.id for r in rows if r.content != texts[3]))
    assert got(True, where=only) == {texts[0]: 0.0, texts[4]: 1.0}


def test_memories_that_name_the_query_names_rank_up_by_w_entity() -> None:
    other, named = turn("Caroline: painting"), turn("Melanie: painting")
    cands = [(other, 0.6), (named, 0.5)]
    flat = RecallConfig(w_importance=0, w_recency=0, w_intent=0, w_episode=0, w_entity=0)
    share = {named.id: 1.0}
    order = rank(cands, flat, now=utcnow(), threshold=-1, cap=2, named=share)
    assert [h.memory.content for h in order] == [other.content, named.content]
    on = flat.model_copy(update={"w_entity": 0.2})
    hits = {h.memory.content: h for h in rank(cands, on, now=utcnow(), threshold=-1, cap=2,
                                                named=share)}
    assert hits[named.content].score == pytest.approx((0.7 * 0.5 + 0.2) / 0.9)
    assert hits[other.content].score == pytest.approx(0.7 * 0.6 / 0.9)
    # A query naming no name: the weight is left out, scores are the similarity's.
    plain = rank(cands, on, now=utcnow(), threshold=-1, cap=2, named={})
    assert [h.score for h in plain] == pytest.approx([0.6, 0.5])


def test_the_hot_set_tells_facts_from_turns_when_it_indexes_names() -> None:
    fact = new_record(user_id="u", content="Maria, my sister, is allergic to nuts",
                      embedding_model="m", at=utcnow(), type=MemoryType.FACT)
    said = turn("John: Yeah, Maria. Nuts are everywhere.")
    stored = [StoredMemory(fact, np.array([1, 0], np.float32)),
              StoredMemory(said, np.array([0, 1], np.float32))]
    found = HotSet(dim=2).hybrid("u", 1, np.array([1, 1], np.float32), "What is Maria allergic to?",
                                 2, Where(), lambda: stored, names=True)
    assert found is not None
    assert {c.record.content: c.named for c in found} == {fact.content: 1.0, said.content: 0.0}
