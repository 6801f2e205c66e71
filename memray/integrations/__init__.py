"""Adapters that let agent frameworks use memray through their own interfaces
(`memray.integrations.langgraph.MemrayStore`). Each imports its framework itself, so
`import memray` never needs one installed."""
