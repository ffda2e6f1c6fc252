"""The demo: the bilingual sample generator and the end-to-end tour."""
