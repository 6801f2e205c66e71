"""`embedder.model: use-multilingual-v3` (the `multilingual` extra) end to end on milvus-lite:
its own 512-d collection, Chinese memories found by Chinese and English questions."""

from __future__ import annotations

from pathlib import Path

from memray import Memory, MemoryConfig


def test_use_finds_a_chinese_memory_from_a_question_in_either_language(tmp_path: Path) -> None:
    cfg = MemoryConfig.model_validate({"data_dir": str(tmp_path / "d"),
                                       "embedder": {"model": "use-multilingual-v3"}})
    with Memory(cfg) as mem:
        for text in ("我对花生过敏", "我在医院上夜班", "我女儿拉小提琴", "我开一辆旧丰田"):
            mem.add(text, user_id="li", infer=False)
        mem.add("I am allergic to peanuts", user_id="other", infer=False)
        for question in ("我能吃花生酱吗？", "Can I eat peanut butter?"):
            hits = mem.search(question, user_id="li", top_k=1, threshold=-1.0)
            assert [h.memory.content for h in hits] == ["我对花生过敏"], question
            assert hits[0].memory.embedding_model == "use-multilingual-v3"
        assert all(h.memory.user_id == "li"
                   for h in mem.search("peanuts", user_id="li", threshold=-1.0))
