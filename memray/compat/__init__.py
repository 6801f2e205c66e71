"""Drop-in surfaces for code written against other memory libraries (`memray.compat.mem0`)."""
