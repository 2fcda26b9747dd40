"""Pure logic with no Dagster import: parsing, prompts, answer extraction, scoring, statistics, and the
warehouse tables' column contracts (`tables.py`).

Everything here is a plain function over plain data, tested directly. The Dagster shell
(`exams/`, `inference/`, `scoring/`, `automation/`) wires it to files, HTTP and the warehouse.
"""
