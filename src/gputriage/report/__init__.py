"""Presentation: the only package that may import rich or jinja2. Renderers read a Diagnosis, never measure."""
