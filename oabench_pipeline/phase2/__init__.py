"""The 2nd phase's Dagster assets: models' answers (`phase2_answers`) and judges' judgments (`phase2_judgments`)."""
