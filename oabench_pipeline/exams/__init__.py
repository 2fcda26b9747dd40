"""Exams domain: official PDFs, parsed questions and answer keys, and their checks."""
