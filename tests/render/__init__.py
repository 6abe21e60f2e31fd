"""Rendering: Markdown, HTML, PDF, the answer form, typography, page fit, templates, pages in every language."""
